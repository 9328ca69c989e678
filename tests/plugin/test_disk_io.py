"""Domains with disks run end to end through real virsh: the daemon hands
the disks to the shim, the test guest reads and writes them (BLK* commands
on its command port) and every checksum is checked against the host's own
view of the image files. domblklist, domblkinfo, domblkstat and domstats
--block answer from the shim's counters and the files."""

import os
import subprocess
import unittest
import xml.etree.ElementTree as ET

import libvirt

from disktest import DiskGuest, MIB, PATTERN, disk_domain_xml, file_sum, make_image, pattern_sum
from vsnapd import DaemonTest, needs_guest


@needs_guest
@unittest.skipUnless(PATTERN, "VSNAP_PATTERN is not set")
class DiskIoTest(DaemonTest):
    def setUp(self):
        super().setUp()
        self.v = self.daemon.virsh

    def image(self, name, size=16 * MIB):
        return make_image(os.path.join(self.daemon.dir, name), size)

    def define_disks(self, name, disks):
        path = os.path.join(self.daemon.dir, name + ".xml")
        with open(path, "w") as f:
            f.write(disk_domain_xml(name, disks))
        self.v("define", path)

    def guest(self, name):
        return DiskGuest(os.path.join(self.daemon.state, "run", name, "vsock.sock"))

    def test_guest_reads_and_writes_its_disks(self):
        root = self.image("root.img")
        data = self.image("data.img", 4 * MIB + 512)
        subprocess.run([PATTERN, "--fill-file", data, "0", str(MIB), "77"], check=True)
        self.define_disks("d", [(root, "vda"), (data, "vdb", "      <readonly/>\n      <serial>data-7</serial>\n")])
        self.v("start", "d")
        g = self.guest("d")
        try:
            self.assertEqual(g.info(0), f"BLK 0 {16 * MIB // 512} 0")
            self.assertEqual(g.info(1), f"BLK 1 {(4 * MIB + 512) // 512} 1")
            self.assertEqual(g.cmd("BLKID 1"), "ID data-7")
            # What the host wrote is what the guest reads.
            self.assertEqual(g.sum(1, 0, MIB), pattern_sum(77, MIB))
            self.assertEqual(g.cmd(f"BLKFILL 1 0 {MIB:#x} 5"), "ERR readonly")
            # What the guest writes lands in the image, at the offset it named.
            g.fill(0, 3 * MIB, 2 * MIB, 11)
            g.flush(0)
            self.assertEqual(g.sum(0, 3 * MIB, 2 * MIB), pattern_sum(11, 2 * MIB))
            self.assertEqual(file_sum(root, 3 * MIB, 2 * MIB), pattern_sum(11, 2 * MIB))
            self.assertEqual(file_sum(root, 0, 3 * MIB), file_sum("/dev/zero", 0, 3 * MIB))
        finally:
            g.close()
        self.v("destroy", "d")
        self.assertEqual(file_sum(root, 3 * MIB, 2 * MIB), pattern_sum(11, 2 * MIB))
        self.assertEqual(file_sum(data, 0, MIB), pattern_sum(77, MIB))
        # A second run sees what the first one wrote.
        self.v("start", "d")
        g = self.guest("d")
        try:
            self.assertEqual(g.sum(0, 3 * MIB, 2 * MIB), pattern_sum(11, 2 * MIB))
        finally:
            g.close()

    def test_domain_capabilities_offer_virtio_disks(self):
        caps = ET.fromstring(self.v("domcapabilities").stdout)
        disk = caps.find("devices/disk")
        self.assertEqual(disk.get("supported"), "yes")
        self.assertEqual([v.text for v in disk.findall("enum[@name='diskDevice']/value")], ["disk"])
        self.assertEqual([v.text for v in disk.findall("enum[@name='bus']/value")], ["virtio"])

    def test_image_removed_after_define_is_refused_at_start(self):
        image = self.image("gone.img")
        self.define_disks("g", [(image, "vda")])
        os.unlink(image)
        res = self.v("start", "g", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(f"Cannot access storage file '{image}' of disk 'vda'", res.stderr)
        self.assertEqual(self.daemon.shim_pids(), {})
        # Unreadable to the daemon's user: refused the same way (root reads
        # everything, so only an unprivileged run can check it).
        if os.geteuid() != 0:
            self.image("gone.img")
            os.chmod(image, 0)
            res = self.v("start", "g", check=False)
            self.assertIn("Permission denied", res.stderr)
            self.assertEqual(self.daemon.shim_pids(), {})

    def stats(self, dom, disk):
        rd_req, rd_bytes, wr_req, wr_bytes, errs = dom.blockStats(disk)
        return {"rd_req": rd_req, "rd_bytes": rd_bytes, "wr_req": wr_req, "wr_bytes": wr_bytes, "errs": errs}

    def test_block_list_info_and_stats(self):
        root, data = self.image("root.img", 32 * MIB), self.image("data.img", 8 * MIB)
        self.define_disks("s", [(root, "vda"), (data, "vdb", "      <readonly/>\n")])
        # A shut-off domain: the list and the file sizes, no counters.
        listed = self.v("domblklist", "s").stdout.split()
        self.assertEqual(listed, ["vda", root, "vdb", data])
        info = self.v("domblkinfo", "s", "vda").stdout
        self.assertIn(f"Capacity:       {32 * MIB}", info)
        res = self.v("domblkstat", "s", "vda", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("domain is not running", res.stderr)

        self.v("start", "s")
        conn = self.daemon.connect()
        dom = conn.lookupByName("s")
        g = self.guest("s")
        try:
            before = self.stats(dom, "vda")
            g.fill(0, 0, 3 * MIB, 2)
            g.flush(0)
            g.sum(0, 0, MIB)
            after = self.stats(dom, "vda")
            self.assertEqual(after["wr_bytes"] - before["wr_bytes"], 3 * MIB)
            self.assertEqual(after["rd_bytes"] - before["rd_bytes"], MIB)
            self.assertGreater(after["wr_req"], before["wr_req"])
            self.assertEqual(after["errs"], 0)
            # The path names the disk as well as the target does.
            self.assertEqual(self.stats(dom, root), after)
            flags = dom.blockStatsFlags("vda")
            self.assertEqual(flags["wr_bytes"], after["wr_bytes"])
            self.assertEqual(flags["rd_operations"], after["rd_req"])
            self.assertGreaterEqual(flags["flush_operations"], 1)
            # A refused write counts as an error of that disk only.
            self.assertEqual(g.cmd(f"BLKFILL 1 0 {MIB:#x} 5"), "ERR readonly")
            self.assertEqual(self.stats(dom, "vda")["errs"], 0)

            text = self.v("domblkstat", "s", "vda").stdout
            self.assertIn(f"vda wr_bytes {after['wr_bytes']}", text)
            capacity, allocation, physical = dom.blockInfo("vda")
            self.assertEqual((capacity, physical), (32 * MIB, 32 * MIB))
            self.assertEqual(allocation, os.stat(root).st_blocks * 512)
            self.assertGreaterEqual(allocation, 3 * MIB)

            records = conn.domainListGetStats([dom], libvirt.VIR_DOMAIN_STATS_BLOCK)
            self.assertEqual(len(records), 1)
            stats = records[0][1]
            self.assertEqual(stats["block.count"], 2)
            self.assertEqual([stats["block.0.name"], stats["block.1.name"]], ["vda", "vdb"])
            self.assertEqual([stats["block.0.path"], stats["block.1.path"]], [root, data])
            self.assertEqual(stats["block.0.wr.bytes"], after["wr_bytes"])
            self.assertEqual(stats["block.0.rd.bytes"], after["rd_bytes"])
            self.assertEqual(stats["block.0.capacity"], 32 * MIB)
            self.assertEqual(stats["block.1.capacity"], 8 * MIB)
            self.assertEqual(stats["block.1.wr.bytes"], 0)
            text = self.v("domstats", "--block", "s").stdout
            self.assertIn(f"block.0.wr.bytes={after['wr_bytes']}", text)
            self.assertIn("block.1.name=vdb", text)

            with self.assertRaises(libvirt.libvirtError) as ctx:
                dom.blockStats("vdz")
            self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_INVALID_ARG)
            self.assertIn("vdz", ctx.exception.get_error_message())
            with self.assertRaises(libvirt.libvirtError) as ctx:
                dom.blockInfo("/etc/passwd")
            self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_INVALID_ARG)
        finally:
            g.close()
            conn.close()
        # Read-only connections see statistics too.
        self.assertIn("vda rd_req", self.v("domblkstat", "s", "vda", ro=True).stdout)


if __name__ == "__main__":
    unittest.main()
