"""A call that needs a domain's job waits for it at most job_wait_timeout
seconds (2 here: the daemon's configuration file), then fails as libvirt's
QEMU driver does: "Timed out during operation: cannot acquire state change
lock (held by <operation>)". The holder is a snapshot-create whose shim is
stopped (SIGSTOP) before it answers the pause: the snapshot holds the job
until the shim runs again. Meanwhile calls that change nothing (list,
dominfo, domjobinfo, python3-libvirt's info()) answer at once, and once the
snapshot ends the same calls succeed."""

import os
import signal
import subprocess
import time
import unittest

import libvirt

from vsnapd import Daemon, DaemonTest, needs_guest, wait_for

WAIT_S = 2          # job_wait_timeout in the daemon's configuration
SLACK_S = 1.5       # virsh's own start and connect, on a loaded machine
LOCK_MSG = "Timed out during operation: cannot acquire state change lock (held by snapshot-create"


@needs_guest
class JobWaitTest(DaemonTest):
    def setUp(self):
        self.daemon = Daemon(self.daemon_parent)
        conf = os.path.join(self.daemon.dir, "virtvsnapd.conf")
        with open(conf, "w") as f:
            f.write(f"[daemon]\njob_wait_timeout={WAIT_S}\n")
        self.daemon.start(extra=["--config", conf])

    def timed(self, *args, **kw):
        t0 = time.monotonic()
        res = self.daemon.virsh(*args, check=False, timeout=30, **kw)
        return res, time.monotonic() - t0

    def assert_times_out(self, *args):
        res, took = self.timed(*args)
        self.assertNotEqual(res.returncode, 0, f"virsh {' '.join(args)} succeeded behind the job")
        self.assertIn(LOCK_MSG, res.stderr)
        self.assertGreaterEqual(took, WAIT_S - 0.2, f"virsh {args[0]} did not wait for the job")
        self.assertLess(took, WAIT_S + SLACK_S, f"virsh {args[0]} waited {took:.1f} s")
        return took

    def test_job_call_times_out_behind_a_held_job(self):
        self.define("j1")
        self.daemon.virsh("start", "j1")
        self.daemon.virsh("snapshot-create-as", "j1", "s0")
        pid = self.daemon.shim_pids()["j1"]
        os.kill(pid, signal.SIGSTOP)
        holder = None
        try:
            holder = subprocess.Popen(["virsh", "-q", "-c", self.daemon.uri, "snapshot-create-as",
                                       "j1", "s1"], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
            wait_for(lambda: "Snapshot" in self.daemon.virsh("domjobinfo", "j1").stdout,
                     timeout=10, what="the snapshot's job")
            took = [self.assert_times_out("suspend", "j1"),
                    self.assert_times_out("snapshot-delete", "j1", "s0")]
            # Calls that change nothing do not wait for the job.
            for args in (("list", "--all"), ("dominfo", "j1"), ("domjobinfo", "j1"),
                         ("snapshot-list", "j1")):
                res, t = self.timed(*args)
                self.assertEqual(res.returncode, 0, res.stderr)
                self.assertLess(t, SLACK_S, f"virsh {args[0]} took {t:.1f} s")
            conn = libvirt.open(self.daemon.uri)
            try:
                t0 = time.monotonic()
                conn.lookupByName("j1").info()
                self.assertLess(time.monotonic() - t0, SLACK_S)
                with self.assertRaises(libvirt.libvirtError) as cm:
                    conn.lookupByName("j1").resume()
                self.assertEqual(cm.exception.get_error_code(), libvirt.VIR_ERR_OPERATION_TIMEOUT)
                self.assertIn("cannot acquire state change lock (held by snapshot-create",
                              str(cm.exception))
            finally:
                conn.close()
            self.assertIsNone(holder.poll(), "the snapshot ended before the checks did")
        finally:
            os.kill(pid, signal.SIGCONT)
            if holder:
                _, err = holder.communicate(timeout=90)
        self.assertEqual(holder.returncode, 0, f"the holding snapshot: {err}")
        # The job is free again: the same calls succeed.
        self.daemon.virsh("suspend", "j1", timeout=30)
        self.assertEqual(self.state("j1"), "paused (user)")
        self.daemon.virsh("snapshot-delete", "j1", "s0", timeout=30)
        self.daemon.virsh("resume", "j1", timeout=30)
        self.daemon.virsh("destroy", "j1", timeout=30)
        print(f"suspend and snapshot-delete failed after {took[0]:.2f} s and {took[1]:.2f} s")

    def test_configuration_refuses_a_wait_of_zero(self):
        d = Daemon(self.daemon_parent)
        conf = os.path.join(d.dir, "virtvsnapd.conf")
        with open(conf, "w") as f:
            f.write("[daemon]\njob_wait_timeout=0\n")
        try:
            with self.assertRaises(AssertionError):
                d.start(extra=["--config", conf])
            self.assertIn("job_wait_timeout", d.log())
        finally:
            d.cleanup()


if __name__ == "__main__":
    unittest.main()
