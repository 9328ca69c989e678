"""Guest RAM on 2 MiB huge pages through libvirt: <memoryBacking><hugepages/>
is defined, shown back by dumpxml, runs the shim's RAM on hugetlbfs pages
(its mapping's KernelPageSize, from /proc), and survives snapshot and revert
with the guest's memory checked against the host's own checksum. A host
with too few huge pages refuses the start with the numbers and leaves
nothing running. The test reserves its huge pages and gives them back."""

import os
import re
import sys
import unittest

from disktest import PATTERN, pattern_sum
from vsnapd import DaemonTest, domain_xml, needs_guest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import GUEST_FILL_BASE, HugePages, hugepages_available, wait_command_port  # noqa: E402

MIB = 1 << 20
FILL = 16 * MIB


def ram_kernel_page_kib(pid):
    """KernelPageSize of the guest RAM mapping of shim pid."""
    with open(f"/proc/{pid}/smaps") as f:
        in_ram = False
        for line in f:
            if not line[0].isupper():
                in_ram = "vsnap-guest-ram" in line
            elif in_ram and line.startswith("KernelPageSize:"):
                return int(line.split()[1])
    raise AssertionError(f"shim {pid} has no guest RAM mapping")


def huge_xml(name, memory_mib, backing="<hugepages/>"):
    xml = domain_xml(name, memory_mib=memory_mib, cmdline="vsnap.fill_mib=16 vsnap.seed=5")
    return re.sub(r"(  <memory unit='MiB'>\d+</memory>\n)",
                  lambda m: m.group(1) + f"  <memoryBacking>{backing}</memoryBacking>\n", xml)


@needs_guest
@unittest.skipUnless(PATTERN, "VSNAP_PATTERN is not set")
@unittest.skipUnless(HugePages.can_reserve(), "huge pages need root and a default huge page size of 2 MiB")
class HugePagesTest(DaemonTest):
    def define_xml(self, name, xml):
        path = os.path.join(self.daemon.dir, name + ".xml")
        with open(path, "w") as f:
            f.write(xml)
        self.daemon.virsh("define", path)

    def guest_sum(self, name):
        conn = wait_command_port(os.path.join(self.daemon.state, "run", name, "vsock.sock"), 60,
                                 connect_timeout=30)
        try:
            return conn.cmd(f"SUM {GUEST_FILL_BASE:#x} {FILL:#x}")
        finally:
            conn.close()

    def test_start_snapshot_revert_on_huge_pages(self):
        v = self.daemon.virsh
        self.define_xml("h", huge_xml("h", 64))
        inactive = v("dumpxml", "h").stdout
        self.assertIn("  <memoryBacking>\n    <hugepages/>\n  </memoryBacking>\n", inactive)
        want = "SUM " + pattern_sum(5, FILL)
        with HugePages(2 * 32 + 8):   # the run and, during a revert, its successor
            v("start", "h")
            self.assertEqual(ram_kernel_page_kib(self.daemon.shim_pids()["h"]), 2048)
            self.assertEqual(self.guest_sum("h"), want)
            v("snapshot-create-as", "h", "s1")
            conn = wait_command_port(os.path.join(self.daemon.state, "run", "h", "vsock.sock"), 60)
            try:
                self.assertEqual(conn.cmd(f"FILL {GUEST_FILL_BASE:#x} {MIB:#x} 9"), "OK")
            finally:
                conn.close()
            self.assertNotEqual(self.guest_sum("h"), want)
            v("snapshot-revert", "h", "s1")
            self.assertEqual(ram_kernel_page_kib(self.daemon.shim_pids()["h"]), 2048)
            self.assertEqual(self.guest_sum("h"), want)
            self.assertIn("<hugepages/>", v("dumpxml", "h").stdout)
            v("destroy", "h")

    def test_too_few_huge_pages_refuse_the_start(self):
        want = hugepages_available() + 16
        self.define_xml("big", huge_xml("big", 2 * want, "<hugepages><page size='2048' unit='KiB'/></hugepages>"))
        self.assertIn("<page size='2048' unit='KiB'/>", self.daemon.virsh("dumpxml", "big").stdout)
        res = self.daemon.virsh("start", "big", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(f"needs {want} huge pages of 2 MiB", res.stderr)
        self.assertIn("vm.nr_hugepages", res.stderr)
        self.assertEqual(self.daemon.virsh("domstate", "big").stdout.strip(), "shut off")
        self.assertEqual(self.daemon.shim_pids(), {})


if __name__ == "__main__":
    unittest.main()
