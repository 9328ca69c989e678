"""50 define/start/destroy/undefine cycles leak no file descriptor, thread
or process in the daemon."""

import os
import unittest

from vsnapd import DaemonTest, domain_xml, needs_guest, wait_for

CYCLES = 50


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def thread_count(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def shims_of(run_dir):
    """Processes whose command line names this daemon's run directory."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if run_dir.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            pass
    return found


@needs_guest
class CyclesTest(DaemonTest):
    def test_no_leaks(self):
        pid = self.daemon.proc.pid
        run_dir = os.path.join(self.daemon.state, "run")
        conn = self.daemon.connect()
        # One warm-up cycle so lazily created threads and fds exist already.
        dom = conn.defineXML(domain_xml("c"))
        dom.create()
        dom.destroy()
        dom.undefine()
        # The watcher thread of the warm-up run may still be closing its fds.
        wait_for(lambda: thread_count(pid) <= 1 + 32 + 2 + 3, timeout=5, what="settled threads")
        fds, threads = fd_count(pid), thread_count(pid)
        for i in range(CYCLES):
            dom = conn.defineXML(domain_xml("c"))
            dom.create()
            dom.destroy()
            dom.undefine()
        self.assertEqual(conn.listAllDomains(), [])
        wait_for(lambda: fd_count(pid) <= fds, timeout=10,
                 what=f"fd count back to {fds} (now {fd_count(pid)})")
        wait_for(lambda: thread_count(pid) <= threads, timeout=10,
                 what=f"thread count back to {threads} (now {thread_count(pid)})")
        self.assertEqual(shims_of(run_dir), [])
        self.assertEqual(os.listdir(run_dir), [])
        conn.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
