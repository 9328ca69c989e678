"""kill -9 of the daemon in the middle of a snapshot, a save or a start, at
aimed points (VSNAPD_TEST_HOOK, plugin/util/include/util/test-hook.h) and at random ones; and a
shim that dies in the middle of a diff. After a restart every domain is as
before or as after: never paused by nobody, no phantom job, no orphan shim,
no snapshot directory nobody recorded, no partial directory."""

import os
import random
import signal
import subprocess
import threading
import time
import unittest

import libvirt

from test_snapshots import MIB, REGION_A, REGION_B, SnapshotTestBase
from vsnapd import wait_for


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def process_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


class CrashTestBase(SnapshotTestBase):
    """What crash tests share: restarting the daemon, finding shims and
    leftovers, and the as-before check."""

    def setUp(self):
        super().setUp()
        self.sums_at_base = None

    def start_guest(self, name, memory_mib=128):
        super().start_guest(name, memory_mib)
        self.sums_at_base = self.sums(name)

    def restart(self, hook=None):
        """A new daemon (the old one was killed), with a hook or none."""
        if self.daemon.proc and self.daemon.proc.poll() is None:
            self.daemon.proc.kill()
        if self.daemon.proc:
            self.daemon.proc.wait(timeout=20)
        self.daemon.proc = None
        self.daemon.start(env={"VSNAPD_TEST_HOOK": hook} if hook else None)

    def shims_of(self, name):
        """pids of every process whose command line names the domain's API
        socket: its shims, whether a pid file names them or not."""
        api = os.path.join(self.daemon.state, "run", name, "api.sock").encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if b"path=" + api in args:
                found.append(int(entry))
        return found

    def leftovers(self, name):
        """Snapshot directories without metadata, partial directories and
        managed-save or save work left on disk."""
        out = []
        snaps = os.path.join(self.daemon.state, "snapshots", name)
        for entry in os.listdir(snaps) if os.path.isdir(snaps) else []:
            path = os.path.join(snaps, entry)
            if os.path.isdir(path) and not os.path.exists(os.path.join(path, "snapshot.ini")):
                out.append(path)
        area = os.path.join(self.daemon.state, "saves", name)
        for entry in os.listdir(area) if os.path.isdir(area) else []:
            if entry != "managed":
                out.append(os.path.join(area, entry))
        return out

    def job(self, name):
        conn = self.daemon.connect(readonly=True)
        try:
            return conn.lookupByName(name).jobInfo()[0]
        finally:
            conn.close()

    def assert_as_before(self, name, sums, pid):
        """Running as before the interrupted job, in the same shim, memory
        intact, nothing left behind."""
        self.assertEqual(self.state(name), "running (booted)")
        self.assertEqual(self.job(name), libvirt.VIR_DOMAIN_JOB_NONE)
        self.assertEqual(self.daemon.shim_pids()[name], pid)
        self.assertEqual(self.shims_of(name), [pid])
        self.assertEqual(self.leftovers(name), [])
        self.assertEqual(self.sums(name), sums)



class CrashTest(CrashTestBase):
    def test_killed_at_each_step_of_a_snapshot(self):
        self.start_guest("c1")
        self.v("snapshot-create-as", "c1", "base")   # the next ones are diffs
        pid = self.daemon.shim_pids()["c1"]
        g = self.guest("c1")
        g.fill(REGION_A, 21)
        sums = (g.sum(REGION_A), g.sum(REGION_B))
        g.close()
        for step in ("snapshot-paused", "snapshot-written", "snapshot-taken"):
            self.restart(hook=f"{step}:kill")
            res = self.v("snapshot-create-as", "c1", "s-" + step, check=False)
            self.assertNotEqual(res.returncode, 0, f"the daemon survived {step}")
            self.daemon.proc.wait(timeout=20)
            self.restart()
            self.assert_as_before("c1", sums, pid)
            # Never recorded: the snapshot is not there; the next one works.
            self.assertEqual(self.v("snapshot-list", "c1", "--name").stdout.split(), ["base"])
            print(f"killed at {step}: running (booted), no job, nothing left")
        self.v("snapshot-create-as", "c1", "after")
        self.check_revert("c1", "base", self.sums_at_base)

    def test_killed_during_a_save_or_managed_save(self):
        self.start_guest("c2")
        pid = self.daemon.shim_pids()["c2"]
        sums = self.sums("c2")
        target = os.path.join(self.daemon.dir, "c2.save")
        for cmd in (["save", "c2", target], ["managedsave", "c2"]):
            self.restart(hook="save-paused:kill")
            res = self.v(*cmd, check=False)
            self.assertNotEqual(res.returncode, 0)
            self.daemon.proc.wait(timeout=20)
            self.restart()
            self.assert_as_before("c2", sums, pid)
            self.assertFalse(os.path.exists(target + ".vsnap-tmp"))
            self.assertFalse(os.path.exists(target))
        self.assertEqual(self.v("dominfo", "c2").returncode, 0)
        self.v("managedsave", "c2")   # and a real one still works
        self.v("start", "c2")
        self.assertEqual(self.sums("c2"), sums)

    def test_killed_during_a_dump(self):
        """A dump's job resumes the VM it paused; its unnamed file went with
        the daemon that held it."""
        self.start_guest("c5")
        pid = self.daemon.shim_pids()["c5"]
        sums = self.sums("c5")
        target = os.path.join(self.daemon.dir, "c5.core")
        self.restart(hook="dump-paused:kill")
        res = self.v("dump", "c5", target, "--memory-only", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.daemon.proc.wait(timeout=20)
        self.restart()
        self.assert_as_before("c5", sums, pid)
        self.assertFalse(os.path.exists(target))
        self.assertEqual([n for n in os.listdir(self.daemon.dir) if "dump" in n or n.endswith(".core")], [])
        self.v("dump", "c5", target, "--memory-only")   # and a real one still works
        self.assertTrue(os.path.exists(target))

    def test_killed_during_start(self):
        self.define("c3")
        for step in ("start-spawned", "start-launched"):
            self.restart(hook=f"{step}:kill")
            res = self.v("start", "c3", check=False)
            self.assertNotEqual(res.returncode, 0)
            self.daemon.proc.wait(timeout=20)
            orphans = self.shims_of("c3")
            self.assertTrue(orphans, "the shim should outlive the daemon")
            self.restart()
            for pid in orphans:
                wait_for(lambda: not alive(pid) or process_state(pid) == "Z", timeout=10,
                         what=f"the orphan shim {pid} (after {step}) to be stopped")
            self.assertTrue(self.state("c3").startswith("shut off"), self.state("c3"))
            self.assertEqual(self.shims_of("c3"), [])
            print(f"killed at {step}: orphan shim {orphans} stopped, domain {self.state('c3')}")
        self.v("start", "c3")
        self.guest("c3").close()

    def test_restore_of_a_gone_domain_is_not_raced_by_start(self):
        """A restore that lists a new (transient) domain holds its job from
        the moment it is listed: a start racing it waits, then finds it
        running, and no shim runs for a domain the list dropped."""
        path = self.define("c6")
        self.v("undefine", "c6")
        self.v("create", path)   # transient: gone once saved
        self.guest("c6").close()
        sums = self.sums("c6")
        image = os.path.join(self.daemon.dir, "c6.save")
        self.v("save", "c6", image)
        self.restart(hook="restore-listed:slow")   # 50 ms listed before the restore runs
        restore = threading.Thread(target=lambda: setattr(self, "restored", self.v("restore", image, check=False)))
        restore.start()
        starts = []
        while restore.is_alive():
            starts.append(self.v("start", "c6", check=False))
        restore.join()
        self.assertEqual(self.restored.returncode, 0, self.restored.stderr)
        self.assertFalse([r for r in starts if r.returncode == 0], "a start won over the restore")
        self.assertEqual(self.state("c6"), "running (restored)")
        self.assertEqual(len(self.shims_of("c6")), 1, self.shims_of("c6"))
        self.assertEqual(self.sums("c6"), sums)
        self.v("destroy", "c6")
        self.assertEqual(self.shims_of("c6"), [])

    def test_killed_at_random_points(self):
        rng = random.Random(1212)
        self.start_guest("c4")
        self.v("snapshot-create-as", "c4", "base")
        self.define("c5")
        for i in range(6):
            # A snapshot (diff) of c4 and a start of c5, the daemon killed
            # somewhere in the middle of both.
            delay = rng.uniform(0.005, 0.25)
            snap = subprocess.Popen(["virsh", "-q", "-c", self.daemon.uri, "snapshot-create-as",
                                     "c4", f"r{i}"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            start = subprocess.Popen(["virsh", "-q", "-c", self.daemon.uri, "start", "c5"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            self.daemon.proc.kill()
            snap.wait(timeout=30)
            start.wait(timeout=30)
            self.restart()
            state = self.state("c4")
            self.assertEqual(state, "running (booted)", f"round {i}, killed after {delay:.3f} s")
            self.assertEqual(self.job("c4"), libvirt.VIR_DOMAIN_JOB_NONE)
            self.assertEqual(self.leftovers("c4"), [])
            listed = set(self.v("snapshot-list", "c4", "--name").stdout.split())
            self.assertTrue({"base"} <= listed <= {"base"} | {f"r{j}" for j in range(i + 1)})
            # c5 either runs in the one shim its pid file names, or is off
            # with no shim at all.
            shims = self.shims_of("c5")
            if self.state("c5").startswith("running"):
                self.assertEqual(shims, [self.daemon.shim_pids()["c5"]])
                self.v("destroy", "c5")
            else:
                for pid in shims:
                    wait_for(lambda: not alive(pid) or process_state(pid) == "Z", timeout=10,
                             what="an orphan shim of c5 to be stopped")
            print(f"round {i}: killed after {delay * 1000:.0f} ms: c4 {state}, "
                  f"snapshots {sorted(listed)}, c5 {self.state('c5')}")
        self.guest("c4").close()

    def test_shim_dies_in_the_middle_of_a_diff(self):
        # 64 MiB dirtied since the base: the diff takes a while to write, and
        # the shim is killed while its partial directory exists.
        self.start_guest("c6", memory_mib=256)
        self.v("snapshot-create-as", "c6", "base")
        g = self.guest("c6")
        g.fill((16 * MIB, 64 * MIB), 9)
        g.close()
        pid = self.daemon.shim_pids()["c6"]
        snaps = os.path.join(self.daemon.state, "snapshots", "c6")
        killed = threading.Event()

        def kill_when_writing():
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if any(".partial-" in e for e in os.listdir(snaps)):
                    os.kill(pid, signal.SIGKILL)
                    killed.set()
                    return
                time.sleep(0.0005)

        killer = threading.Thread(target=kill_when_writing)
        killer.start()
        res = self.v("snapshot-create-as", "c6", "diff", check=False)
        killer.join()
        self.assertTrue(killed.is_set(), "the shim was never seen writing the diff")
        self.assertNotEqual(res.returncode, 0)
        # The error is the diff's own, not that of a full snapshot tried after.
        self.assertIn("vm.snapshot", res.stderr)
        self.assertNotIn("vm.pause", res.stderr)
        wait_for(lambda: self.state("c6") == "shut off (crashed)", what="the crash to be seen")
        self.assertEqual(self.leftovers("c6"), [])
        print("shim killed mid-diff:", res.stderr.strip().splitlines()[-1])

    def test_partial_directories_go_at_start_up(self):
        self.start_guest("c7")
        self.daemon.stop()
        made = []
        # The snapshots' and the save area's.
        for sub, names in ((os.path.join("snapshots", "c7"), (".x.partial-AbC123", "c7.tmp")),
                           (os.path.join("saves", "c7"), (".managed.tmp.partial-AbC123", "managed.tmp",
                                                          "work-0b5e", ".work-0b5e.partial-x1Y2z3"))):
            d = os.path.join(self.daemon.state, sub)
            os.makedirs(d, exist_ok=True)
            for name in names:
                path = os.path.join(d, name)
                os.makedirs(path)
                with open(os.path.join(path, "memory-ranges"), "wb") as f:
                    f.write(b"\0" * 4096)
                made.append(path)
        self.daemon.start()
        # Answered once start-up (reattach, recovery) is over.
        self.assertEqual(self.state("c7"), "running (booted)")
        self.assertEqual([p for p in made if os.path.exists(p)], [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
