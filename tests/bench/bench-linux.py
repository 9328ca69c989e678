#!/usr/bin/python3
"""The Linux guest (tests/linux, scripts/build-linux-guest.sh) beside the test
guest, in one run: cold boot to READY, and a restore of a booted snapshot to
READY again, on demand and by copy (the working set is what Linux touched).

    bench-linux.py <vsnap-shim> <vsnap-testguest> <source root> <build root> RESULTS

READY is the host's own instant (the shim's readiness event's ready_ns);
each restore is timed from the vm.restore request. Targets against this
run's own numbers: Linux's restore to READY on demand at most 1/20 of its
cold boot to READY (a restore is what makes booting once worth it), and at
most 1 s more than the test guest's (what Linux adds: its vsock driver
handling the transport reset and the agent reconnecting, through the
emulated kernel mode on kvm_pvm, and the pages Linux touches on the way). Smoke mode
(VSNAP_BENCH_SMOKE=1) restores once each and takes the boot time from the
booted snapshot the suite made (its boot record), booting only if there is
none.
"""

import os
import statistics
import sys
import tempfile
import shutil
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "linux"))
sys.path.insert(0, HERE)
from linuxguest import LinuxGuest, LinuxVM, Netns  # noqa: E402
from targets import at_most, smoke, summary_status  # noqa: E402
from vsnaptest import append_jsonl, check  # noqa: E402

SHIM, TESTGUEST, SOURCE_ROOT, BUILD_ROOT, RESULTS = sys.argv[1:6]
RUNS = 1 if smoke() else 5
MIB = 1 << 20


def ready_after(vm, generation, started_ns, timeout):
    props = vm.wait_generation(generation, timeout)
    return (props["ready_ns"] - started_ns) / 1e6


def linux_boot_ms(guest, wd):
    """A cold boot of the Linux guest to READY (ms): its own shim and disk."""
    disk = os.path.join(wd, "boot.img")
    with open(disk, "wb") as f:
        f.truncate(16 * MIB)
    with Netns("bb") as netns, LinuxVM(SHIM, wd, "lboot", netns) as vm:
        started = time.time_ns()
        vm.ok("PUT", "vm.create", guest.config(vm, disk, os.path.join(wd, "boot-work")))
        vm.ok("PUT", "vm.boot")
        return ready_after(vm, 0, started, 300)


def linux_restores(guest, base, wd, mode):
    times = []
    with Netns("br") as netns:
        for i in range(RUNS):
            started = time.time_ns()
            with guest.restore(os.path.join(base, "snap"), wd, f"l{mode}{i}", netns, f"lb{i}", mode) as vm:
                times.append(ready_after(vm, 1, started, 60))
    return times


def testguest_figures(wd):
    """The test guest's cold boot to READY and restores to READY (ms)."""
    figures = {"ondemand": [], "copy": []}
    boot = LinuxVM(SHIM, wd, "tboot")
    with boot:
        started = time.time_ns()
        boot.boot(TESTGUEST, "console=ttyS0", memory_mib=256)
        figures["boot"] = ready_after(boot, 0, started, 60)
        boot.pause_snapshot(os.path.join(wd, "tsnap"), resume=False)
    for mode in ("ondemand", "copy"):
        for i in range(RUNS):
            vm = LinuxVM(SHIM, wd, f"t{mode}{i}")
            with vm:
                started = time.time_ns()
                vm.ok("PUT", "vm.restore", {"source_url": "file://" + os.path.join(wd, "tsnap"), "resume": True,
                                            "memory_restore_mode": mode,
                                            "config_overrides": {"vsock": {"socket": vm.vsock_path},
                                                                 "serial": {"mode": "File",
                                                                            "file": vm.serial_path}}})
                figures[mode].append(ready_after(vm, 1, started, 30))
    return figures


def main():
    guest = LinuxGuest(SHIM, SOURCE_ROOT, BUILD_ROOT)
    base = guest.base_snapshot()
    wd = tempfile.mkdtemp(prefix="vsnap-bench-linux-")
    try:
        tg = testguest_figures(wd)
        linux = {mode: linux_restores(guest, base, wd, mode) for mode in ("ondemand", "copy")}
        linux["boot"] = (guest.boot_record(base)["boot_to_ready_s"] * 1000 if smoke()
                         else linux_boot_ms(guest, wd))
    finally:
        shutil.rmtree(wd, ignore_errors=True)
    med = {k: statistics.median(v) if isinstance(v, list) else v for k, v in linux.items()}
    tmed = {k: statistics.median(v) if isinstance(v, list) else v for k, v in tg.items()}
    for name, m in (("linux", med), ("testguest", tmed)):
        print(f"{name}: boot to READY {m['boot']:.0f} ms, restore to READY on demand "
              f"{m['ondemand']:.0f} ms, by copy {m['copy']:.0f} ms")
    targets = [
        at_most("linux.restore_ready_ondemand_over_boot", med["ondemand"] / med["boot"], 0.05,
                f"Linux cold boot to READY {med['boot']:.0f} ms in this run", unit="x"),
        at_most("linux.restore_ready_ondemand_ms", med["ondemand"], tmed["ondemand"] + 1000,
                f"the test guest's {tmed['ondemand']:.0f} ms in this run + 1 s", unit="ms"),
    ]
    summary = {"bench": "linux", "runs": RUNS, "linux_ms": linux, "testguest_ms": tg,
               "load": os.getloadavg()[0], "targets": targets}
    summary["target_status"] = summary_status(targets)
    append_jsonl(RESULTS, [summary])
    check(all(t["status"] != "missed" for t in targets) or smoke(), f"targets missed: {targets}")
    print("PASS")


if __name__ == "__main__":
    main()
