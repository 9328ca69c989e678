"""Disks whose files fail under the daemon, through real virsh: an overlay
removed under a shut-off domain, a layer directory that turns read-only or
full during a snapshot, an image truncated under a running VM. Each is an
error naming the file, at the time; the domain stays usable from what is
intact (its running VM, its snapshots) and can be undefined."""

import os
import unittest

from disktest import MIB, file_sum, pattern_sum, zero_sum
from test_disk_snapshots import REGION_A, REGION_B, DiskSnapshotBase


class DiskFaultTest(DiskSnapshotBase):
    def test_removed_overlay_is_named_at_start(self):
        root = self.image("o.img")
        self.define_disks("o", [(root, "vda")])
        self.v("start", "o")
        self.with_guest("o", lambda g: (g.fill(0, *REGION_A, 1), g.flush(0)))
        self.v("snapshot-create-as", "o", "s1")
        self.with_guest("o", lambda g: (g.fill(0, *REGION_B, 2), g.flush(0)))
        overlay = self.live_chain("o")[0]
        self.v("destroy", "o")
        os.unlink(overlay)
        for attempt in range(2):
            res = self.v("start", "o", check=False)
            self.assertNotEqual(res.returncode, 0)
            self.assertIn(overlay, res.stderr)
            self.assertIn("overlay", res.stderr)
            self.assertEqual(self.daemon.shim_pids(), {})
            # Never replaced by an empty file: the next start says the same.
            self.assertFalse(os.path.exists(overlay), f"attempt {attempt}: {overlay} was created")
        # Its snapshots are intact: a revert runs s1's disk on a new overlay.
        self.v("snapshot-revert", "o", "s1")
        self.assertEqual(self.with_guest("o", lambda g: g.sum(0, *REGION_A)), pattern_sum(1, REGION_A[1]))
        self.assertEqual(self.with_guest("o", lambda g: g.sum(0, *REGION_B)), zero_sum(REGION_B[1]))
        self.with_guest("o", lambda g: (g.fill(0, *REGION_B, 3), g.flush(0)))
        self.v("destroy", "o")
        self.v("start", "o")
        self.assertEqual(self.with_guest("o", lambda g: g.sum(0, *REGION_B)), pattern_sum(3, REGION_B[1]))
        self.v("destroy", "o")
        # Undefine folds what is left into the image, the overlay gone again:
        # the image gets the disk as s1 left it.
        os.unlink(self.chain_record_overlay("o"))
        self.v("undefine", "o", "--snapshots-metadata")
        self.assertEqual(self.v("list", "--all", "--name").stdout.split(), [])
        self.assertFalse(os.path.exists(os.path.join(self.daemon.state, "disks", "o")))
        self.assertEqual(file_sum(root, *REGION_A), pattern_sum(1, REGION_A[1]))
        self.assertEqual(file_sum(root, *REGION_B), zero_sum(REGION_B[1]))

    def chain_record_overlay(self, name, target="vda"):
        """The overlay the disk record says the next boot continues on."""
        path = os.path.join(self.daemon.state, "disks", name, "chains")
        with open(path) as f:
            lines = f.read().splitlines()
        group = lines.index(f"[{target}]")
        for line in lines[group + 1:]:
            if line.startswith("overlay="):
                return line[len("overlay="):]
        raise AssertionError(f"no overlay for {target} in {path}")


if __name__ == "__main__":
    unittest.main()
