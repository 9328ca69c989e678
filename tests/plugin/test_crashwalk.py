"""Crash-point walk: every write, fsync, rename and unlink that the daemon or
a shim makes under the daemon's state directory during an operation is a
crash point (tests/lib/crashpoint.c, preloaded into both). For each operation
the walk counts its points, then repeats it on a fresh domain killing
(kill -9) whichever process reaches point n, restarts the daemon and checks
that the domain is as before or as after: never paused by nobody, no phantom
job, no orphan shim, no partial or unrecorded snapshot directory, and every
recorded snapshot still reverts to its own memory.

CI walks a bounded sample of each operation's points (VSNAP_CRASHWALK_POINTS,
default 5, always the first and the last); VSNAP_CRASHWALK_FULL=1 walks every
point (README: the long crash-point walk)."""

import fcntl
import os
import shutil
import tempfile
import unittest

import libvirt

import test_kill
from disktest import MIB, DiskGuest, disk_xml, make_image, pattern_sum, zero_sum
from test_snapshots import REGION_A, REGION_B
from vsnapd import needs_guest, wait_for

DISK_REGIONS = ((0, MIB), (4 * MIB, MIB), (8 * MIB, MIB))

PRELOAD = os.environ.get("VSNAP_CRASHPOINT_LIB", "")
FULL = os.environ.get("VSNAP_CRASHWALK_FULL") == "1"
SAMPLE = int(os.environ.get("VSNAP_CRASHWALK_POINTS", "5"))
WALKED = {}


def sample(n):
    """Which of points 1..n to walk."""
    if FULL or n <= SAMPLE:
        return list(range(1, n + 1))
    step = (n - 1) / (SAMPLE - 1)
    return sorted({1 + round(i * step) for i in range(SAMPLE)})


class Control:
    """The walk's control directory (see crashpoint.c)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="vsnap-crashwalk-")
        os.chmod(self.dir, 0o755)   # confined shims (the vsnap user) read it too

    def path(self, name):
        return os.path.join(self.dir, name)

    def arm(self, at):
        for name in ("count", "log"):
            if os.path.exists(self.path(name)):
                os.unlink(self.path(name))
            # ... and write these once they have dropped root.
            with open(self.path(name), "w"):
                pass
            os.chmod(self.path(name), 0o666)
        with open(self.path("at"), "w") as f:
            f.write(f"{at}\n")
        open(self.path("armed"), "w").close()

    def disarm(self):
        """No point is counted after this returns: a point on its way (it
        saw 'armed' before the unlink) holds the sequence lock until it has
        logged itself and killed its process if it was the one."""
        if os.path.exists(self.path("armed")):
            os.unlink(self.path("armed"))
        with open(self.path("count"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)

    def points(self):
        if not os.path.exists(self.path("log")):
            return []
        with open(self.path("log")) as f:
            return [line.split(" ", 4) for line in f.read().splitlines()]

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


@needs_guest
@unittest.skipUnless(PRELOAD, "VSNAP_CRASHPOINT_LIB is not set")
class CrashWalk(test_kill.CrashTestBase):
    def setUp(self):
        self.ctl = Control()
        super().setUp()
        # The control directory is bound into every confined shim's jail.
        self.hook_env = {"LD_PRELOAD": PRELOAD, "VSNAP_CRASH_CONTROL": self.ctl.dir,
                         "VSNAP_CRASH_UNDER": self.daemon.state,
                         "VSNAPD_TEST_JAIL_PATHS": self.ctl.dir}
        self.daemon.stop()
        self.daemon.start(env=self.hook_env)
        self.serial = 0

    def tearDown(self):
        super().tearDown()
        self.ctl.cleanup()

    def restart(self, hook=None):
        if self.daemon.proc and self.daemon.proc.poll() is None:
            self.daemon.proc.kill()
        if self.daemon.proc:
            self.daemon.proc.wait(timeout=20)
        self.daemon.proc = None
        self.daemon.start(env=self.hook_env)

    # ---- the walk ----

    def fresh(self, op):
        self.serial += 1
        return f"{op}{self.serial}"

    def walk(self, op, prepare, act, check):
        """prepare(name) -> context; act(name, ctx, check) runs the operation;
        check(name, ctx, killed) asserts as-before-or-after."""
        name = self.fresh(op)
        ctx = prepare(name)
        self.ctl.arm(0)
        act(name, ctx, True)
        self.ctl.disarm()
        points = self.ctl.points()
        self.assertTrue(points, f"{op}: no crash point was reached (is the library preloaded?)")
        check(name, ctx, None)
        self.forget(name)
        walked = sample(len(points))
        for at in walked:
            name = self.fresh(op)
            ctx = prepare(name)
            self.ctl.arm(at)
            act(name, ctx, False)
            self.ctl.disarm()
            hit = [p for p in self.ctl.points() if p[0] == str(at)]
            killed = hit[0][2] if hit else None
            if killed == "virtvsnapd":
                self.daemon.proc.wait(timeout=20)
            if self.daemon.proc.poll() is not None:
                self.restart()
            else:
                self.settle(name, killed)
            with self.subTest(op=op, point=at, where=" ".join(hit[0][2:]) if hit else "not reached"):
                check(name, ctx, killed)
            self.forget(name)
        WALKED[op] = (len(points), len(walked))
        self.programs = {p[2] for p in points}
        print(f"{op}: {len(points)} crash points, walked {len(walked)}: "
              f"{sorted({p[3] + ':' + p[2] for p in points})}")

    def settle(self, name, killed):
        """A killed shim: wait until the daemon has seen it go (the job ends,
        and the domain reads shut off unless another shim runs it now)."""
        wait_for(lambda: self.job(name) == libvirt.VIR_DOMAIN_JOB_NONE, timeout=30,
                 what=f"{name}'s job to end")
        if killed == "vsnap-shim":
            wait_for(lambda: not self.state(name).startswith("running") or
                     self.shim_alive(name), timeout=30,
                     what=f"the daemon to see {name}'s shim die")

    def shim_alive(self, name):
        pid = self.daemon.shim_pids().get(name)
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, TypeError):
            return False

    def forget(self, name):
        """Remove the domain and everything of it."""
        self.v("destroy", name, check=False)
        for snap in self.v("snapshot-list", name, "--name", check=False).stdout.split():
            self.v("snapshot-delete", name, snap, "--metadata", check=False)
        self.v("managedsave-remove", name, check=False)
        self.v("undefine", name, "--snapshots-metadata", "--managed-save", check=False)

    # ---- what every outcome must satisfy ----

    def assert_clean(self, name):
        self.assertEqual(self.job(name), libvirt.VIR_DOMAIN_JOB_NONE, "phantom job")
        self.assertEqual(self.leftovers(name), [], "partial or unrecorded directories")
        state = self.state(name)
        self.assertFalse(state.startswith("paused"), f"paused by nobody: {state}")
        shims = self.shims_of(name)
        if state.startswith("running"):
            self.assertEqual(shims, [self.daemon.shim_pids()[name]], "orphan shim")
        else:
            for pid in shims:
                wait_for(lambda: not os.path.exists(f"/proc/{pid}") or
                         open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z",
                         timeout=10, what=f"orphan shim {pid} of a stopped domain to go")
        return state

    def snapshots(self, name):
        return set(self.v("snapshot-list", name, "--name").stdout.split())

    def assert_reverts(self, name, expected):
        """Every recorded snapshot reverts to its own memory."""
        for snap in sorted(self.snapshots(name)):
            self.check_revert(name, snap, expected[snap])

    def running_or_crashed(self, name, killed):
        """A killed shim takes its VM with it (shut off (crashed)); a killed
        daemon leaves the VM running."""
        state = self.assert_clean(name)
        if killed == "vsnap-shim":
            self.assertIn(state, ("running (booted)", "shut off (crashed)"), state)
        else:
            self.assertEqual(state, "running (booted)")
        return state

    def revive(self, name, state):
        if not state.startswith("running"):
            self.v("start", name)
            self.guest(name).close()

    # ---- operations ----

    def prepare_running(self, name):
        self.start_guest(name, memory_mib=64)
        return {"boot": self.sums(name)}

    def prepare_with_base(self, name):
        ctx = self.prepare_running(name)
        self.v("snapshot-create-as", name, "base")
        g = self.guest(name)
        g.fill(REGION_A, 33)
        g.close()
        ctx["now"] = self.sums(name)
        return ctx

    def test_walk_snapshot_create_full(self):
        def act(name, ctx, check):
            self.v("snapshot-create-as", name, "s1", check=check)

        def check(name, ctx, killed):
            state = self.running_or_crashed(name, killed)
            snaps = self.snapshots(name)
            self.assertTrue(snaps <= {"s1"}, snaps)
            if state.startswith("running"):
                self.assertEqual(self.sums(name), ctx["boot"])
            self.assert_reverts(name, {"s1": ctx["boot"]})
        self.walk("full", self.prepare_running, act, check)
        # The shim writes the snapshot: its points count too, confined as it is.
        self.assertIn("vsnap-shim", self.programs)

    def test_walk_snapshot_create_diff(self):
        def act(name, ctx, check):
            self.v("snapshot-create-as", name, "s2", check=check)

        def check(name, ctx, killed):
            state = self.running_or_crashed(name, killed)
            snaps = self.snapshots(name)
            self.assertTrue({"base"} <= snaps <= {"base", "s2"}, snaps)
            if state.startswith("running"):
                self.assertEqual(self.sums(name), ctx["now"])
            self.assert_reverts(name, {"base": ctx["boot"], "s2": ctx["now"]})
        self.walk("diff", self.prepare_with_base, act, check)

    def test_walk_snapshot_delete_inner(self):
        def prepare(name):
            ctx = self.prepare_with_base(name)
            self.v("snapshot-create-as", name, "mid")
            g = self.guest(name)
            g.fill(REGION_B, 44)
            g.close()
            ctx["top"] = self.sums(name)
            self.v("snapshot-create-as", name, "top")
            return ctx

        def act(name, ctx, check):
            self.v("snapshot-delete", name, "mid", check=check)

        def check(name, ctx, killed):
            self.running_or_crashed(name, killed)
            snaps = self.snapshots(name)
            self.assertTrue({"base", "top"} <= snaps <= {"base", "mid", "top"}, snaps)
            self.assert_reverts(name, {"base": ctx["boot"], "mid": ctx["now"], "top": ctx["top"]})
        self.walk("delete", prepare, act, check)

    def test_walk_revert(self):
        def act(name, ctx, check):
            self.v("snapshot-revert", name, "base", check=check)

        def check(name, ctx, killed):
            state = self.assert_clean(name)
            self.assertEqual(self.snapshots(name), {"base"})
            if killed == "vsnap-shim" and not state.startswith("running"):
                # The shim killed is the old VM (as before, but it crashed)
                # or the new one (the revert failed: its VM died starting).
                self.assertIn(state, ("shut off (crashed)", "shut off (from snapshot)"))
            else:
                self.assertTrue(state.startswith("running"), state)
                self.assertIn(self.sums(name), (ctx["now"], ctx["boot"]))
            self.assert_reverts(name, {"base": ctx["boot"]})
        self.walk("revert", self.prepare_with_base, act, check)

    def disk_sums(self, name):
        g = DiskGuest(self.vsock_path(name))
        try:
            return [g.sum(0, *r) for r in DISK_REGIONS]
        finally:
            g.close()

    def disk_fill(self, name, region, seed):
        g = DiskGuest(self.vsock_path(name))
        try:
            g.fill(0, *DISK_REGIONS[region], seed)
            g.flush(0)
        finally:
            g.close()

    def test_walk_snapshot_delete_kept(self):
        """The delete of the snapshot the disks run on: its layer moves to the
        domain's disk directory and the shim follows (snapshot-disks.h)."""
        filled = [pattern_sum(i + 1, r[1]) for i, r in enumerate(DISK_REGIONS)]

        def prepare(name):
            disk = make_image(os.path.join(self.daemon.dir, name + ".img"), 16 * MIB)
            self.define(name, memory_mib=64, extra_devices=disk_xml(disk, "vda"))
            self.v("start", name)
            self.guest(name).close()
            self.disk_fill(name, 0, 1)
            self.v("snapshot-create-as", name, "base")
            self.disk_fill(name, 1, 2)
            self.v("snapshot-create-as", name, "top")
            self.disk_fill(name, 2, 3)
            return {}

        def act(name, ctx, check):
            self.v("snapshot-delete", name, "top", check=check)

        def check(name, ctx, killed):
            state = self.running_or_crashed(name, killed)
            snaps = self.snapshots(name)
            self.assertTrue({"base"} <= snaps <= {"base", "top"}, snaps)
            if state.startswith("running"):
                self.assertEqual(self.disk_sums(name), filled)
                # A snapshot on whatever the disks run on, which folds a kept layer away.
                self.v("snapshot-create-as", name, "after")
                kept = os.path.join(self.daemon.state, "disks", name)
                self.assertEqual([e for e in os.listdir(kept) if e.startswith("kept-")], [])
                self.v("snapshot-revert", name, "after")
                self.assertEqual(self.disk_sums(name), filled)
            self.v("snapshot-revert", name, "base")
            self.assertEqual(self.disk_sums(name), [filled[0], zero_sum(MIB), zero_sum(MIB)])
        self.walk("delete-kept", prepare, act, check)

    def image(self, name):
        return os.path.join(self.daemon.dir, name + ".save")

    def test_walk_save(self):
        def act(name, ctx, check):
            self.v("save", name, self.image(name), check=check)

        def check(name, ctx, killed):
            state = self.assert_clean(name)
            self.assertFalse(os.path.exists(self.image(name) + ".vsnap-tmp"))
            if state == "shut off (saved)":
                self.v("restore", self.image(name))
            else:
                self.assertIn(state, ("running (booted)", "shut off (crashed)"), state)
                self.assertFalse(os.path.exists(self.image(name)), f"an image of a VM {state}")
                self.revive(name, state)
            if state != "shut off (crashed)":
                self.assertEqual(self.sums(name), ctx["boot"])
        self.walk("save", self.prepare_running, act, check)

    def test_walk_managedsave(self):
        def act(name, ctx, check):
            self.v("managedsave", name, check=check)

        def check(name, ctx, killed):
            state = self.assert_clean(name)
            self.assertIn(state, ("running (booted)", "shut off (saved)", "shut off (crashed)"), state)
            crashed = state == "shut off (crashed)"
            self.revive(name, state)
            if not crashed:
                self.assertEqual(self.sums(name), ctx["boot"])
        self.walk("managedsave", self.prepare_running, act, check)

    def test_walk_restore(self):
        def prepare(name):
            ctx = self.prepare_running(name)
            self.v("save", name, self.image(name))
            return ctx

        def act(name, ctx, check):
            self.v("restore", self.image(name), check=check)

        def check(name, ctx, killed):
            state = self.assert_clean(name)
            if not state.startswith("running"):
                # A daemon restart does not keep an inactive domain's reason.
                self.assertIn(state, ("shut off (saved)", "shut off (crashed)",
                                      "shut off (destroyed)", "shut off (unknown)"), state)
                self.v("restore", self.image(name))
            self.assertEqual(self.sums(name), ctx["boot"])
        self.walk("restore", prepare, act, check)


def tearDownModule():
    if WALKED:
        total = sum(n for n, _ in WALKED.values())
        walked = sum(w for _, w in WALKED.values())
        print(f"crash-point walk: {total} points in {len(WALKED)} operations, {walked} walked")


if __name__ == "__main__":
    unittest.main(verbosity=2)
