"""Several clients at once: operations on different domains run in
parallel on worker threads, listings stay consistent, keepalive is answered
at once while calls are in progress; a revert racing the destroy of a
transient domain leaves no shim and none of the domain's files."""

import os
import signal
import struct
import threading
import time
import unittest

import libvirt

from disktest import MIB, disk_domain_xml, make_image
from vsnapd import (KEEPALIVE_PROGRAM, MESSAGE, SHIM, DaemonTest, RawClient, domain_xml,
                    needs_guest)

THREADS = 6
ROUNDS = 4


@needs_guest
class ConcurrencyTest(DaemonTest):
    def test_parallel_domains(self):
        errors = []
        stop = threading.Event()

        def worker(i):
            try:
                conn = self.daemon.connect()
                for r in range(ROUNDS):
                    dom = conn.defineXML(domain_xml(f"w{i}"))
                    dom.create()
                    self.assertEqual(dom.state()[0], libvirt.VIR_DOMAIN_RUNNING)
                    dom.suspend()
                    dom.resume()
                    dom.destroy()
                    dom.undefine()
                conn.close()
            except Exception as e:   # reported by the main thread
                errors.append(f"worker {i}: {e!r}")

        def lister():
            try:
                conn = self.daemon.connect(readonly=True)
                while not stop.is_set():
                    for dom in conn.listAllDomains():
                        try:
                            dom.info()
                        except libvirt.libvirtError as e:
                            if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                                raise
                conn.close()
            except Exception as e:
                errors.append(f"lister: {e!r}")

        pinger = RawClient(self.daemon.sock)
        pinger.open()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
        watcher = threading.Thread(target=lister)
        watcher.start()
        for t in threads:
            t.start()
        worst = 0.0
        while any(t.is_alive() for t in threads):
            start = time.monotonic()
            pinger.send_packet(KEEPALIVE_PROGRAM, 1, 1, MESSAGE, 0, 0)
            hdr, _ = pinger.recv_packet()
            self.assertEqual(hdr[2], 2)
            worst = max(worst, time.monotonic() - start)
            time.sleep(0.05)
        for t in threads:
            t.join()
        stop.set()
        watcher.join()
        pinger.close()
        self.assertEqual(errors, [])
        self.assertLess(worst, 0.5, "keepalive waited behind domain operations")
        self.assertEqual(self.daemon.virsh("list", "--all", "--name").stdout.split(), [])
        self.assertEqual(self.daemon.shim_pids(), {})

    def shims_of_daemon(self):
        """pid of every shim process whose command line names this daemon's
        directory, whether or not a pid file still names it."""
        found = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv and argv[0] == SHIM.encode() and any(self.daemon.dir.encode() in a for a in argv):
                found.append(int(entry))
        return found

    def kill_shims(self, pids):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def test_revert_racing_destroy_of_transient_domains(self):
        """Each round creates transient domains with a disk and a snapshot,
        then reverts and destroys each from two threads at once. Whichever
        wins, the domain ends: no shim runs for it, and its snapshots/ and
        disks/ directories are gone (its disk folded into the image)."""
        domains, rounds = 3, 4
        conn = self.daemon.connect()
        images = [make_image(os.path.join(self.daemon.dir, f"r{i}.img"), 4 * MIB)
                  for i in range(domains)]
        unexpected = []
        outcomes = {"reverted": 0, "gone": 0}

        def revert(dom, snap, barrier):
            barrier.wait()
            try:
                dom.revertToSnapshot(snap)
                outcomes["reverted"] += 1
            except libvirt.libvirtError as e:
                if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                    unexpected.append(f"revert of {dom.name()}: {e}")
                outcomes["gone"] += 1

        def destroy(dom, barrier):
            barrier.wait()
            try:
                dom.destroy()
            except libvirt.libvirtError as e:
                unexpected.append(f"destroy of {dom.name()}: {e}")

        try:
            for r in range(rounds):
                doms = [conn.createXML(disk_domain_xml(f"r{i}", [(images[i], "vda")]), 0)
                        for i in range(domains)]
                snaps = [d.snapshotCreateXML("<domainsnapshot><name>s1</name></domainsnapshot>", 0)
                         for d in doms]
                barrier = threading.Barrier(2 * domains)
                threads = [threading.Thread(target=revert, args=(d, s, barrier))
                           for d, s in zip(doms, snaps)]
                threads += [threading.Thread(target=destroy, args=(d, barrier)) for d in doms]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(timeout=120)
                # A revert that won the race left a running domain: destroyed now.
                for d in conn.listAllDomains():
                    d.destroy()
                self.assertEqual(unexpected, [], self.daemon.log())
                self.assertEqual(conn.listAllDomains(), [])
                leaked = self.shims_of_daemon()
                self.kill_shims(leaked)
                self.assertEqual(leaked, [], f"round {r}: shims of gone domains ({outcomes})")
                for sub in ("snapshots", "disks"):
                    root = os.path.join(self.daemon.state, sub)
                    left = os.listdir(root) if os.path.isdir(root) else []
                    self.assertEqual(left, [], f"round {r}: {sub}/ of gone domains")
        finally:
            self.kill_shims(self.shims_of_daemon())
            conn.close()

    def test_define_validate_flag(self):
        path = self.define("val")
        self.daemon.virsh("define", "--validate", path)
        bad = path + ".bad"
        with open(path) as f, open(bad, "w") as g:
            g.write(f.read().replace("<vcpu>", "<vcpu bogus='1'>"))
        res = self.daemon.virsh("define", "--validate", bad, check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("error", res.stderr.lower())


if __name__ == "__main__":
    unittest.main(verbosity=2)
