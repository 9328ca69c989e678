"""Disks against crashes and a hostile host, through real virsh: kill -9
of the daemon at each step of a disk snapshot and in the middle of the fold
back into the image, an image deleted or replaced under a shut-off domain,
the disks' fate when a domain ceases to exist (undefine, a transient
domain's end): their images then hold what the guest last wrote; and kill -9
while a delete keeps the layer the disks run on (test_disk_kept.py), and in
the fold that later removes it."""

import os
import shutil
import unittest

from disktest import MIB, file_sum, make_image, pattern_sum, zero_sum
from test_disk_kept import REGION_C, KeptLayerBase
from test_disk_snapshots import REGION_A, REGION_B, DiskSnapshotBase, disk_domain_xml, sha256
from vsnapd import wait_for


class HostileTest(DiskSnapshotBase):
    def restart_daemon(self, hook=None):
        if self.daemon.proc and self.daemon.proc.poll() is None:
            self.daemon.proc.kill()
        if self.daemon.proc:
            self.daemon.proc.wait(timeout=20)
        self.daemon.proc = None
        self.daemon.start(env={"VSNAPD_TEST_HOOK": hook} if hook else None)

    def snapshot_dirs(self, name):
        root = os.path.join(self.daemon.state, "snapshots", name)
        return sorted(e for e in os.listdir(root) if os.path.isdir(os.path.join(root, e)))

    def test_daemon_killed_during_a_disk_snapshot(self):
        for step in ("snapshot-paused", "snapshot-written", "snapshot-taken"):
            with self.subTest(step=step):
                name = f"k-{step}"
                root = self.image(f"{name}.img")
                self.define_disks(name, [(root, "vda")])
                self.v("start", name)
                self.with_guest(name, lambda g: (g.fill(0, *REGION_A, 1), g.flush(0)))
                self.v("snapshot-create-as", name, "s1")
                base = sha256(root)
                self.with_guest(name, lambda g: (g.fill(0, *REGION_A, 2), g.flush(0)))
                self.restart_daemon(f"{step}:kill")
                res = self.v("snapshot-create-as", name, "s2", check=False)
                self.assertNotEqual(res.returncode, 0)
                self.restart_daemon()
                # Running again, its disk where the guest left it, s2 unrecorded.
                self.assertEqual(self.state(name).split()[0], "running")
                self.assertEqual(self.v("snapshot-list", name, "--name").stdout.split(), ["s1"])
                self.assertEqual(self.with_guest(name, lambda g: g.sum(0, *REGION_A)), pattern_sum(2, REGION_A[1]))
                self.with_guest(name, lambda g: (g.fill(0, *REGION_B, 3), g.flush(0)))
                # A boot continues on the chain the shim moved the disk to.
                self.v("destroy", name)
                self.v("start", name)
                self.assertEqual(self.with_guest(name, lambda g: g.sum(0, *REGION_B)), pattern_sum(3, REGION_B[1]))
                # The snapshot before reverts exactly.
                self.v("snapshot-revert", name, "s1")
                self.assertEqual(self.with_guest(name, lambda g: g.sum(0, *REGION_A)), pattern_sum(1, REGION_A[1]))
                self.assertEqual(self.with_guest(name, lambda g: g.sum(0, *REGION_B)), zero_sum(REGION_B[1]))
                # Nothing is left that no snapshot and no chain uses.
                self.v("snapshot-create-as", name, "s3")
                self.assertEqual(len(self.snapshot_dirs(name)), 2, self.snapshot_dirs(name))
                self.assertEqual(sha256(root), base)
                self.v("destroy", name)

    def test_image_deleted_under_a_shut_off_domain(self):
        root = self.image("gone.img")
        self.define_disks("g", [(root, "vda")])
        self.v("start", "g")
        self.with_guest("g", lambda g: (g.fill(0, *REGION_A, 1), g.flush(0)))
        self.v("snapshot-create-as", "g", "s1")
        self.with_guest("g", lambda g: (g.fill(0, *REGION_B, 2), g.flush(0)))
        self.v("destroy", "g")
        backup = self.path("gone.backup")
        shutil.copy2(root, backup)
        os.unlink(root)
        for command in (["start", "g"], ["snapshot-revert", "g", "s1"]):
            with self.subTest(command=command[0]):
                res = self.v(*command, check=False)
                self.assertNotEqual(res.returncode, 0)
                self.assertIn(root, res.stderr)
                self.assertEqual(self.daemon.shim_pids(), {})
                self.assertEqual(self.state("g"), "shut off (destroyed)")
        # Another image under its name: refused by name, as a changed base.
        make_image(root, 16 * MIB)
        res = self.v("start", "g", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(root, res.stderr)
        self.assertEqual(self.daemon.shim_pids(), {})
        # The image back (a copy with its times, as cp -a makes): all is there.
        os.unlink(root)
        shutil.copy2(backup, root)
        self.v("start", "g")
        self.assertEqual(self.with_guest("g", lambda g: g.sum(0, *REGION_B)), pattern_sum(2, REGION_B[1]))
        self.v("snapshot-revert", "g", "s1")
        self.assertEqual(self.with_guest("g", lambda g: g.sum(0, *REGION_A)), pattern_sum(1, REGION_A[1]))

    def test_daemon_killed_in_the_fold_into_the_image(self):
        root = self.image("fold.img")
        self.define_disks("f", [(root, "vda")])
        self.v("start", "f")
        self.with_guest("f", lambda g: (g.fill(0, *REGION_A, 1), g.flush(0)))
        self.v("snapshot-create-as", "f", "s1")
        self.with_guest("f", lambda g: (g.fill(0, *REGION_B, 2), g.flush(0)))
        self.v("destroy", "f")
        self.restart_daemon("snapshot-disks-folded:kill")
        res = self.v("snapshot-delete", "f", "s1", check=False)
        self.assertNotEqual(res.returncode, 0)
        # The next daemon finishes the delete before it serves anyone.
        self.restart_daemon()
        self.assertEqual(self.v("snapshot-list", "f", "--name").stdout.split(), [])
        self.assertEqual(file_sum(root, *REGION_A), pattern_sum(1, REGION_A[1]))
        self.assertEqual(file_sum(root, *REGION_B), pattern_sum(2, REGION_B[1]))
        self.assertFalse(os.path.exists(os.path.join(self.daemon.state, "disks", "f")), self.daemon.log())
        self.v("start", "f")
        self.assertEqual(self.live_chain("f"), [root])
        self.assertEqual(self.with_guest("f", lambda g: g.sum(0, *REGION_B)), pattern_sum(2, REGION_B[1]))

    def test_undefine_and_a_transient_end_fold_the_disks_into_their_images(self):
        root = self.image("undef.img")
        self.define_disks("u", [(root, "vda")])
        self.v("start", "u")
        self.v("snapshot-create-as", "u", "s1")
        self.with_guest("u", lambda g: (g.fill(0, *REGION_A, 5), g.flush(0)))
        self.v("destroy", "u")
        self.assertNotEqual(file_sum(root, *REGION_A), pattern_sum(5, REGION_A[1]))
        self.v("undefine", "u", "--snapshots-metadata")
        self.assertEqual(file_sum(root, *REGION_A), pattern_sum(5, REGION_A[1]))
        self.assertFalse(os.path.exists(os.path.join(self.daemon.state, "disks", "u")))

        other = self.image("transient.img")
        self.v("create", self.write("t.xml", disk_domain_xml("t", [(other, "vda")])))
        self.v("snapshot-create-as", "t", "s1")
        # As libvirt: --halt would end a transient domain and its snapshots.
        res = self.v("snapshot-create-as", "t", "s2", "--halt", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("cannot halt after transient domain snapshot", res.stderr)
        self.assertEqual(self.state("t"), "running (booted)")
        self.with_guest("t", lambda g: (g.fill(0, *REGION_B, 6), g.flush(0)))
        self.v("destroy", "t")
        self.assertEqual(file_sum(other, *REGION_B), pattern_sum(6, REGION_B[1]))
        # Nothing of the domain is left: no chain, and no snapshots without a domain.
        for sub in ("disks", "snapshots"):
            self.assertFalse(os.path.exists(os.path.join(self.daemon.state, sub, "t")), sub)


class KeptLayerCrashTest(KeptLayerBase):
    """kill -9 of the daemon while a snapshot's delete keeps its layer, and in the fold that removes it."""

    def restart_daemon(self, hook=None):
        """Started again, and past its recovery: the socket accepts before
        recovery ends, the "listening" line comes after it."""
        if self.daemon.proc and self.daemon.proc.poll() is None:
            self.daemon.proc.kill()
        if self.daemon.proc:
            self.daemon.proc.wait(timeout=20)
        self.daemon.proc = None
        started = self.daemon.log().count("listening on")
        self.daemon.start(env={"VSNAPD_TEST_HOOK": hook} if hook else None)
        wait_for(lambda: self.daemon.log().count("listening on") > started, timeout=60, what="the daemon's recovery")

    def test_daemon_killed_during_the_move(self):
        for step in ("snapshot-keep-before-move", "snapshot-keep-moved"):
            with self.subTest(step=step):
                name = "c-" + step.rsplit("-", 1)[1]
                root = self.boot_with_two_snapshots(name)
                base = sha256(root)
                s1_dir = self.snapshot_dir(name, "s1")
                self.restart_daemon(f"{step}:kill")
                res = self.v("snapshot-delete", name, "s1", check=False)
                self.assertNotEqual(res.returncode, 0)
                self.restart_daemon()
                # Before the move the entry was marked deleting: the next daemon
                # finishes the delete. After it, the shim was not told yet: the
                # next daemon's recovery tells it. Either way: kept, and followed.
                self.expect_kept(name, s1_dir)
                self.assertEqual(self.state(name).split()[0], "running")
                self.expect_all(name)
                self.v("snapshot-create-as", name, "s2")
                self.assertEqual(self.kept_dirs(name), [])
                self.v("snapshot-revert", name, "s0")
                self.assertEqual(self.sums(name, [REGION_A, REGION_B]),
                                 [pattern_sum(1, REGION_A[1]), zero_sum(REGION_B[1])])
                self.v("snapshot-revert", name, "s2")
                self.expect_all(name)
                self.assertEqual(sha256(root), base)
                self.v("destroy", name)

    def test_daemon_killed_in_the_fold_that_removes_the_kept_layer(self):
        root = self.boot_with_two_snapshots("f")
        base = sha256(root)
        self.v("snapshot-delete", "f", "s1")
        self.assertEqual(len(self.kept_dirs("f")), 1)
        self.restart_daemon("snapshot-kept-folded:kill")
        self.v("snapshot-create-as", "f", "s2", check=False)
        self.restart_daemon()
        # Recovery finished the fold: the kept layer is gone, s2 holds its blocks.
        self.assertEqual(self.kept_dirs("f"), [], self.daemon.log())
        self.assertEqual(self.v("snapshot-list", "f", "--name").stdout.split(), ["s0", "s2"])
        self.expect_all("f")
        self.with_guest("f", lambda g: (g.fill(0, *REGION_A, 7), g.flush(0)))
        self.v("snapshot-create-as", "f", "s3")
        self.v("snapshot-revert", "f", "s2")
        self.expect_all("f")
        self.v("snapshot-revert", "f", "s0")
        self.assertEqual(self.sums("f", [REGION_A, REGION_B]), [pattern_sum(1, REGION_A[1]), zero_sum(REGION_B[1])])
        self.assertEqual(sha256(root), base)


if __name__ == "__main__":
    unittest.main()
