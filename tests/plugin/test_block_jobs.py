"""Block jobs on a disk's layer chain through real virsh and python3-libvirt:
blockpull folds the sealed layers into the active overlay while the guest
runs (the image stays the base), blockjob --info/--bandwidth/--abort report
and control it, the BLOCK_JOB and BLOCK_JOB_2 events tell its end, a
snapshot during a job is refused naming it, and kill -9 of the daemon or the
shim mid-pull leaves a chain that reverts with every byte the guest wrote."""

import os
import signal
import subprocess
import threading
import time
import unittest

import libvirt

from disktest import MIB, file_sum, pattern_sum, zero_sum
from test_disk_snapshots import DiskSnapshotBase, sha256
from test_events import EventLoop
from vsnapd import Daemon, wait_for

A = (0, 4 * MIB)          # written before s1
B = (8 * MIB, 4 * MIB)    # written before s2
C = (16 * MIB, 1 * MIB)   # written after s2: the overlay's own


class BlockJobEvents:
    """BLOCK_JOB and BLOCK_JOB_2 events of one domain, as python3-libvirt delivers them."""

    def __init__(self, daemon, name):
        EventLoop.ensure()
        self.conn = daemon.connect()
        self.dom = self.conn.lookupByName(name)
        self.seen = []
        self.cond = threading.Condition()
        self.ids = [self.conn.domainEventRegisterAny(self.dom, event, self.callback, event)
                    for event in (libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB, libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2)]

    def callback(self, conn, dom, disk, kind, status, event):
        with self.cond:
            self.seen.append((event, disk, kind, status))
            self.cond.notify_all()

    def wait(self, count, timeout=30):
        with self.cond:
            self.cond.wait_for(lambda: len(self.seen) >= count, timeout)
            return list(self.seen)

    def close(self):
        for i in self.ids:
            self.conn.domainEventDeregisterAny(i)
        self.conn.close()


class BlockJobBase(DiskSnapshotBase):
    def layered(self, name, size=32 * MIB):
        """A running domain whose vda is image <- s1 (A) <- s2 (B) <- overlay (C)."""
        root = self.image(f"{name}.img", size)
        self.define_disks(name, [(root, "vda")])
        self.v("start", name)
        self.with_guest(name, lambda g: (g.fill(0, *A, 1), g.flush(0)))
        self.v("snapshot-create-as", name, "s1")
        self.with_guest(name, lambda g: (g.fill(0, *B, 2), g.flush(0)))
        self.v("snapshot-create-as", name, "s2")
        self.with_guest(name, lambda g: (g.fill(0, *C, 3), g.flush(0)))
        return root

    def expect(self, name, want):
        def check(g):
            for (offset, length), seed in want:
                got = g.sum(0, offset, length)
                self.assertEqual(got, pattern_sum(seed, length) if seed else zero_sum(length),
                                 f"{name}: region {offset:#x}+{length:#x}")
        self.with_guest(name, check)


class BlockPullTest(BlockJobBase):
    def test_pull_folds_sealed_layers_into_the_overlay(self):
        root = self.layered("p")
        base = sha256(root)
        chain = self.live_chain("p")
        self.assertEqual(len(chain), 4, chain)    # overlay, s2's layer, s1's layer, image
        events = BlockJobEvents(self.daemon, "p")
        try:
            # virsh -q prints no "Pull complete"; --wait returns 0 only on the COMPLETED event.
            self.v("blockpull", "p", "vda", "--wait", timeout=120)
            seen = events.wait(2)
        finally:
            events.close()
        self.assertIn((libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB, root, libvirt.VIR_DOMAIN_BLOCK_JOB_TYPE_PULL,
                       libvirt.VIR_DOMAIN_BLOCK_JOB_COMPLETED), seen)
        self.assertIn((libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2, "vda", libvirt.VIR_DOMAIN_BLOCK_JOB_TYPE_PULL,
                       libvirt.VIR_DOMAIN_BLOCK_JOB_COMPLETED), seen)
        # The disk now runs on its overlay directly over the image, which is unchanged.
        self.assertEqual(self.live_chain("p"), [chain[0], root])
        self.assertEqual(sha256(root), base)
        self.expect("p", [(A, 1), (B, 2), (C, 3), ((24 * MIB, MIB), None)])
        # Sparse: the overlay holds the three regions, not the disk.
        self.assertLess(os.stat(chain[0]).st_blocks * 512, 12 * MIB)
        conn = self.daemon.connect()
        self.assertEqual(conn.lookupByName("p").blockJobInfo("vda", 0), {})
        conn.close()
        # Snapshots go on from the pulled overlay; each earlier one still reverts.
        self.with_guest("p", lambda g: (g.fill(0, *A, 4), g.flush(0)))
        self.v("snapshot-create-as", "p", "s3")
        self.v("snapshot-revert", "p", "s1")
        self.expect("p", [(A, 1), (B, None), (C, None)])
        self.v("snapshot-revert", "p", "s3")
        self.expect("p", [(A, 4), (B, 2), (C, 3)])
        self.v("snapshot-revert", "p", "s2")
        self.expect("p", [(A, 1), (B, 2), (C, None)])
        self.assertEqual(sha256(root), base)

    def test_a_disk_without_layers_has_nothing_to_pull(self):
        root = self.image("raw.img")
        self.define_disks("r", [(root, "vda")])
        self.v("start", "r")
        res = self.v("blockpull", "r", "vda", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("no snapshot layers to pull", res.stderr)
        res = self.v("blockpull", "r", "vdz", check=False)
        self.assertIn("invalid path vdz not assigned to domain", res.stderr)
        res = self.v("blockpull", "r", "vda", "--base", self.path("other.img"), check=False)
        self.assertIn("a partial block pull", res.stderr)


class BlockJobControlTest(BlockJobBase):
    def test_info_bandwidth_abort_and_snapshot_refusal(self):
        root = self.layered("j", size=64 * MIB)
        chain = self.live_chain("j")
        conn = self.daemon.connect()
        dom = conn.lookupByName("j")
        events = BlockJobEvents(self.daemon, "j")
        try:
            # 1 MiB/s: the 8 MiB of layers take seconds.
            self.v("blockpull", "j", "vda", "--bandwidth", "1")
            info = dom.blockJobInfo("vda", 0)
            self.assertEqual(info["type"], libvirt.VIR_DOMAIN_BLOCK_JOB_TYPE_PULL)
            self.assertEqual(info["bandwidth"], 1)
            self.assertEqual(info["end"], 64 * MIB)
            self.assertLess(info["cur"], info["end"])
            self.assertEqual(dom.blockJobInfo("vda", libvirt.VIR_DOMAIN_BLOCK_JOB_INFO_BANDWIDTH_BYTES)["bandwidth"],
                             MIB)
            out = self.v("blockjob", "j", "vda", "--info", "--raw").stdout
            self.assertRegex(out, r"type=Block Pull\s+bandwidth=1\s+cur=\d+\s+end=67108864")
            self.assertIn("Bandwidth limit: 1048576 bytes/s (1.000 MiB/s)",
                          self.v("blockjob", "j", "vda", "--info").stdout)
            # One job per disk; no snapshot while it runs, and the refusal names it.
            res = self.v("blockpull", "j", "vda", check=False)
            self.assertIn("disk 'vda' already in active block job", res.stderr)
            res = self.v("snapshot-create-as", "j", "during", check=False)
            self.assertNotEqual(res.returncode, 0)
            self.assertIn("block pull job of disk 'vda' is under way", res.stderr)
            # The guest runs and writes during the pull.
            self.with_guest("j", lambda g: (g.fill(0, *C, 5), g.flush(0)))
            self.v("blockjob", "j", "vda", "--bandwidth", "2")
            self.assertEqual(dom.blockJobInfo("vda", 0)["bandwidth"], 2)
            dom.blockJobSetSpeed("vda", 3 * MIB, libvirt.VIR_DOMAIN_BLOCK_JOB_SPEED_BANDWIDTH_BYTES)
            self.assertEqual(dom.blockJobInfo("vda", 0)["bandwidth"], 3)
            res = self.v("blockjob", "j", "vda", "--pivot", check=False)
            self.assertIn("has no pivot", res.stderr)
            self.v("blockjob", "j", "vda", "--abort")
            seen = events.wait(2)
        finally:
            events.close()
        self.assertIn((libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2, "vda", libvirt.VIR_DOMAIN_BLOCK_JOB_TYPE_PULL,
                       libvirt.VIR_DOMAIN_BLOCK_JOB_CANCELED), seen)
        self.assertEqual(dom.blockJobInfo("vda", 0), {})
        res = self.v("blockjob", "j", "vda", "--abort", check=False)
        self.assertIn("does not have an active block job", res.stderr)
        # Aborted: the disk stays on its chain, every byte as the guest wrote it.
        self.assertEqual(self.live_chain("j"), chain)
        self.expect("j", [(A, 1), (B, 2), (C, 5)])
        self.v("snapshot-create-as", "j", "after")
        self.v("snapshot-revert", "j", "s1")
        self.expect("j", [(A, 1), (B, None)])
        conn.close()


D = (24 * MIB, MIB)       # written after the pivot: straight into the image


class BlockCommitTest(BlockJobBase):
    def test_active_commit_pivots_the_disk_onto_its_image(self):
        root = self.layered("c")
        events = BlockJobEvents(self.daemon, "c")
        try:
            self.v("blockcommit", "c", "vda", "--active", "--pivot", timeout=120)
            seen = events.wait(4)
        finally:
            events.close()
        commit = libvirt.VIR_DOMAIN_BLOCK_JOB_TYPE_ACTIVE_COMMIT
        self.assertEqual([s for s in seen if s[0] == libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2],
                         [(libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2, "vda", commit, libvirt.VIR_DOMAIN_BLOCK_JOB_READY),
                          (libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2, "vda", commit,
                           libvirt.VIR_DOMAIN_BLOCK_JOB_COMPLETED)])
        self.assertIn((libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB, root, commit, libvirt.VIR_DOMAIN_BLOCK_JOB_COMPLETED),
                      seen)
        # The disk is its image again, which holds every byte of the chain and overlay.
        self.assertEqual(self.live_chain("c"), [root])
        for (offset, length), seed in ((A, 1), (B, 2), (C, 3)):
            self.assertEqual(file_sum(root, offset, length), pattern_sum(seed, length))
        self.expect("c", [(A, 1), (B, 2), (C, 3)])
        self.with_guest("c", lambda g: (g.fill(0, *D, 6), g.flush(0)))
        self.assertEqual(file_sum(root, *D), pattern_sum(6, D[1]))
        # The snapshots' layers sat on the image the commit rewrote: reverting is
        # refused naming the commit; deleting them still works.
        res = self.v("snapshot-revert", "c", "s1", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("blockcommit --active of disk 'vda'", res.stderr)
        self.assertEqual(self.state("c"), "running (booted)")
        self.v("snapshot-delete", "c", "s1")
        self.v("snapshot-delete", "c", "s2")
        # Snapshots go on over the committed image.
        self.v("snapshot-create-as", "c", "s3")
        self.with_guest("c", lambda g: (g.fill(0, *A, 7), g.flush(0)))
        self.v("snapshot-revert", "c", "s3")
        self.expect("c", [(A, 1), (B, 2), (C, 3), (D, 6)])

    def test_abort_before_the_pivot_leaves_the_chain(self):
        self.layered("a", size=64 * MIB)
        chain = self.live_chain("a")
        self.v("blockcommit", "a", "vda", "--active", "--bandwidth", "1")
        res = self.v("snapshot-create-as", "a", "during", check=False)
        self.assertIn("block active commit job of disk 'vda' is under way", res.stderr)
        res = self.v("blockcommit", "a", "vda", "--top", chain[1], check=False)
        self.assertIn("already in active block job", res.stderr)
        self.with_guest("a", lambda g: (g.fill(0, *C, 8), g.flush(0)))
        self.v("blockjob", "a", "vda", "--abort")
        self.assertEqual(self.live_chain("a"), chain)
        self.expect("a", [(A, 1), (B, 2), (C, 8)])
        res = self.v("blockcommit", "a", "vda", "--top", chain[1], check=False)
        self.assertIn("is the top sealed layer of disk 'vda'", res.stderr)


class BlockCopyTest(BlockJobBase):
    def transient(self, name, size=32 * MIB):
        """A transient domain (virsh create) on image <- s1 <- s2 <- overlay."""
        from disktest import disk_domain_xml
        root = self.image(f"{name}.img", size)
        self.v("create", self.write(f"{name}.xml", disk_domain_xml(name, [(root, "vda")])))
        self.with_guest(name, lambda g: (g.fill(0, *A, 1), g.flush(0)))
        self.v("snapshot-create-as", name, "s1")
        self.with_guest(name, lambda g: (g.fill(0, *B, 2), g.flush(0)))
        self.v("snapshot-create-as", name, "s2")
        self.with_guest(name, lambda g: (g.fill(0, *C, 3), g.flush(0)))
        return root

    def test_copy_while_the_guest_writes_then_pivot(self):
        root = self.transient("y")
        base = sha256(root)
        dest = self.path("copy.img")
        events = BlockJobEvents(self.daemon, "y")
        try:
            self.v("blockcopy", "y", "vda", dest, "--bandwidth", "4")
            # The guest writes behind the copy (4 MiB/s: past 5 MiB after 1.5 s) and ahead of it.
            time.sleep(1.5)
            info = self.daemon.connect().lookupByName("y").blockJobInfo("vda", 0)
            self.assertGreater(info["cur"], 6 * MIB)
            self.assertLess(info["cur"], 28 * MIB)
            self.with_guest("y", lambda g: (g.fill(0, 5 * MIB, MIB, 5), g.fill(0, 28 * MIB, MIB, 6), g.flush(0)))
            res = self.v("snapshot-create-as", "y", "during", check=False)
            self.assertIn("block copy job of disk 'vda' is under way", res.stderr)
            self.v("blockjob", "y", "vda", "--bandwidth", "0")
            ready = (libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2, "vda", libvirt.VIR_DOMAIN_BLOCK_JOB_TYPE_COPY,
                     libvirt.VIR_DOMAIN_BLOCK_JOB_READY)
            wait_for(lambda: ready in events.seen, timeout=60, what="READY")
            self.with_guest("y", lambda g: (g.fill(0, *D, 7), g.flush(0)))
            self.v("blockjob", "y", "vda", "--pivot")
            seen = events.wait(4)
        finally:
            events.close()
        copy = libvirt.VIR_DOMAIN_BLOCK_JOB_TYPE_COPY
        self.assertEqual([s[3] for s in seen if s[0] == libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2 and s[2] == copy],
                         [libvirt.VIR_DOMAIN_BLOCK_JOB_READY, libvirt.VIR_DOMAIN_BLOCK_JOB_COMPLETED])
        self.assertEqual(self.live_chain("y"), [dest])
        want = [(A, 1), ((5 * MIB, MIB), 5), (B, 2), (C, 3), (D, 7), ((28 * MIB, MIB), 6)]
        for (offset, length), seed in want:
            self.assertEqual(file_sum(dest, offset, length), pattern_sum(seed, length), f"{offset:#x}")
        self.expect("y", want)
        self.with_guest("y", lambda g: (g.fill(0, *A, 8), g.flush(0)))
        self.assertEqual(file_sum(dest, *A), pattern_sum(8, A[1]))
        # The old disk is untouched: its snapshots still revert.
        self.assertEqual(sha256(root), base)
        self.v("snapshot-revert", "y", "s2")
        self.expect("y", [(A, 1), (B, 2), (C, None)])

    def test_copy_wait_pivot(self):
        root = self.transient("w")
        dest = self.path("w-copy.img")
        self.v("blockcopy", "w", "vda", dest, "--wait", "--pivot", timeout=120)
        self.assertEqual(self.live_chain("w"), [dest])
        self.expect("w", [(A, 1), (B, 2), (C, 3)])
        for (offset, length), seed in ((A, 1), (B, 2), (C, 3)):
            self.assertEqual(file_sum(dest, offset, length), pattern_sum(seed, length))
        self.assertEqual(file_sum(root, *B), zero_sum(B[1]))   # the old image: the base, untouched

    def test_abort_mid_copy_leaves_the_old_disk_and_no_target(self):
        self.transient("z", size=64 * MIB)
        chain = self.live_chain("z")
        dest = self.path("partial.img")
        self.v("blockcopy", "z", "vda", dest, "--bandwidth", "1")
        time.sleep(0.5)
        self.assertTrue(os.path.exists(dest))
        self.v("blockjob", "z", "vda", "--abort")
        self.assertFalse(os.path.exists(dest))
        self.assertEqual(self.live_chain("z"), chain)
        self.with_guest("z", lambda g: (g.fill(0, *D, 9), g.flush(0)))
        self.expect("z", [(A, 1), (B, 2), (C, 3), (D, 9)])
        # --finish: READY, then the disk stays where it is and the copy is whole.
        finished = self.path("finished.img")
        self.v("blockcopy", "z", "vda", finished, "--wait", "--finish", timeout=120)
        self.assertEqual(self.live_chain("z"), chain)
        for (offset, length), seed in ((A, 1), (B, 2), (C, 3), (D, 9)):
            self.assertEqual(file_sum(finished, offset, length), pattern_sum(seed, length))
        # A shim killed mid-copy leaves no target either; a persistent domain is refused.
        self.v("blockcopy", "z", "vda", dest, "--bandwidth", "1")
        os.kill(self.daemon.shim_pids()["z"], signal.SIGKILL)
        wait_for(lambda: not os.path.exists(dest), what="the partial target goes")
        root = self.image("p.img")
        self.define_disks("p", [(root, "vda")])
        self.v("start", "p")
        res = self.v("blockcopy", "p", "vda", self.path("p-copy.img"), check=False)
        self.assertIn("domain is not transient", res.stderr)
        self.assertFalse(os.path.exists(self.path("p-copy.img")))


class InnerCommitTest(BlockJobBase):
    def test_inner_range_folds_into_its_child(self):
        root = self.layered("i")
        self.with_guest("i", lambda g: (g.fill(0, *D, 4), g.flush(0)))
        self.v("snapshot-create-as", "i", "s3")
        self.with_guest("i", lambda g: (g.fill(0, *C, 5), g.flush(0)))
        base = sha256(root)
        chain = self.live_chain("i")      # overlay, s3's, s2's, s1's layer, image
        self.assertEqual(len(chain), 5, chain)
        res = self.v("blockcommit", "i", "vda", "--top", chain[2], "--active", check=False)
        self.assertIn("starts at its active layer", res.stderr)
        res = self.v("blockcommit", "i", "vda", "--top", self.path("nowhere"), check=False)
        self.assertIn("could not find image", res.stderr)
        events = BlockJobEvents(self.daemon, "i")
        try:
            # s2's layer folds into s3's; s1's stays the base of the range.
            self.v("blockcommit", "i", "vda", "--top", chain[2], "--base", chain[3], "--wait", timeout=120)
            seen = events.wait(2)
        finally:
            events.close()
        self.assertIn((libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2, "vda", libvirt.VIR_DOMAIN_BLOCK_JOB_TYPE_COMMIT,
                       libvirt.VIR_DOMAIN_BLOCK_JOB_COMPLETED), seen)
        self.assertEqual(self.live_chain("i"), [chain[0], chain[1], chain[3], root])
        self.expect("i", [(A, 1), (B, 2), (D, 4), (C, 5)])
        # The rest of the chain, with --shallow (s1's layer into s3's, over the image).
        self.v("blockcommit", "i", "vda", "--top", chain[3], "--shallow", "--wait", timeout=120)
        self.assertEqual(self.live_chain("i"), [chain[0], chain[1], root])
        self.expect("i", [(A, 1), (B, 2), (D, 4), (C, 5)])
        self.assertEqual(sha256(root), base)
        # The folded layers stay in their snapshots: each still reverts, and so does s3.
        self.v("snapshot-create-as", "i", "s4")
        for snap, want in (("s1", [(A, 1), (B, None)]), ("s2", [(A, 1), (B, 2), (D, None)]),
                           ("s3", [(A, 1), (B, 2), (D, 4), (C, 3)]), ("s4", [(A, 1), (B, 2), (D, 4), (C, 5)])):
            with self.subTest(snapshot=snap):
                self.v("snapshot-revert", "i", snap)
                self.expect("i", want)
        self.v("snapshot-delete", "i", "s2")
        self.v("snapshot-revert", "i", "s3")
        self.expect("i", [(A, 1), (B, 2), (D, 4), (C, 3)])


class BlockJobFaultTest(BlockJobBase):
    def small_disk_dir(self, name, size):
        """The domain's disk directory (its overlays) on a tmpfs of size bytes."""
        path = os.path.join(self.daemon.state, "disks", name)
        os.makedirs(path, mode=0o700)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", path]).returncode:
            self.skipTest("cannot mount a tmpfs here")
        self.addCleanup(subprocess.run, ["umount", "-l", path])
        return path

    def fill_up(self, path):
        """Take every free byte of path's file system."""
        with open(path, "wb") as f:
            try:
                while True:
                    f.write(b"x" * 65536)
                    f.flush()
            except OSError:
                pass

    def test_a_full_disk_fails_the_pull_cleanly(self):
        disks = self.small_disk_dir("f", 4 * MIB)
        b1, b2 = (8 * MIB, 1 * MIB), (12 * MIB, 1 * MIB)
        root = self.image("f.img", 32 * MIB)
        self.define_disks("f", [(root, "vda")])
        self.v("start", "f")
        self.v("snapshot-create-as", "f", "s0")
        self.with_guest("f", lambda g: (g.fill(0, *b1, 1), g.flush(0)))
        self.v("snapshot-create-as", "f", "s1")
        self.with_guest("f", lambda g: (g.fill(0, *b2, 2), g.flush(0)))
        self.v("snapshot-create-as", "f", "s2")
        self.with_guest("f", lambda g: (g.fill(0, *C, 3), g.flush(0)))
        chain = self.live_chain("f")
        filler = os.path.join(disks, "filler")
        # A pull that cannot fit is refused up front, naming why.
        self.fill_up(filler)
        res = self.v("blockpull", "f", "vda", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("the pull needs 2048 KiB", res.stderr)
        self.assertIn("No space left on device", res.stderr)
        os.unlink(filler)
        # The room goes while the pull runs: the job fails, named, and the disk
        # stays on its chain with every byte.
        events = BlockJobEvents(self.daemon, "f")
        try:
            self.v("blockpull", "f", "vda", "--bandwidth", "1")
            self.fill_up(filler)
            seen = events.wait(2)
        finally:
            events.close()
        self.assertIn((libvirt.VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2, "vda", libvirt.VIR_DOMAIN_BLOCK_JOB_TYPE_PULL,
                       libvirt.VIR_DOMAIN_BLOCK_JOB_FAILED), seen)
        self.assertIn("block pull of disk vda failed: No space left on device", self.daemon.log())
        os.unlink(filler)
        self.assertEqual(self.state("f"), "running (booted)")
        self.assertEqual(self.live_chain("f"), chain)
        self.expect("f", [(b1, 1), (b2, 2), (C, 3)])
        self.v("snapshot-revert", "f", "s1")
        self.expect("f", [(b1, 1), (b2, None)])

    def slow_pull(self, name):
        root = self.layered(name, size=64 * MIB)
        self.v("blockpull", name, "vda", "--bandwidth", "1")
        time.sleep(1)
        return root

    def test_kill_of_the_shim_mid_pull_leaves_a_chain_that_reverts(self):
        self.slow_pull("k")
        os.kill(self.daemon.shim_pids()["k"], signal.SIGKILL)
        wait_for(lambda: self.state("k").startswith("shut off"), what="the domain ends with its shim")
        self.assertEqual(self.v("blockjob", "k", "vda", "--info", check=False).returncode, 1)
        self.v("snapshot-revert", "k", "s2")
        self.expect("k", [(A, 1), (B, 2), (C, None)])
        self.v("snapshot-revert", "k", "s1")
        self.expect("k", [(A, 1), (B, None)])

    def test_kill_of_the_shim_mid_commit_leaves_a_chain_that_reverts(self):
        """The copy of an active commit is a pull: the image and the snapshots are untouched until the pivot."""
        root = self.layered("m", size=64 * MIB)
        base = sha256(root)
        self.v("blockcommit", "m", "vda", "--active", "--bandwidth", "1")
        time.sleep(1)
        os.kill(self.daemon.shim_pids()["m"], signal.SIGKILL)
        wait_for(lambda: self.state("m").startswith("shut off"), what="the domain ends with its shim")
        self.assertEqual(sha256(root), base)
        self.v("start", "m")
        self.expect("m", [(A, 1), (B, 2), (C, 3)])
        self.v("snapshot-revert", "m", "s1")
        self.expect("m", [(A, 1), (B, None)])

    def test_a_pivot_cut_short_is_finished_at_the_next_boot(self):
        """The shim killed in the pivot, after the daemon wrote its intent (the
        snapshots' marks come before it): the next start folds the overlay
        into the image and the disk is its image again."""
        root = self.layered("v")
        # --wait without --pivot: virsh returns at READY, the job waits.
        self.v("blockcommit", "v", "vda", "--active", "--wait", timeout=120)
        self.assertEqual(len(self.live_chain("v")), 2)      # pulled: the overlay on the image
        with open(os.path.join(self.daemon.state, "disks", "v", "pivot-vda"), "w") as f:
            f.write("vda")
        os.kill(self.daemon.shim_pids()["v"], signal.SIGKILL)
        wait_for(lambda: self.state("v").startswith("shut off"), what="the domain ends with its shim")
        self.v("start", "v")
        self.assertIn("the pivot of its active commit a crash cut short is finished", self.daemon.log())
        self.assertEqual(self.live_chain("v"), [root])
        self.assertFalse(os.path.exists(os.path.join(self.daemon.state, "disks", "v", "pivot-vda")))
        for (offset, length), seed in ((A, 1), (B, 2), (C, 3)):
            self.assertEqual(file_sum(root, offset, length), pattern_sum(seed, length))
        self.expect("v", [(A, 1), (B, 2), (C, 3)])

    def test_kill_of_the_daemon_mid_commit_and_the_pivot_after(self):
        root = self.layered("e", size=64 * MIB)
        self.v("blockcommit", "e", "vda", "--active", "--bandwidth", "1")
        self.daemon.stop(signal.SIGKILL)
        self.daemon.start()
        # The new daemon does not know the job; the shim finished it meanwhile or will.
        self.expect("e", [(A, 1), (B, 2), (C, 3)])
        self.v("destroy", "e")
        self.v("snapshot-revert", "e", "s2")
        self.expect("e", [(A, 1), (B, 2), (C, None)])
        self.assertEqual(self.live_chain("e")[-1], root)

    def test_kill_of_the_daemon_mid_pull_leaves_a_chain_that_reverts(self):
        self.slow_pull("d")
        self.daemon.stop(signal.SIGKILL)
        self.daemon.start()
        self.assertEqual(self.state("d"), "running (booted)")
        self.expect("d", [(A, 1), (B, 2), (C, 3)])
        self.v("destroy", "d")
        self.v("snapshot-revert", "d", "s2")
        self.expect("d", [(A, 1), (B, 2), (C, None)])
        self.v("snapshot-revert", "d", "s1")
        self.expect("d", [(A, 1), (B, None)])


if __name__ == "__main__":
    unittest.main()
