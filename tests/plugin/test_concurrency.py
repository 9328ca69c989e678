"""Several clients at once: operations on different domains run in
parallel on worker threads, listings stay consistent, keepalive is answered
at once while calls are in progress."""

import struct
import threading
import time
import unittest

import libvirt

from vsnapd import (KEEPALIVE_PROGRAM, MESSAGE, DaemonTest, RawClient, domain_xml, needs_guest)

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
