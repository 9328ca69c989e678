"""Define / undefine / lookup under load: after undefine() returns, no lookup
finds the domain, and after define() returns, every lookup does, while other
clients define, undefine, list and look up at the same time, right after the
daemon starts (when its autostart pass runs) and later. Also two clients
defining and undefining one domain at once: what they end with is what the
daemon lists, what it keeps on disk, and what a restarted daemon loads.

Bounded: ROUNDS rounds and a deadline well inside a CI test's time."""

import os
import subprocess
import sys
import threading
import time
import unittest
import uuid as uuidlib

import libvirt

from vsnapd import DaemonTest, domain_xml

ROUNDS = 500
BUSY_CLIENTS = 4
RESTARTS = 8          # daemon starts met at once by a define/autostart round
DEADLINE_S = 45       # all phases together
RACE_ROUNDS = 150


def no_domain(call):
    """True when call() fails with VIR_ERR_NO_DOMAIN."""
    try:
        call()
    except libvirt.libvirtError as e:
        return e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN
    return False


class Busy:
    """Clients that keep the daemon's workers busy: each defines and undefines
    its own domains, lists everything and looks up what it saw, until stop()."""

    def __init__(self, daemon, n=BUSY_CLIENTS):
        self.daemon = daemon
        self.halt = threading.Event()
        self.errors = []
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True)
                        for i in range(n)]
        for t in self.threads:
            t.start()

    def run(self, i):
        try:
            conn = self.daemon.connect()
            n = 0
            while not self.halt.is_set():
                dom = conn.defineXML(domain_xml(f"busy{i}-{n % 3}"))
                for other in conn.listAllDomains():
                    try:
                        other.XMLDesc(0)
                        other.info()
                    except libvirt.libvirtError as e:
                        if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                            raise
                no_domain(lambda: conn.lookupByName("nobody"))
                dom.undefine()
                n += 1
            conn.close()
        except Exception as e:   # reported by the test
            self.errors.append(f"busy client {i}: {e!r}")

    def stop(self):
        self.halt.set()
        for t in self.threads:
            t.join(30)
        return self.errors


class CpuLoad:
    """Processes that only burn CPU, so the daemon's threads wait for a core."""

    def __init__(self, n):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                      for _ in range(n)]

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


class DefineStressTest(DaemonTest):
    def setUp(self):
        super().setUp()
        self.deadline = time.monotonic() + DEADLINE_S

    def check_round(self, conn, name, autostart):
        dom = conn.defineXML(domain_xml(name))
        uuid = dom.UUIDString()
        self.assertEqual(conn.lookupByName(name).UUIDString(), uuid)
        if autostart:
            # Marked autostart after the daemon started: only a daemon start
            # starts it, never this one's autostart pass.
            dom.setAutostart(1)
            dom.setAutostart(0)
        dom.undefine()
        self.assertTrue(no_domain(lambda: conn.lookupByName(name)),
                        f"{name} found by name after undefine")
        self.assertTrue(no_domain(lambda: conn.lookupByUUIDString(uuid)),
                        f"{name} found by uuid after undefine")
        self.assertNotIn(name, conn.listDefinedDomains())

    def test_define_undefine_lookup_under_load(self):
        # Right after each daemon start, with the CPUs taken.
        load = CpuLoad(2)
        try:
            for r in range(RESTARTS):
                if r:
                    self.daemon.stop()
                    self.daemon.start()
                conn = self.daemon.connect()
                for i in range(5):
                    self.check_round(conn, f"early{r}-{i}", autostart=True)
                self.assertEqual(conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE), [])
                conn.close()
        finally:
            load.stop()
        # Then ROUNDS rounds while other clients keep the daemon busy.
        busy = Busy(self.daemon)
        try:
            conn = self.daemon.connect()
            done = 0
            while done < ROUNDS and time.monotonic() < self.deadline:
                self.check_round(conn, f"s{done % 7}", autostart=done % 10 == 0)
                done += 1
            conn.close()
        finally:
            errors = busy.stop()
        self.assertEqual(errors, [])
        self.assertEqual(done, ROUNDS, f"only {done} rounds within {DEADLINE_S} s")
        self.assertEqual(self.daemon.virsh("list", "--all", "--name").stdout.split(), [])
        self.assertEqual(os.listdir(os.path.join(self.daemon.state, "domains")), [])

    def test_concurrent_define_and_undefine_of_one_domain(self):
        # Two clients define and undefine the same domain (one uuid) at once;
        # every call either succeeds or fails cleanly. Afterwards the listing,
        # the definition on disk and a restarted daemon all agree.
        uuid = str(uuidlib.uuid4())
        xml = domain_xml("contested", uuid=uuid)
        errors = []

        def racer(k):
            try:
                conn = self.daemon.connect()
                for _ in range(RACE_ROUNDS):
                    if time.monotonic() > self.deadline:
                        break
                    try:
                        conn.defineXML(xml)
                    except libvirt.libvirtError as e:
                        errors.append(f"define by client {k}: {e.get_error_message()}")
                    try:
                        conn.lookupByUUIDString(uuid).undefine()
                    except libvirt.libvirtError as e:
                        if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                            errors.append(f"undefine by client {k}: {e.get_error_message()}")
                conn.close()
            except Exception as e:
                errors.append(f"client {k}: {e!r}")

        busy = Busy(self.daemon, 2)
        threads = [threading.Thread(target=racer, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        errors += busy.stop()
        self.assertEqual(errors, [])
        self.assert_consistent(uuid)
        # Defined once more by one client: listed, on disk, and loaded again.
        conn = self.daemon.connect()
        conn.defineXML(xml)
        conn.close()
        self.assert_consistent(uuid)
        self.daemon.stop()
        self.daemon.start()
        self.assert_consistent(uuid, listed=True)

    def assert_consistent(self, uuid, listed=None):
        conn = self.daemon.connect()
        try:
            found = not no_domain(lambda: conn.lookupByUUIDString(uuid))
            on_disk = os.path.exists(os.path.join(self.daemon.state, "domains", "contested.xml"))
            self.assertEqual(found, on_disk, f"listed: {found}, definition on disk: {on_disk}")
            if listed is not None:
                self.assertEqual(found, listed)
            names = conn.listDefinedDomains()
            self.assertEqual("contested" in names, found)
        finally:
            conn.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
