"""The daemon restarts (or dies) while domains run: no VM is lost, the new
daemon reattaches, and what happened meanwhile is reconciled."""

import os
import signal
import subprocess
import sys
import unittest

import libvirt

from vsnapd import DaemonTest, domain_xml, needs_guest, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import curl_api  # noqa: E402


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


@needs_guest
class RestartTest(DaemonTest):
    def shim_api(self, name, method, endpoint, timeout=30):
        """The domain's shim asked directly (the daemon may be down)."""
        sock = os.path.join(self.daemon.state, "run", name, "api.sock")
        return curl_api(sock, method, endpoint, timeout=timeout)

    def test_domains_survive_restart(self):
        v = self.daemon.virsh
        self.define("r1")
        self.define("r2")
        v("start", "r1")
        v("start", "r2")
        v("suspend", "r2")
        ids = {n: v("domid", n).stdout.strip() for n in ("r1", "r2")}
        wait_for(lambda: "vsnap.ready=yes" in v("domstats", "r1").stdout, what="readiness")
        pids = self.daemon.shim_pids()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            self.daemon.stop(sig)
            self.assertTrue(all(alive(p) for p in pids.values()))
            self.daemon.start()
            self.assertEqual(self.daemon.shim_pids(), pids)
            self.assertEqual({n: v("domid", n).stdout.strip() for n in ("r1", "r2")}, ids)
            self.assertEqual(self.state("r1"), "running (booted)")
            self.assertEqual(self.state("r2"), "paused (user)")
            self.assertIn("vsnap.ready=yes", v("domstats", "r1").stdout)
        # The new daemon drives them and watches them.
        v("resume", "r2")
        v("shutdown", "r2")
        wait_for(lambda: self.state("r2") == "shut off (shutdown)", what="poweroff after restart")
        os.kill(pids["r1"], signal.SIGKILL)
        wait_for(lambda: self.state("r1") == "shut off (crashed)", what="crash after restart")
        # A new domain gets a fresh id.
        v("start", "r2")
        self.assertGreater(int(v("domid", "r2").stdout), max(int(i) for i in ids.values()))
        v("destroy", "r2")

    def test_shim_dies_while_daemon_is_down(self):
        self.define("gone")
        self.daemon.virsh("start", "gone")
        pid = self.daemon.shim_pids()["gone"]
        self.daemon.stop()
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not alive(pid), what="shim exit")
        self.daemon.start()
        self.assertEqual(self.state("gone"), "shut off (crashed)")
        self.assertEqual(self.daemon.shim_pids(), {})

    def test_readiness_while_daemon_is_down(self):
        # The guest announces readiness 1.5 s after boot, while no daemon reads
        # the event FIFO: the shim must survive writing to it, and the next
        # daemon learns readiness from vm.info.
        self.define("late", cmdline="vsnap.fill_mib=1 vsnap.delay_ms=1500")
        self.daemon.virsh("start", "late")
        pid = self.daemon.shim_pids()["late"]
        self.daemon.stop()
        # Until the guest is ready, not a guessed time: boot may be slow under load.
        status, reply = self.shim_api("late", "GET", "vm.wait-ready?timeout_ms=20000", timeout=25)
        self.assertEqual(status, 200, reply)
        self.assertTrue(alive(pid))
        self.daemon.start()
        self.assertEqual(self.state("late"), "running (booted)")
        self.assertIn("vsnap.ready=yes", self.daemon.virsh("domstats", "late").stdout)
        self.daemon.virsh("destroy", "late")

    def test_stale_pid_file_is_not_trusted(self):
        # A run directory left behind whose pid now belongs to someone else:
        # the daemon must neither adopt nor kill that process.
        self.define("stale")
        self.daemon.virsh("start", "stale")
        run = os.path.join(self.daemon.state, "run", "stale")
        pid = self.daemon.shim_pids()["stale"]
        self.daemon.stop()
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not alive(pid), what="shim exit")
        bystander = subprocess.Popen(["sleep", "60"])
        try:
            with open(os.path.join(run, "pid"), "w") as f:
                f.write(f"{bystander.pid}\n")
            self.daemon.start()
            self.assertEqual(self.state("stale"), "shut off (crashed)")
            self.assertIsNone(bystander.poll())
            self.assertFalse(os.path.exists(run))
        finally:
            bystander.kill()
            bystander.wait()

    def test_guest_poweroff_while_daemon_is_down(self):
        self.define("off", cmdline="vsnap.fill_mib=1 vsnap.delay_ms=1000 vsnap.halt_after_ready=1")
        self.daemon.virsh("start", "off")
        pid = self.daemon.shim_pids()["off"]
        self.daemon.stop()
        wait_for(lambda: self.shim_api("off", "GET", "vm.info")[1]["state"] == "Shutdown",
                 what="the guest's poweroff while the daemon is down")
        self.daemon.start()
        self.assertEqual(self.state("off"), "shut off (shutdown)")
        wait_for(lambda: not alive(pid), what="the shim to be stopped")
        self.assertEqual(self.daemon.shim_pids(), {})

    def test_transient_domain_survives_restart(self):
        conn = self.daemon.connect()
        conn.createXML(domain_xml("tr"))
        conn.close()
        self.daemon.stop()
        self.daemon.start()
        conn = self.daemon.connect()
        dom = conn.lookupByName("tr")
        self.assertTrue(dom.isActive())
        self.assertFalse(dom.isPersistent())
        dom.destroy()
        self.assertEqual(conn.listAllDomains(), [])
        conn.close()

    def test_autostart(self):
        self.define("auto")
        self.define("manual")
        self.daemon.virsh("autostart", "auto")
        self.daemon.stop()
        self.daemon.start()
        wait_for(lambda: self.state("auto") == "running (booted)", what="autostart")
        self.assertTrue(self.state("manual").startswith("shut off"))
        self.daemon.virsh("destroy", "auto")


if __name__ == "__main__":
    unittest.main(verbosity=2)
