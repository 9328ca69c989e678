"""blockresize through real virsh and python3-libvirt: a running disk's image
grows, the shim's disk follows and the guest learns it from virtio-blk's
configuration-change interrupt (the test guest's BLKCONFIG counts them);
what cannot grow is refused by name."""

import os
import unittest

import libvirt

from disktest import MIB, file_sum, pattern_sum
from test_disk_snapshots import DiskSnapshotBase


class DiskResizeTest(DiskSnapshotBase):
    def config(self, name):
        return self.with_guest(name, lambda g: g.cmd("BLKCONFIG 0"))

    def test_grow_a_running_disk(self):
        root = self.image("grow.img", 16 * MIB)
        self.define_disks("r", [(root, "vda")])
        self.v("start", "r")
        self.assertEqual(self.config("r"), f"CONFIG 0 {16 * MIB // 512} 0")
        self.v("blockresize", "r", "vda", "32M")
        self.assertEqual(os.path.getsize(root), 32 * MIB)
        self.assertEqual(self.config("r"), f"CONFIG 0 {32 * MIB // 512} 1")
        self.assertEqual(self.with_guest("r", lambda g: g.info(0)), f"BLK 0 {32 * MIB // 512} 0")
        # The new end is the guest's to write.
        self.with_guest("r", lambda g: (g.fill(0, 24 * MIB, 4 * MIB, 9), g.flush(0)))
        self.assertEqual(file_sum(root, 24 * MIB, 4 * MIB), pattern_sum(9, 4 * MIB))
        self.assertEqual(self.v("domblkinfo", "r", "vda").stdout.split()[1], str(32 * MIB))
        conn = self.daemon.connect()
        dom = conn.lookupByName("r")
        dom.blockResize("vda", 48 * MIB, libvirt.VIR_DOMAIN_BLOCK_RESIZE_BYTES)
        self.assertEqual(self.config("r"), f"CONFIG 0 {48 * MIB // 512} 2")
        with self.assertRaises(libvirt.libvirtError) as e:
            dom.blockResize("vda", 8 * MIB, libvirt.VIR_DOMAIN_BLOCK_RESIZE_BYTES)
        self.assertIn("vsnap only grows a disk", e.exception.get_error_message())
        conn.close()
        self.assertEqual(os.path.getsize(root), 48 * MIB)
        # On snapshot layers the size is the layers'.
        self.v("snapshot-create-as", "r", "s1")
        res = self.v("blockresize", "r", "vda", "64M", check=False)
        self.assertIn("runs on snapshot layers", res.stderr)
        self.assertEqual(os.path.getsize(root), 48 * MIB)
        self.assertEqual(self.config("r"), f"CONFIG 0 {48 * MIB // 512} 2")
        self.v("destroy", "r")
        res = self.v("blockresize", "r", "vda", "64M", check=False)
        self.assertIn("domain is not running", res.stderr)


if __name__ == "__main__":
    unittest.main()
