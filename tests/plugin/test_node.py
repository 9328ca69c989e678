"""The host through virsh and python3-libvirt: nodememstats, nodecpustats,
sysinfo and freecell, checked against the host's own files as libvirt's QEMU
driver reads them (/proc/meminfo, /proc/stat, /sys/devices/system/node,
/sys/class/dmi/id)."""

import glob
import os
import unittest
import xml.etree.ElementTree as ET

import libvirt

from vsnapd import DaemonTest

DMI = "/sys/class/dmi/id"


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, rest = line.split(":", 1)
            out[name] = int(rest.split()[0])
    return out


def cpu_ticks(cpu=None):
    key = "cpu" if cpu is None else f"cpu{cpu}"
    with open("/proc/stat") as f:
        for line in f:
            words = line.split()
            if words[0] == key:
                return [int(w) for w in words[1:]]
    raise AssertionError(f"no {key} in /proc/stat")


def dmi_attrs():
    out = {}
    for path in glob.glob(os.path.join(DMI, "*")):
        try:
            with open(path) as f:
                value = f.read().strip()
        except OSError:
            continue
        if value:
            out[os.path.basename(path)] = value
    return out


class NodeTest(DaemonTest):
    def test_nodememstats(self):
        lines = self.daemon.virsh("nodememstats").stdout.split("\n")
        stats = {l.split(":")[0].strip(): int(l.split(":")[1].split()[0]) for l in lines if ":" in l}
        self.assertEqual(set(stats), {"total", "free", "buffers", "cached"})
        self.assertEqual(stats["total"], meminfo()["MemTotal"])
        conn = self.daemon.connect()
        py = conn.getMemoryStats(libvirt.VIR_NODE_MEMORY_STATS_ALL_CELLS)
        self.assertEqual(py["total"], meminfo()["MemTotal"])
        self.assertLessEqual(py["free"], py["total"])
        # Cell 0 from its NUMA node's meminfo; a cell the host lacks is refused.
        if os.path.exists("/sys/devices/system/node/node0/meminfo"):
            cell = conn.getMemoryStats(0)
            self.assertIn("total", cell)
        with self.assertRaises(libvirt.libvirtError) as e:
            conn.getMemoryStats(4096)
        self.assertEqual(e.exception.get_error_code(), libvirt.VIR_ERR_INVALID_ARG)

    def test_nodecpustats(self):
        tick = 1e9 / os.sysconf("SC_CLK_TCK")
        before = cpu_ticks()
        conn = self.daemon.connect()
        py = conn.getCPUStats(libvirt.VIR_NODE_CPU_STATS_ALL_CPUS)
        after = cpu_ticks()
        self.assertEqual(set(py), {"kernel", "user", "idle", "iowait"})
        # user + nice, system + irq + softirq, as libvirt sums them.
        self.assertGreaterEqual(py["user"], (before[0] + before[1]) * tick)
        self.assertLessEqual(py["user"], (after[0] + after[1]) * tick)
        self.assertGreaterEqual(py["kernel"], (before[2] + before[5] + before[6]) * tick)
        self.assertLessEqual(py["idle"], after[3] * tick)
        one = conn.getCPUStats(0)
        self.assertLessEqual(one["user"], py["user"])
        out = self.daemon.virsh("nodecpustats", "--cpu", "0").stdout
        for name in ("user:", "system:", "idle:", "iowait:"):
            self.assertIn(name, out)
        res = self.daemon.virsh("nodecpustats", "--cpu", str(os.cpu_count() + 7), check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("Invalid cpuNum", res.stderr)

    def test_sysinfo(self):
        attrs = dmi_attrs()
        conn = self.daemon.connect()
        if not any(k.startswith(("bios_", "sys_", "product_", "board_", "chassis_")) for k in attrs):
            # No SMBIOS tables on this host: libvirt's QEMU driver says so too.
            with self.assertRaises(libvirt.libvirtError) as e:
                conn.getSysinfo(0)
            self.assertEqual(e.exception.get_error_code(), libvirt.VIR_ERR_INTERNAL_ERROR)
            self.assertIn("Host SMBIOS information is not available", str(e.exception))
            res = self.daemon.virsh("sysinfo", check=False)
            self.assertIn("Host SMBIOS information is not available", res.stderr)
            return
        root = ET.fromstring(self.daemon.virsh("sysinfo").stdout)
        self.assertEqual(root.get("type"), "smbios")
        system = {e.get("name"): e.text for e in root.findall("system/entry")}
        if "sys_vendor" in attrs:
            self.assertEqual(system["manufacturer"], attrs["sys_vendor"])
        bios = {e.get("name"): e.text for e in root.findall("bios/entry")}
        if "bios_version" in attrs:
            self.assertEqual(bios["version"], attrs["bios_version"])

    def test_freecell(self):
        out = self.daemon.virsh("freecell", "--all").stdout
        self.assertRegex(out, r"^\s*0:\s+\d+ KiB")
        conn = self.daemon.connect()
        cells = conn.getCellsFreeMemory(0, 1)
        self.assertEqual(len(cells), 1)
        node0 = "/sys/devices/system/node/node0/meminfo"
        free_kib = meminfo()["MemFree"]
        if os.path.exists(node0):
            with open(node0) as f:
                free_kib = next(int(l.split()[3]) for l in f if "MemFree:" in l)
        # Free memory moves while we look: within 64 MiB.
        self.assertLess(abs(cells[0] // 1024 - free_kib), 65536)
        self.assertIn("0:", self.daemon.virsh("freecell", "--cellno", "0").stdout)
        with self.assertRaises(libvirt.libvirtError) as e:
            conn.getCellsFreeMemory(1000, 1)
        self.assertIn("out of range", str(e.exception))

    def test_read_only_clients_may_ask(self):
        conn = self.daemon.connect(readonly=True)
        self.assertIn("total", conn.getMemoryStats(-1))
        self.assertIn("idle", conn.getCPUStats(-1))


if __name__ == "__main__":
    unittest.main()
