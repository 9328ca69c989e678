"""Disks whose files fail under the daemon, through real virsh: an overlay
removed under a shut-off domain, a layer directory that turns read-only or
full during a snapshot, an image truncated under a running VM. Each is an
error naming the file, at the time; the domain stays usable from what is
intact (its running VM, its snapshots) and can be undefined."""

import os
import select
import subprocess
import sys
import time
import unittest

from disktest import MIB, file_sum, make_image, pattern_sum, zero_sum
from test_disk_snapshots import REGION_A, REGION_B, DiskSnapshotBase, sha256

NSMOUNT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nsmount.py")


class Fault:
    """nsmount.py in the mount namespace of a domain's confined shim."""

    def __init__(self, pid, action, path, after=None):
        argv = ["/usr/bin/python3", NSMOUNT, str(pid), action, path]
        self.proc = subprocess.Popen(argv + (["--after-create", *after] if after else []),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.line("ready", 10)
        self.done_at = None

    def line(self, want, timeout):
        """The rest of the line that starts with want."""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        got = self.proc.stdout.readline().strip() if ready else None
        if got is None or got.split(" ")[0] != want:
            self.proc.kill()
            raise AssertionError(f"nsmount.py said {got!r}, not {want!r}: {self.proc.stdout.read()}")
        return got[len(want):].strip()

    def wait_done(self, timeout=10):
        """When the fault was in place (CLOCK_MONOTONIC, as time.monotonic)."""
        self.done_at = float(self.line("done", timeout))
        self.proc.wait(timeout=10)
        return self

    def stop(self):
        """A fault still waiting for its trigger is dropped."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


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

    def shim_pid(self, name):
        return self.daemon.shim_pids()[name]

    def test_snapshot_into_a_failing_directory_fails_and_changes_nothing(self):
        root = self.image("f.img")
        self.define_disks("f", [(root, "vda")])
        self.v("start", "f")
        self.with_guest("f", lambda g: (g.fill(0, *REGION_A, 1), g.flush(0)))
        self.v("snapshot-create-as", "f", "s1")
        disks = os.path.join(self.daemon.state, "disks", "f")
        snapshots = os.path.join(self.daemon.state, "snapshots", "f")
        seed = 2
        for action, path, says in (("ro", disks, "Read-only file system"), ("full", disks, "No space left"),
                                   ("ro", snapshots, "Read-only file system")):
            with self.subTest(action=action, path=path):
                self.with_guest("f", lambda g: (g.fill(0, *REGION_B, seed), g.flush(0)))
                chain = self.live_chain("f")
                Fault(self.shim_pid("f"), action, path).wait_done()
                try:
                    res = self.v("snapshot-create-as", "f", "bad", check=False)
                finally:
                    Fault(self.shim_pid("f"), "umount", path).wait_done()
                self.assertNotEqual(res.returncode, 0)
                self.assertIn(says, res.stderr)
                # The VM runs on as it was: same chain, its data, its writes.
                self.assertTrue(self.state("f").startswith("running"), self.state("f"))
                self.assertEqual(self.v("snapshot-list", "f", "--name").stdout.split(), ["s1"])
                self.assertEqual(self.live_chain("f"), chain)
                self.assertEqual(self.with_guest("f", lambda g: g.sum(0, *REGION_B)), pattern_sum(seed, REGION_B[1]))
                seed += 1
                self.with_guest("f", lambda g: (g.fill(0, *REGION_B, seed), g.flush(0)))
                self.assertEqual(self.with_guest("f", lambda g: g.sum(0, *REGION_B)), pattern_sum(seed, REGION_B[1]))
        # The earlier snapshot is intact, and the next one is taken.
        self.v("snapshot-revert", "f", "s1")
        self.assertEqual(self.with_guest("f", lambda g: g.sum(0, *REGION_A)), pattern_sum(1, REGION_A[1]))
        self.assertEqual(self.with_guest("f", lambda g: g.sum(0, *REGION_B)), zero_sum(REGION_B[1]))
        self.v("snapshot-create-as", "f", "s2")

    def test_overlay_directory_read_only_in_the_middle_of_a_snapshot(self):
        """The disks' directory turns read-only right after the snapshot
        made the disk's next overlay, while the shim writes the memory layer
        (256 MiB filled: the time the fault needs). The snapshot then fails
        and changes nothing, or it succeeded with the disk on its new
        overlay: once the image is the snapshot's base, nothing writes it."""
        root = self.image("m.img")
        self.define_disks("m", [(root, "vda")], memory_mib=512, cmdline="vsnap.fill_mib=256 vsnap.seed=1")
        self.v("start", "m")
        self.with_guest("m", lambda g: (g.fill(0, *REGION_A, 1), g.flush(0)))
        disks = os.path.join(self.daemon.state, "disks", "m")
        fault = Fault(self.shim_pid("m"), "ro", disks, after=(disks, ".overlay"))
        try:
            res = self.v("snapshot-create-as", "m", "s1", check=False)
            ended = time.monotonic()
            fault.wait_done()
        finally:
            fault.stop()
        self.assertLess(fault.done_at, ended, "the fault came after the snapshot: nothing was tested")
        Fault(self.shim_pid("m"), "umount", disks).wait_done()
        base = sha256(root)
        self.with_guest("m", lambda g: (g.fill(0, *REGION_B, 2), g.flush(0)))
        self.assertTrue(self.state("m").startswith("running"), self.state("m"))
        if res.returncode != 0:
            self.assertIn("Read-only file system", res.stderr)
            self.assertEqual(self.v("snapshot-list", "m", "--name").stdout.split(), [])
            self.assertEqual(self.live_chain("m"), [root])
            self.assertEqual(self.with_guest("m", lambda g: g.sum(0, *REGION_B)), pattern_sum(2, REGION_B[1]))
            return
        self.assertEqual(sha256(root), base, "the snapshot's base image took the guest's writes")
        self.assertEqual(len(self.live_chain("m")), 3, self.live_chain("m"))
        self.v("snapshot-revert", "m", "s1")
        self.assertEqual(self.with_guest("m", lambda g: g.sum(0, *REGION_A)), pattern_sum(1, REGION_A[1]))
        self.assertEqual(self.with_guest("m", lambda g: g.sum(0, *REGION_B)), zero_sum(REGION_B[1]))

    def test_image_truncated_under_a_running_vm(self):
        root = self.image("t.img", 16 * MIB)
        self.define_disks("t", [(root, "vda")])
        self.v("start", "t")
        self.with_guest("t", lambda g: (g.fill(0, *REGION_A, 1), g.flush(0)))
        # Before the first snapshot: the image would become a base too short.
        os.truncate(root, 8 * MIB)
        res = self.v("snapshot-create-as", "t", "s1", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(root, res.stderr)
        self.assertIn("truncated", res.stderr)
        self.assertEqual(self.v("snapshot-list", "t", "--name").stdout.split(), [])
        os.truncate(root, 16 * MIB)
        self.v("snapshot-create-as", "t", "s1")
        # The base cut under the VM: the next snapshot could never be reverted to.
        self.with_guest("t", lambda g: (g.fill(0, *REGION_B, 2), g.flush(0)))
        os.truncate(root, 8 * MIB)
        res = self.v("snapshot-create-as", "t", "s2", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(root, res.stderr)
        self.assertIn("changed since it became the base", res.stderr)
        self.assertEqual(self.v("snapshot-list", "t", "--name").stdout.split(), ["s1"])
        self.assertTrue(self.state("t").startswith("running"), self.state("t"))
        self.assertEqual(self.with_guest("t", lambda g: g.sum(0, *REGION_B)), pattern_sum(2, REGION_B[1]))

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
