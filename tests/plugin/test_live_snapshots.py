"""Live snapshots through virsh (snapshot-create-as --live, issue 25): the
test guest rewrites 32 MiB as fast as it can (vsnap.gen_mib) beside 768 MiB
of filled RAM; the snapshot is one instant (GENCHECK ok after a revert, by
copy and on demand), domjobinfo shows its passes while it runs, domjobabort
ends it with the VM running and no snapshot, and a kill -9 of the daemon or
of the shim during one leaves the VM running or cleanly stopped, never
paused, and every earlier snapshot reverts."""

import os
import signal
import threading
import time
import unittest

import libvirt

from test_events import EventLoop
from test_kill import CrashTestBase
from test_snapshots import REGION_A
from vsnapd import VirshEvents, domain_xml, wait_for

LIVE_CMDLINE = "vsnap.fill_mib=768 vsnap.seed=3 vsnap.gen_mib=32"
MEMORY_MIB = 1024


class Background:
    """A virsh command on a thread of its own."""

    def __init__(self, virsh, *args):
        self.res = None
        self.thread = threading.Thread(target=lambda: setattr(self, "res", virsh(*args, check=False,
                                                                                 timeout=180)))
        self.thread.start()

    def join(self, timeout=180):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "virsh did not return"
        return self.res


def jobinfo(virsh, name):
    """virsh domjobinfo as {field: value}."""
    res = virsh("domjobinfo", name, check=False)
    out = {}
    for line in res.stdout.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def mib(value):
    number, unit = value.split()
    return float(number) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "B": 1 / (1 << 20)}[unit]


class LiveSnapshotTest(CrashTestBase):
    def start_live_guest(self, name, restore_mode=None):
        self.uuids = getattr(self, "uuids", {})
        self.uuids[name] = self.uuids.get(name) or "6c0e2a1b-5d4f-4a3e-9b8c-%012x" % len(self.uuids)
        path = os.path.join(self.daemon.dir, name + ".xml")
        with open(path, "w") as f:
            f.write(domain_xml(name, uuid=self.uuids[name], cmdline=LIVE_CMDLINE, memory_mib=MEMORY_MIB,
                               restore_mode=restore_mode))
        self.v("define", path)
        if not self.state(name).startswith("running"):
            self.v("start", name)
        self.gencheck(name, "booted")

    def gencheck(self, name, what):
        g = self.guest(name)
        try:
            words = g.cmd("GENCHECK").split()
        finally:
            g.close()
        self.assertEqual((len(words), words[0], words[-1]), (4, "GEN", "ok"),
                         f"{name} {what}: the gen_mib region is not one instant: {words}")
        return int(words[1])

    def wait_copying(self, name, timeout=60):
        """domjobinfo once the live snapshot copies: its fields."""
        seen = {}

        def copying():
            seen.update(jobinfo(self.v, name))
            return seen.get("Job type") == "Bounded" and mib(seen.get("Memory processed", "0 B")) > 0
        wait_for(copying, timeout=timeout, interval=0.01, what=f"the live snapshot of {name} to copy")
        return dict(seen)

    def assert_never_paused(self, name):
        self.assertFalse(self.state(name).startswith("paused"), self.state(name))

    def test_live_snapshot_reverts_to_one_instant(self):
        self.start_live_guest("l1")
        g = self.guest("l1")
        g.fill(REGION_A, 31)
        at_s1 = g.sum(REGION_A)
        g.close()
        create = Background(self.v, "snapshot-create-as", "l1", "s1", "--live")
        job = self.wait_copying("l1")
        print(f"domjobinfo during a live snapshot: {job}")
        self.assertEqual(mib(job["Memory total"]), MEMORY_MIB, job)
        self.assertIn("Memory remaining", job)
        self.assertIn("Iteration", job)
        self.assertEqual(self.state("l1"), "running (booted)")  # the VM runs while its RAM is copied
        res = create.join()
        self.assertEqual(res.returncode, 0, res.stderr + self.daemon.log())
        self.assertEqual(self.v("snapshot-list", "l1", "--name").stdout.split(), ["s1"])
        self.assertIn("<state>running</state>", self.v("snapshot-dumpxml", "l1", "s1").stdout)
        self.assertEqual(self.state("l1"), "running (booted)")
        self.gencheck("l1", "after its live snapshot")
        g = self.guest("l1")
        g.fill(REGION_A, 32)
        g.close()
        self.v("snapshot-revert", "l1", "s1")
        gen = self.gencheck("l1", "reverted to the live snapshot (copy)")
        self.assertGreater(gen, 1, "the writer had not finished a pass before the snapshot")
        self.assertEqual(self.sums("l1")[0], at_s1)
        # A second live one is a diff on it; then both again on demand.
        create = Background(self.v, "snapshot-create-as", "l1", "s2", "--live")
        self.assertEqual(create.join().returncode, 0, create.res.stderr)
        self.assertEqual(self.snapshot_dirs("l1")["s2"][1]["kind"], "diff")
        self.start_live_guest("l1", restore_mode="ondemand")  # taken at the next revert
        for snap in ("s1", "s2"):
            self.v("snapshot-revert", "l1", snap)
            self.gencheck("l1", f"reverted to {snap} on demand")
        self.assertEqual(self.sums("l1")[0], at_s1)

    def test_domjobabort_leaves_the_vm_running_and_no_snapshot(self):
        self.start_live_guest("l2")
        self.v("snapshot-create-as", "l2", "base", "--live")
        at_base = self.sums("l2")
        g = self.guest("l2")
        g.fill(REGION_A, 41)
        g.close()
        create = Background(self.v, "snapshot-create-as", "l2", "aborted", "--live")
        job = self.wait_copying("l2")
        t0 = time.monotonic()
        self.v("domjobabort", "l2")
        abort_ms = (time.monotonic() - t0) * 1e3
        res = create.join()
        print(f"domjobabort at {job.get('Memory processed')} of {job.get('Memory total')}: "
              f"returned in {abort_ms:.0f} ms; snapshot-create-as: {res.stderr.strip()}")
        self.assertNotEqual(res.returncode, 0, "the aborted snapshot was taken")
        self.assertIn("abort", res.stderr)
        self.assertEqual(self.state("l2"), "running (booted)")
        self.assertEqual(self.v("snapshot-list", "l2", "--name").stdout.split(), ["base"])
        self.assertEqual(self.leftovers("l2"), [])
        self.assertEqual(jobinfo(self.v, "l2").get("Job type"), "None")
        self.gencheck("l2", "after domjobabort")
        res = self.v("domjobabort", "l2", check=False)
        self.assertNotEqual(res.returncode, 0, "domjobabort without a job")
        # The next live snapshot holds what was written before the abort.
        self.v("snapshot-create-as", "l2", "after", "--live")
        self.check_revert("l2", "base", at_base)
        self.v("snapshot-revert", "l2", "after")
        self.gencheck("l2", "reverted to the snapshot after the abort")
        self.assertNotEqual(self.sums("l2"), at_base)

    def test_daemon_killed_during_a_live_snapshot(self):
        self.start_live_guest("l3")
        self.v("snapshot-create-as", "l3", "base", "--live")
        at_base = self.sums("l3")
        pid = self.daemon.shim_pids()["l3"]
        create = Background(self.v, "snapshot-create-as", "l3", "cut", "--live")
        self.wait_copying("l3")
        self.daemon.proc.send_signal(signal.SIGKILL)
        create.join()
        self.restart()
        # The shim's client went: it cancelled the snapshot, the VM ran on.
        self.assertEqual(self.state("l3"), "running (booted)")
        self.assertEqual(self.daemon.shim_pids()["l3"], pid)
        self.assertEqual(self.v("snapshot-list", "l3", "--name").stdout.split(), ["base"])
        wait_for(lambda: self.leftovers("l3") == [], timeout=20, what="nothing left of the cut snapshot")
        self.assertEqual(self.job("l3"), 0)
        self.gencheck("l3", "after the daemon's kill")
        self.check_revert("l3", "base", at_base)
        self.v("snapshot-create-as", "l3", "after", "--live")

    def test_shim_killed_during_a_live_snapshot(self):
        self.start_live_guest("l4")
        self.v("snapshot-create-as", "l4", "base", "--live")
        at_base = self.sums("l4")
        pid = self.daemon.shim_pids()["l4"]
        create = Background(self.v, "snapshot-create-as", "l4", "cut", "--live")
        self.wait_copying("l4")
        os.kill(pid, signal.SIGKILL)
        res = create.join()
        self.assertNotEqual(res.returncode, 0)
        wait_for(lambda: self.state("l4").startswith("shut off"), timeout=20, what="l4 to be stopped")
        print(f"shim killed during a live snapshot: {self.state('l4')}; {res.stderr.strip()}")
        self.assertEqual(self.v("snapshot-list", "l4", "--name").stdout.split(), ["base"])
        self.assertEqual(self.leftovers("l4"), [])
        self.check_revert("l4", "base", at_base)
        self.gencheck("l4", "reverted after the shim's kill")

    def test_job_completed_event_as_qemu_sends_it(self):
        """A live snapshot's end is the job-completed event with its typed
        parameters (python3-libvirt's event loop and `virsh event --all`), as
        libvirt's QEMU driver sends for its live external snapshot; domjobinfo
        --completed shows the same once (unless --keep-completed). An aborted
        one sends none."""
        EventLoop.ensure()
        self.start_live_guest("l5")
        conn = self.daemon.connect()
        got = []
        cb = conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_JOB_COMPLETED,
                                         lambda c, d, params, o: got.append((d.name(), params)), None)
        watcher = VirshEvents(self.daemon, "--all")
        try:
            watcher.wait_registered(lambda attempt: self.probe_lifecycle(attempt))
            self.v("snapshot-create-as", "l5", "s1", "--live")
            wait_for(lambda: got, what="the job-completed event")
            name, params = got[0]
            print(f"job-completed of a live snapshot: {params}")
            self.assertEqual(name, "l5")
            self.assertEqual(params["operation"], libvirt.VIR_DOMAIN_JOB_OPERATION_SNAPSHOT)
            self.assertEqual(params["memory_total"], MEMORY_MIB << 20)
            self.assertGreaterEqual(params["memory_processed"], 768 << 20)  # the fill, at least once
            self.assertEqual(params["memory_remaining"], 0)
            self.assertGreaterEqual(params["memory_iteration"], 1)
            self.assertEqual(params["memory_page_size"], 4096)
            self.assertLess(params["downtime"], params["time_elapsed"])
            self.assertIn("downtime", params)
            watcher.wait_for_line("event 'job-completed' for domain 'l5'")
            done = self.dom("l5").jobStats(libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED |
                                           libvirt.VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED)
            self.assertEqual(done["type"], libvirt.VIR_DOMAIN_JOB_COMPLETED, done)
            self.assertEqual(done["downtime"], params["downtime"])
            self.assertIn("Total downtime", self.v("domjobinfo", "l5", "--completed").stdout)
            self.assertEqual(jobinfo(lambda *a, **k: self.v(*a, "--completed", **k), "l5").get("Job type"),
                             "None", "domjobinfo --completed shows a completed job once")
            # An aborted one sends no event.
            create = Background(self.v, "snapshot-create-as", "l5", "aborted", "--live")
            self.wait_copying("l5")
            self.v("domjobabort", "l5")
            self.assertNotEqual(create.join().returncode, 0)
            self.v("snapshot-create-as", "l5", "s2", "--live")
            wait_for(lambda: len(got) == 2, what="the second job-completed event")
            time.sleep(0.2)
            self.assertEqual(len(got), 2, got)
        finally:
            conn.domainEventDeregisterAny(cb)
            conn.close()
            out = watcher.stop()
        self.assertEqual(out.count("event 'job-completed' for domain 'l5'"), 2, out)
        self.assertIn("memory_iteration:", out)

    def probe_lifecycle(self, attempt):
        """An event for VirshEvents.wait_registered: a probe domain defined."""
        path = os.path.join(self.daemon.dir, f"probe{attempt}.xml")
        with open(path, "w") as f:
            f.write(domain_xml(f"probe{attempt}", uuid="7c0e2a1b-5d4f-4a3e-9b8c-%012x" % attempt))
        self.v("define", path)
        return f"for domain 'probe{attempt}': Defined Added"

    def dom(self, name):
        conn = self.daemon.connect()
        self.addCleanup(conn.close)
        return conn.lookupByName(name)


if __name__ == "__main__":
    unittest.main()
