"""Deleting the snapshot whose disk layer the disks run on, through real
virsh, as QEMU allows for an external snapshot: the snapshot's metadata
goes, its directory moves to the domain's disk directory (kept-<id>) as an
unnamed part of the chain, the running shim follows it (vm.move-disk-layers:
vm.info names the new place), and the next snapshot folds it away. kill -9
of the daemon at each step of the move leaves a state the next daemon makes
consistent: the snapshot gone, the chain on the kept layer, the guest's data
whole, a later snapshot and reverts working, the kept layer removed by the
fold. Every check of the guest's data is against the host's checksums, and
the image is never written while it is the base."""

import os
import sys
import unittest

from disktest import MIB, pattern_sum, zero_sum
from test_disk_snapshots import REGION_A, REGION_B, DiskSnapshotBase, sha256

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import curl_api  # noqa: E402

REGION_C = (8 * MIB, MIB)


class KeptLayerBase(DiskSnapshotBase):
    def disk_dir(self, name):
        return os.path.join(self.daemon.state, "disks", name)

    def kept_dirs(self, name):
        d = self.disk_dir(name)
        return sorted(os.path.join(d, e) for e in os.listdir(d) if e.startswith("kept-")) if os.path.isdir(d) else []

    def shim_chain(self, name):
        """vsnap_chain of vda as the shim has it (vm.info), base first."""
        status, info = curl_api(os.path.join(self.daemon.state, "run", name, "api.sock"), "GET", "vm.info")
        self.assertEqual(status, 200, info)
        return info["config"]["disks"][0]["vsnap_chain"]

    def sums(self, name, regions):
        return self.with_guest(name, lambda g: [g.sum(0, *r) for r in regions])

    def boot_with_two_snapshots(self, name):
        """Running with s0 (A=1) and s1 (A=1, B=2) on top of it, then C=3 written."""
        root = self.image(name + ".img")
        self.define_disks(name, [(root, "vda")])
        self.v("start", name)
        self.with_guest(name, lambda g: (g.fill(0, *REGION_A, 1), g.flush(0)))
        self.v("snapshot-create-as", name, "s0")
        self.with_guest(name, lambda g: (g.fill(0, *REGION_B, 2), g.flush(0)))
        self.v("snapshot-create-as", name, "s1")
        self.with_guest(name, lambda g: (g.fill(0, *REGION_C, 3), g.flush(0)))
        return root

    def expect_all(self, name):
        self.assertEqual(self.sums(name, [REGION_A, REGION_B, REGION_C]),
                         [pattern_sum(1, REGION_A[1]), pattern_sum(2, REGION_B[1]), pattern_sum(3, REGION_C[1])])

    def expect_kept(self, name, s1_dir):
        """s1 is gone, its directory kept, and both the daemon and the shim run on it there."""
        self.assertEqual(self.v("snapshot-list", name, "--name").stdout.split(), ["s0"])
        self.assertFalse(os.path.exists(s1_dir))
        kept = self.kept_dirs(name)
        self.assertEqual([os.path.basename(k) for k in kept], ["kept-" + os.path.basename(s1_dir)])
        # No snapshot's files, no memory: state.json for the disk records, and the disk layer.
        self.assertEqual(sorted(os.listdir(kept[0])), ["config.json", "disk-vda.layer", "state.json"])
        layer = os.path.join(kept[0], "disk-vda.layer")
        self.assertEqual(self.live_chain(name)[1], layer)
        self.assertIn(layer, self.shim_chain(name))
        return kept[0]


class KeptLayerTest(KeptLayerBase):
    def test_delete_keeps_the_layer_the_disks_run_on_until_a_snapshot_folds_it(self):
        root = self.boot_with_two_snapshots("k")
        base = sha256(root)
        s1_dir = self.snapshot_dir("k", "s1")
        self.v("snapshot-delete", "k", "s1")
        kept = self.expect_kept("k", s1_dir)
        self.expect_all("k")
        # A restarted daemon knows it as kept, not as a delete cut short.
        self.daemon.stop()
        self.daemon.start()
        self.assertEqual(self.expect_kept("k", s1_dir), kept)
        # The next snapshot is taken on it, and folds it away.
        self.with_guest("k", lambda g: (g.fill(0, *REGION_A, 4), g.flush(0)))
        self.v("snapshot-create-as", "k", "s2")
        self.assertEqual(self.kept_dirs("k"), [])
        chain = self.live_chain("k")
        self.assertEqual(chain[1], os.path.join(self.snapshot_dir("k", "s2"), "disk-vda.layer"))
        self.assertFalse(any(p.startswith(kept) for p in chain + self.shim_chain("k")))
        # The shim reopens its chain at the next seal: it must find every layer.
        self.with_guest("k", lambda g: (g.fill(0, *REGION_C, 5), g.flush(0)))
        self.v("snapshot-create-as", "k", "s3")
        self.v("snapshot-revert", "k", "s2")
        self.assertEqual(self.sums("k", [REGION_A, REGION_B, REGION_C]),
                         [pattern_sum(4, REGION_A[1]), pattern_sum(2, REGION_B[1]), pattern_sum(3, REGION_C[1])])
        self.v("snapshot-revert", "k", "s0")
        self.assertEqual(self.sums("k", [REGION_A, REGION_B]), [pattern_sum(1, REGION_A[1]), zero_sum(REGION_B[1])])
        self.assertEqual(sha256(root), base, "the base image was written")

    def test_kept_layer_of_a_shut_off_domain_and_the_last_delete_folding_into_the_image(self):
        root = self.boot_with_two_snapshots("o")
        s1_dir = self.snapshot_dir("o", "s1")
        self.v("snapshot-delete", "o", "s1")
        self.expect_kept("o", s1_dir)
        self.v("destroy", "o")
        self.assertEqual(len(self.kept_dirs("o")), 1)
        # The record names the kept place: a boot continues on it.
        self.v("start", "o")
        self.expect_all("o")
        self.v("destroy", "o")
        # The last snapshot's delete folds the whole chain, kept layer and all, into the image.
        self.v("snapshot-delete", "o", "s0")
        self.assertFalse(os.path.exists(self.disk_dir("o")))
        self.v("start", "o")
        self.assertEqual(self.live_chain("o"), [root])
        self.expect_all("o")

    def test_revert_elsewhere_drops_the_kept_layer(self):
        self.boot_with_two_snapshots("r")
        self.v("snapshot-delete", "r", "s1")
        self.assertEqual(len(self.kept_dirs("r")), 1)
        self.v("snapshot-revert", "r", "s0")
        self.assertEqual(self.kept_dirs("r"), [])
        self.assertEqual(self.sums("r", [REGION_A, REGION_B]), [pattern_sum(1, REGION_A[1]), zero_sum(REGION_B[1])])

    def test_the_only_snapshot_of_a_running_domain(self):
        root = self.image("one.img")
        self.define_disks("one", [(root, "vda")])
        self.v("start", "one")
        self.with_guest("one", lambda g: (g.fill(0, *REGION_A, 1), g.flush(0)))
        self.v("snapshot-create-as", "one", "s1")
        self.with_guest("one", lambda g: (g.fill(0, *REGION_B, 2), g.flush(0)))
        self.v("snapshot-delete", "one", "s1")
        self.assertEqual(self.v("snapshot-list", "one", "--name").stdout.split(), [])
        self.assertEqual(len(self.kept_dirs("one")), 1)
        self.assertEqual(self.sums("one", [REGION_A, REGION_B]), [pattern_sum(1, REGION_A[1]), pattern_sum(2, REGION_B[1])])
        self.v("snapshot-create-as", "one", "s2")
        self.assertEqual(self.kept_dirs("one"), [])
        self.v("snapshot-revert", "one", "s2")
        self.assertEqual(self.sums("one", [REGION_A, REGION_B]), [pattern_sum(1, REGION_A[1]), pattern_sum(2, REGION_B[1])])

    def test_inner_delete_while_running_then_a_snapshot(self):
        """The shim is told a folded inner layer left its chain: its next seal reopens the chain."""
        self.boot_with_two_snapshots("i")
        self.v("snapshot-create-as", "i", "s2")
        s1_layer = os.path.join(self.snapshot_dir("i", "s1"), "disk-vda.layer")
        self.assertIn(s1_layer, self.shim_chain("i"))
        self.v("snapshot-delete", "i", "s1")
        self.assertNotIn(s1_layer, self.shim_chain("i"))
        self.with_guest("i", lambda g: (g.fill(0, *REGION_A, 6), g.flush(0)))
        self.v("snapshot-create-as", "i", "s3")
        self.v("snapshot-revert", "i", "s2")
        self.expect_all("i")


if __name__ == "__main__":
    unittest.main()
