"""domblkerror (virDomainGetDiskErrors) through real virsh and python3-libvirt:
a disk whose device answered the guest an I/O error is listed, as libvirt
does, with "no space" for a full file system (ENOSPC) and "unspecified
error" for the rest (EIO: here a sealed layer's block damaged on disk)."""

import os
import subprocess
import unittest

import libvirt

from disktest import MIB
from test_disk_snapshots import DiskSnapshotBase


class DiskErrorsTest(DiskSnapshotBase):
    def small_dir(self, size):
        path = self.path("small")
        os.makedirs(path)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path]).returncode:
            self.skipTest("cannot mount a tmpfs here")
        self.addCleanup(subprocess.run, ["umount", "-l", path])
        return path

    def test_a_full_file_system_is_no_space(self):
        root = os.path.join(self.small_dir(4 * MIB), "full.img")
        with open(root, "wb") as f:
            f.truncate(16 * MIB)
        self.define_disks("n", [(root, "vda")])
        self.v("start", "n")
        self.assertEqual(self.v("domblkerror", "n").stdout.strip(), "No errors found")
        reply = self.with_guest("n", lambda g: g.cmd(f"BLKFILL 0 0x0 {8 * MIB:#x} 1"))
        self.assertNotEqual(reply, "OK")
        self.assertEqual(self.v("domblkerror", "n").stdout.strip(), "vda: no space")
        conn = self.daemon.connect()
        self.assertEqual(conn.lookupByName("n").diskErrors(), {"vda": libvirt.VIR_DOMAIN_DISK_ERROR_NO_SPACE})
        conn.close()
        self.v("destroy", "n")
        res = self.v("domblkerror", "n", check=False)
        self.assertIn("domain is not running", res.stderr)

    def test_a_damaged_layer_is_an_unspecified_error(self):
        root = self.image("eio.img", 16 * MIB)
        self.define_disks("e", [(root, "vda")])
        self.v("start", "e")
        self.v("snapshot-create-as", "e", "s0")
        self.with_guest("e", lambda g: (g.fill(0, 8 * MIB, MIB, 2), g.flush(0)))
        self.v("snapshot-create-as", "e", "s1")
        layer = self.live_chain("e")[1]
        size = os.path.getsize(layer)
        with open(layer, "r+b") as f:
            f.seek(size // 2)
            f.write(b"\xff" * 4096)
        reply = self.with_guest("e", lambda g: g.cmd(f"BLKSUM 0 {8 * MIB:#x} {MIB:#x}"))
        self.assertFalse(reply.startswith("SUM "), reply)
        self.assertEqual(self.v("domblkerror", "e").stdout.strip(), "vda: unspecified error")


if __name__ == "__main__":
    unittest.main()
