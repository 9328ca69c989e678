"""Load: 10 libvirt clients at once, each driving its own domain through
lifecycle and snapshot calls (start, snapshot-create, suspend/resume,
revert, snapshot-delete, destroy) plus listings, for VSNAP_LOAD_SECONDS
(20 in the test suite; README's long load run: 120). Every call must be
answered, and the daemon's open fds, threads and RSS must stay flat: the
figures after the first round are compared with those at the end."""

import os
import threading
import time
import unittest

import libvirt

from vsnapd import DaemonTest, domain_xml, needs_guest

CLIENTS = 10
SECONDS = float(os.environ.get("VSNAP_LOAD_SECONDS", "20"))


def daemon_figures(pid):
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    return {"fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": int(status["Threads"]),
            "rss_mib": int(status["VmRSS"].split()[0]) / 1024}


def settled_figures(pid, before, wait_s=20):
    """daemon_figures once the daemon's idle workers have gone: its RPC
    thread pools start workers as calls come and glib ends an idle one
    after 15 s (beyond 2 kept unused), so right after a burst of calls the
    count can stand a few above before; a leaked thread stays. Looks again
    until the threads are back within before + 2 or wait_s passed."""
    end = time.monotonic() + wait_s
    now = daemon_figures(pid)
    while now["threads"] > before["threads"] + 2 and time.monotonic() < end:
        time.sleep(0.5)
        now = daemon_figures(pid)
    return now


@needs_guest
class LoadTest(DaemonTest):
    def round(self, dom, i, r):
        dom.create()
        name = f"r{r}"
        dom.snapshotCreateXML(f"<domainsnapshot><name>{name}</name></domainsnapshot>")
        dom.suspend()
        dom.resume()
        snap = dom.snapshotLookupByName(name)
        dom.revertToSnapshot(snap)
        assert dom.state()[0] == libvirt.VIR_DOMAIN_RUNNING, dom.state()
        dom.info()
        dom.XMLDesc()
        snap.delete()
        dom.destroy()

    def test_ten_clients(self):
        errors, calls, rounds = [], [0] * CLIENTS, [0] * CLIENTS
        deadline = [None]
        figures = {}

        def measure_and_go():
            figures["before"] = daemon_figures(self.daemon.proc.pid)
            deadline[0] = time.monotonic() + SECONDS

        first_round = threading.Barrier(CLIENTS + 1, action=measure_and_go, timeout=300)

        def client(i):
            try:
                conn = self.daemon.connect()
                dom = conn.defineXML(domain_xml(f"load{i}", memory_mib=64))
                r = 0
                self.round(dom, i, r)
                rounds[i] += 1
                first_round.wait()
                while time.monotonic() < deadline[0]:
                    r += 1
                    self.round(dom, i, r)
                    conn.listAllDomains()
                    rounds[i] += 1
                    calls[i] += 11
                dom.undefine()
                conn.close()
            except Exception as e:
                errors.append(f"client {i}: {e!r}")
                first_round.abort()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        try:
            first_round.wait()
        except threading.BrokenBarrierError:
            pass
        for t in threads:
            t.join(timeout=SECONDS + 300)
        self.assertFalse([t for t in threads if t.is_alive()], "a call was never answered")
        self.assertEqual(errors, [])
        before = figures["before"]
        after = settled_figures(self.daemon.proc.pid, before)
        print(f"{CLIENTS} clients x {SECONDS:.0f} s: {sum(rounds)} rounds, {sum(calls)} calls; "
              f"daemon before {before}, after {after}")
        self.assertLessEqual(after["fds"], before["fds"] + 2, "fds grew")
        self.assertLessEqual(after["threads"], before["threads"] + 2, "threads grew")
        self.assertLess(after["rss_mib"], before["rss_mib"] * 1.25 + 8, "RSS grew")
        self.assertGreater(min(rounds), 1, "a client never got past its first round")


if __name__ == "__main__":
    unittest.main(verbosity=2)
