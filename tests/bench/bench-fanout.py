"""Fan-out from one snapshot (issue 26), on the real shim, KVM and the test
guest: N clones of one 8 GiB snapshot, whose guest reads back 256 MiB of a
1 GiB fill before READY, restored at once with memory_restore_mode "shared"
(each clone's RAM a copy-on-write mapping of the snapshot's one image).

  single   one clone alone, restore request to READY (median of --runs)
  fan-out  N clones started together: each one's time to READY (p50, p95),
           and the wall time until the last is READY
  memory   the PSS of the clones' guest RAM mappings summed (/proc/PID/smaps)
           against one working set (what one clone alone maps of the
           snapshot: the kernel maps whole page-cache folios, so more than
           the pages read) plus what each wrote (its anonymous copies);
           beside it the same fan-out on demand

Targets (same run): clones brought to READY per second over 1 / single >=
0.75 x the host's cores (the CPU bounds a fan-out on a small host); summed
PSS <= 1.5 x (working set + written). p95 / single is reported beside the
published 1.28 (405 / 317 ms, many cores). VSNAP_BENCH_SMOKE=1: 512 MiB,
64 MiB filled, 16 MiB read back, 4 clones, nothing judged.

usage: bench-fanout.py SHIM GUEST RESULTS.jsonl [--runs N] [--clones N]
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from shimbench import ApiShim, timed_restore, workset_snapshot  # noqa: E402
from persisttest import ram_smaps  # noqa: E402
from targets import at_least, at_most, smoke, summary_status  # noqa: E402
from vsnaptest import append_jsonl  # noqa: E402


def restore_to_ready(dst, snap, mode, extra=None):
    """vm.restore -> the guest's READY, ms (the shim stays up)."""
    return timed_restore(dst, snap, mode, extra or {}, 300000)[1]


def single(args, workdir, snap, mode):
    """One clone alone, --runs times: the median time to READY, and the RAM
    the last one maps (its working set as the host holds it)."""
    times = []
    for i in range(args.runs):
        dst = ApiShim(args.shim, workdir=workdir, name=f"single-{mode}-{i}")
        try:
            times.append(restore_to_ready(dst, snap, mode))
            mem = ram_smaps(dst.proc.pid)
        finally:
            dst.close()
    return statistics.median(times), mem


def fan_out(args, workdir, snap, mode, extra=None):
    """N clones restored at once; their times to READY, the wall time, and
    their memory once all are READY."""
    clones = [ApiShim(args.shim, workdir=workdir, name=f"{mode}-{i}") for i in range(args.clones)]
    times, errors = [None] * len(clones), []

    def run(i):
        try:
            times[i] = restore_to_ready(clones[i], snap, mode, extra)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(f"clone {i}: {e}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(clones))]
    try:
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = (time.monotonic() - t0) * 1e3
        if errors:
            raise RuntimeError("; ".join(errors))
        mem = [ram_smaps(c.proc.pid) for c in clones]
        return {"times_ms": times, "wall_ms": wall, "pss_mib": sum(m["Pss"] for m in mem),
                "written_mib": sum(m["Anonymous"] for m in mem)}
    finally:
        for c in clones:
            c.close()


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shim")
    ap.add_argument("guest")
    ap.add_argument("results")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clones", type=int, default=20)
    args = ap.parse_args()
    args.shim, args.guest = os.path.abspath(args.shim), os.path.abspath(args.guest)
    args.ram_mib, args.fill_mib, args.ws_mib = 8192, 1024, 256
    if smoke():
        args.runs, args.clones, args.ram_mib, args.fill_mib, args.ws_mib = 1, 4, 512, 64, 16
    workdir = tempfile.mkdtemp(prefix="vsnap-bench-fanout-", dir="/var/tmp")
    try:
        snap = workset_snapshot(args, workdir)
        build, _ = single(argparse.Namespace(**{**vars(args), "runs": 1}), workdir, snap, "shared")
        one, alone = single(args, workdir, snap, "shared")
        shared = fan_out(args, workdir, snap, "shared")
        ondemand = fan_out(args, workdir, snap, "ondemand", {"ondemand_workset": False})
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(args, build, one, alone, shared, ondemand)
    return 0


def report(args, build, one, alone, shared, ondemand):
    cores = os.cpu_count() or 1
    times = shared["times_ms"]
    p50, p95 = percentile(times, 0.5), percentile(times, 0.95)
    rate = args.clones / (shared["wall_ms"] / 1e3)
    speedup = rate * one / 1e3
    written = shared["written_mib"]
    held = alone["Rss"] - alone["Anonymous"]  # the snapshot's pages one clone alone maps
    entry = {"benchmark": "fanout", "ram_mib": args.ram_mib, "ws_mib": args.ws_mib, "clones": args.clones,
             "first_restore_ms": build, "single_ms": one, "p50_ms": p50, "p95_ms": p95,
             "p95_over_single": p95 / one, "published_p95_over_single": 405 / 317, "wall_ms": shared["wall_ms"],
             "clones_per_s": rate, "single_mapped_mib": held, "shared_pss_mib": shared["pss_mib"],
             "shared_written_mib": written,
             "ondemand_pss_mib": ondemand["pss_mib"], "ondemand_p95_ms": percentile(ondemand["times_ms"], 0.95),
             "time": time.time(), "host": os.uname().nodename}
    print(f"  first shared restore (builds the image) {build:.0f} ms; one clone alone {one:.0f} ms")
    print(f"  {args.clones} clones at once: p50 {p50:.0f} ms, p95 {p95:.0f} ms (p95/single {p95 / one:.2f}, "
          f"published 1.28), all READY after {shared['wall_ms']:.0f} ms: {rate:.1f} clones/s")
    print(f"  PSS: shared {shared['pss_mib']:.0f} MiB (written {written:.0f} MiB), on demand "
          f"{ondemand['pss_mib']:.0f} MiB")
    targets = [
        at_least("fanout_rate_over_single", speedup, 0.75 * cores,
                 f"clones READY per second ({rate:.1f}) x one clone's time alone ({one:.0f} ms), against "
                 f"0.75 x {cores} cores", "x"),
        at_most("fanout_pss", shared["pss_mib"], 1.5 * (held + written),
                f"1.5 x (one working set: the {held:.0f} MiB of the snapshot one clone alone maps, same run, for "
                f"{args.ws_mib} MiB read; + the clones' own writes, {written:.0f} MiB); on demand the same clones "
                f"hold {ondemand['pss_mib']:.0f} MiB", "MiB"),
    ]
    entry.update(targets=targets, target_status=summary_status(targets))
    append_jsonl(args.results, [entry])
    for t in targets:
        print(f"target {t['name']}: {t['value']} {t['op']} {t['limit']}: {t['status']}")


if __name__ == "__main__":
    sys.exit(main())
