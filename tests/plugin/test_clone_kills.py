"""kill -9 in the middle of a clone's start (<vsnap:from>): of the daemon at
the start's steps (VSNAPD_TEST_HOOK) and of the clone's shim while the
daemon is held at one. Afterwards there is no half-made domain, no orphan
shim (so no lock on an image left held, no tap left open) and no file of the
run; the origin runs on untouched, and the same clone then starts."""

import os
import signal
import subprocess
import unittest

from test_clones import CloneBase
from vsnapd import wait_for


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stopped(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


class CloneKillTest(CloneBase):
    def restart(self, hook=None):
        if self.daemon.proc and self.daemon.proc.poll() is None:
            self.daemon.proc.kill()
        if self.daemon.proc:
            self.daemon.proc.wait(timeout=20)
        self.daemon.proc = None
        self.daemon.start(env={"VSNAPD_TEST_HOOK": hook} if hook else None)

    def shims_of(self, name):
        """Every process whose command line names the domain's API socket."""
        api = os.path.join(self.daemon.state, "run", name, "api.sock").encode()
        found = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if b"path=" + api in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                pass
        return [pid for pid in found if alive(pid)]

    def assert_nothing_left(self, name):
        self.assertNotIn(name, self.v("list", "--all", "--name").stdout.split())
        self.assertEqual(self.shims_of(name), [])
        for where in ("run", "disks", "snapshots"):
            self.assertFalse(os.path.exists(os.path.join(self.daemon.state, where, name)),
                             f"{where}/{name} is left: {os.listdir(os.path.join(self.daemon.state, where))}")

    def assert_clone_starts(self, name, path):
        self.v("create", path)
        g = self.guest(name)
        try:
            self.check_origin_data(g, name)
        finally:
            g.close()
        self.v("destroy", name)
        g = self.guest("origin")
        try:
            self.check_origin_data(g, "origin")
        finally:
            g.close()

    def test_daemon_killed_during_a_clone_start(self):
        path = self.clone_file("k")
        origin_shim = self.daemon.shim_pids()["origin"]
        for step in ("start-spawned", "start-launched", "start-set-up"):
            self.restart(hook=f"{step}:kill")
            res = self.v("create", path, check=False)
            self.assertNotEqual(res.returncode, 0)
            self.daemon.proc.wait(timeout=20)
            orphans = self.shims_of("k")
            self.assertTrue(orphans, "the clone's shim outlives the daemon")
            self.restart()
            for pid in orphans:
                wait_for(lambda: not alive(pid), timeout=10, what=f"the orphan shim {pid} (after {step}) to go")
            wait_for(lambda: not os.path.exists(os.path.join(self.daemon.state, "run", "k")), timeout=10,
                     what="k's run directory to go")
            self.assert_nothing_left("k")
            self.assertEqual(self.daemon.shim_pids()["origin"], origin_shim, "the origin runs on in its shim")
            print(f"killed at {step}: orphan shim {orphans} stopped, no domain k")
        self.assert_clone_starts("k", path)

    def test_clone_shim_killed_during_its_start(self):
        path = self.clone_file("s")
        self.restart(hook="start-launched:stop")
        creating = subprocess.Popen(["virsh", "-q", "-c", self.daemon.uri, "create", path],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: stopped(self.daemon.proc.pid), timeout=20, what="the daemon held at start-launched")
        shims = self.shims_of("s")
        self.assertEqual(len(shims), 1, shims)
        os.kill(shims[0], signal.SIGKILL)
        wait_for(lambda: not alive(shims[0]), timeout=10, what="the clone's shim to die")
        os.kill(self.daemon.proc.pid, signal.SIGCONT)
        out, err = creating.communicate(timeout=60)
        # A shim lost during its restore is a crash of the new domain (the
        # start answers, the watcher ends the run): a transient one is gone.
        print(f"create after its shim was killed: rc {creating.returncode} {err.strip()}")
        wait_for(lambda: "s" not in self.v("list", "--all", "--name").stdout.split(), timeout=20,
                 what="the clone whose shim died to go")
        wait_for(lambda: not os.path.exists(os.path.join(self.daemon.state, "run", "s")), timeout=10,
                 what="its run directory to go")
        self.assert_nothing_left("s")
        self.restart()
        self.assert_nothing_left("s")
        self.assert_clone_starts("s", path)


if __name__ == "__main__":
    unittest.main()
