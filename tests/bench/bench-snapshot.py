"""Snapshot and restore benchmark (issue 4), on the real shim, KVM and the
test guest, reproducing the shape of the published table:

  for RAM in 512 MiB, 1 GiB, 2 GiB, 8 GiB, a 64 MiB working set filled at boot
  (before the base) and 16 MiB of it rewritten before a diff:
    full_snapshot_ms      vm.snapshot of the base (VM paused)
    full_pause_resume_ms  pause -> snapshot -> resume, as libvirt does it
    diff_snapshot_ms, diff_pause_resume_ms   the same for the diff
    restore_running_ms    vm.restore of [base, diff] with resume=true sent ->
                          answered (the vCPUs run), per mode copy/merge/ondemand
    restore_ready_ms      ... -> the guest's READY after the restore (vm.wait-ready)
    restore_workset_ms    ... -> the guest has read its whole 64 MiB working set
                          back (TOUCH over vsock right after READY)
    fresh_touch_ms        the reference: the source VM, booted, touches 64 MiB
                          it never touched (TOUCH over vsock, median of --runs
                          regions): what this host charges for first touches

Each restore runs in a fresh shim (--runs times, medians). The first
on-demand restore of the chain records the guest's working set (plain on
demand, slower), the ones after it serve the record: the median is one of
those, the recording one is in the samples. One JSON object per
measurement is appended to the results file; a table and the ratios
ondemand(8 GiB)/ondemand(512 MiB) and merge(2 GiB)/ondemand(2 GiB) are
printed. Targets (tests/bench/targets.py): READY minus running of every
restore <= fresh_touch_ms x 1.2 + 20 ms (at the smallest and the largest
size), ondemand(8 GiB)/ondemand(512 MiB) to running <= 1.2,
merge(2 GiB)/ondemand(2 GiB) to running >= 20.
VSNAP_BENCH_SMOKE=1: one run at 512 MiB, nothing judged.

usage: bench-snapshot.py SHIM GUEST RESULTS.jsonl [--runs N] [--sizes 512,1024,...] [--modes copy,...]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shimbench import must, timed_restore  # noqa: E402
from persisttest import ApiShim, Conn, FILL_BASE, MIB  # noqa: E402
from vsnaptest import append_jsonl  # noqa: E402
from targets import at_least, at_most, smoke, summary_status, touch_target  # noqa: E402

MODES = ("copy", "merge", "ondemand")
WORKSET = 64 * MIB
REWRITE = 16 * MIB


def timed_snapshot(shim, dest, parent=None):
    """(snapshot ms, pause-to-resume ms)."""
    body = {"destination_url": "file://" + dest}
    if parent:
        body.update(mode="diff", parent_url="file://" + parent)
    t0 = time.monotonic()
    must(shim, "PUT", "vm.pause")
    t1 = time.monotonic()
    must(shim, "PUT", "vm.snapshot", body)
    t2 = time.monotonic()
    must(shim, "PUT", "vm.resume")
    t3 = time.monotonic()
    return (t2 - t1) * 1e3, (t3 - t0) * 1e3


def fresh_touch(conn, ram_mib, runs):
    """Median ms of TOUCH of WORKSET bytes the booted guest never touched
    (regions past the fill), timed as restore_workset_ms's TOUCH is."""
    regions = min(runs, (ram_mib * MIB - FILL_BASE) // WORKSET - 1)
    times = []
    for k in range(regions):
        t0 = time.monotonic()
        conn.ok(f"TOUCH {FILL_BASE + WORKSET * (k + 1):#x} {WORKSET:#x}")
        times.append((time.monotonic() - t0) * 1e3)
    return statistics.median(times)


def make_chain(args, workdir, ram_mib):
    src = ApiShim(args.shim, workdir=workdir, name=f"src{ram_mib}")
    try:
        src.boot(args.guest, f"vsnap.fill_mib={WORKSET // MIB} vsnap.seed=7", memory_mib=ram_mib)
        conn = Conn(src.vsock_path) if src.wait_ready(60) else None
        fresh_ms = fresh_touch(conn, ram_mib, args.runs)
        base, diff = os.path.join(workdir, f"base{ram_mib}"), os.path.join(workdir, f"diff{ram_mib}")
        full_ms, full_pr_ms = timed_snapshot(src, base)
        conn.ok(f"FILL {FILL_BASE:#x} {REWRITE:#x} 99")
        diff_ms, diff_pr_ms = timed_snapshot(src, diff, base)
        conn.close()
        sizes = {"base_mib": os.path.getsize(os.path.join(base, "memory-ranges")) / MIB,
                 "diff_mib": os.path.getsize(os.path.join(diff, "memory-ranges")) / MIB}
        return diff, {"full_snapshot_ms": full_ms, "full_pause_resume_ms": full_pr_ms,
                      "diff_snapshot_ms": diff_ms, "diff_pause_resume_ms": diff_pr_ms,
                      "fresh_touch_ms": fresh_ms}, sizes
    finally:
        src.close()


def restore_once(args, workdir, source, mode, body_extra):
    dst = ApiShim(args.shim, workdir=workdir, name=f"dst-{mode}")
    try:
        t0 = time.monotonic()
        running, ready = timed_restore(dst, source, mode, body_extra, 60000)
        conn = Conn(dst.vsock_path)
        conn.ok(f"TOUCH {FILL_BASE:#x} {WORKSET:#x}")
        t3 = time.monotonic()
        conn.close()
        if mode == "ondemand":
            time.sleep(0.3)  # the working-set record is kept 200 ms after READY
        return {"restore_running_ms": running, "restore_ready_ms": ready,
                "restore_workset_ms": (t3 - t0) * 1e3}
    finally:
        dst.close()


def record(args, entry):
    entry.update(benchmark="snapshot", host=os.uname().nodename, time=time.time())
    append_jsonl(args.results, [entry])


def memslot_ms(args, ram_mib):
    """The host's own cost of the VM's memory slots at this size (memslot-cost.c)."""
    out = subprocess.run([args.memslot_cost, str(ram_mib), "5"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["median_ms"]


def bench_size(args, workdir, ram_mib, table):
    diff, snap_times, sizes = make_chain(args, workdir, ram_mib)
    if args.memslot_cost:
        snap_times["memslot_ms"] = memslot_ms(args, ram_mib)
    record(args, {"ram_mib": ram_mib, **snap_times, **sizes})
    table[(ram_mib, "snapshot")] = {**snap_times, **sizes}
    variants = [(m, m, {}) for m in MODES]
    variants.append(("ondemand-2M-prefetch", "ondemand", {"ondemand_block_size": 2 * MIB, "prefetch": True}))
    variants = [v for v in variants if v[0] in args.modes]
    for name, mode, extra in variants:
        runs = [restore_once(args, workdir, diff, mode, extra) for _ in range(args.runs)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        table[(ram_mib, name)] = med
        record(args, {"ram_mib": ram_mib, "mode": name, "runs": args.runs, **med,
                      "samples": {k: [r[k] for r in runs] for k in runs[0]}})
        print(f"  {ram_mib:5d} MiB {name:22s} running {med['restore_running_ms']:8.1f} ms  "
              f"ready {med['restore_ready_ms']:8.1f} ms  workset {med['restore_workset_ms']:8.1f} ms", flush=True)
    # The diff's parent must stay until every restore of this size is done.
    for name in (f"base{ram_mib}", f"diff{ram_mib}"):
        shutil.rmtree(os.path.join(workdir, name), ignore_errors=True)


def print_table(sizes, table):
    print("\nRAM      full snap  diff snap  diff pause->resume | restore to running (ms): copy / merge / ondemand")
    for ram in sizes:
        s = table[(ram, "snapshot")]
        r = [table[(ram, m)]["restore_running_ms"] if (ram, m) in table else float("nan") for m in MODES]
        print(f"{ram:5d} MiB {s['full_snapshot_ms']:8.1f}  {s['diff_snapshot_ms']:8.1f}  {s['diff_pause_resume_ms']:8.1f}"
              f"           | {r[0]:8.1f} / {r[1]:8.1f} / {r[2]:8.1f}")
    print("published (8 vCPU NVMe host): diff snapshot 40 ms; merge 280/410/970 ms at 512M/1G/2G; "
          "uffd layered 140/141/142 ms")


def ratio(table, a, b, key="restore_running_ms"):
    if a in table and b in table and table[b][key] > 0:
        return table[a][key] / table[b][key]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shim")
    ap.add_argument("guest")
    ap.add_argument("results")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="512,1024,2048,8192")
    ap.add_argument("--memslot-cost", help="memslot-cost: the host's cost of a VM's memory slots")
    ap.add_argument("--modes", default="copy,merge,ondemand,ondemand-2M-prefetch",
                    help="restore variants to measure (a subset gives a partial table)")
    args = ap.parse_args()
    # meson passes build paths relative to the build directory.
    args.shim, args.guest = os.path.abspath(args.shim), os.path.abspath(args.guest)
    args.memslot_cost = args.memslot_cost and os.path.abspath(args.memslot_cost)
    if smoke():
        args.runs, args.sizes = 1, "512"
    args.modes = args.modes.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    workdir = tempfile.mkdtemp(prefix="vsnap-bench-snapshot-")
    table = {}
    try:
        for ram in sizes:
            bench_size(args, workdir, ram, table)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(sizes, table)
    ratios = {
        "ondemand_8g_over_512m": ratio(table, (8192, "ondemand"), (512, "ondemand")),
        "merge_2g_over_ondemand_2g": ratio(table, (2048, "merge"), (2048, "ondemand")),
        "ondemand_8g_over_512m_ready": ratio(table, (8192, "ondemand"), (512, "ondemand"), "restore_ready_ms"),
        "merge_2g_over_ondemand_2g_ready": ratio(table, (2048, "merge"), (2048, "ondemand"), "restore_ready_ms"),
    }
    targets = touch_targets(sizes, table) + scaling_targets(table, ratios) + [
        at_least("merge_2g_over_ondemand_2g", ratios["merge_2g_over_ondemand_2g"], 20,
                 "restore to running, merge over ondemand at 2 GiB (same run)", "x")]
    record(args, {"ratios": ratios, "targets": targets, "target_status": summary_status(targets)})
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}" if v is not None else f"{k}: n/a")
    for t in targets:
        print(f"target {t['name']}: {t['value']} {t['op']} {t['limit']}: {t['status']}")
    return 0


def scaling_targets(table, ratios):
    """On-demand restore to running, 8 GiB over 512 MiB <= 1.2; and the same
    with the host's own cost of the memory slots (memslot-cost, same run)
    taken out of both, which is what the VMM does. When that host cost alone
    is more than the 20% slack, the first is listed as "cannot"."""
    ratio = ratios["ondemand_8g_over_512m"]
    small, large = table.get((512, "ondemand")), table.get((8192, "ondemand"))
    m_small = table.get((512, "snapshot"), {}).get("memslot_ms")
    m_large = table.get((8192, "snapshot"), {}).get("memslot_ms")
    if not (small and large and m_small is not None and m_large is not None):
        return [at_most("ondemand_8g_over_512m", ratio, 1.2,
                        "restore to running, ondemand 8 GiB over 512 MiB (same run)", "x")]
    run_small, run_large = small["restore_running_ms"], large["restore_running_ms"]
    cannot = None
    if m_large - m_small > 0.2 * run_small:
        cannot = (f"KVM's memory slots with dirty logging alone take {m_large:.1f} ms at 8 GiB against "
                  f"{m_small:.1f} ms at 512 MiB (memslot-cost, same run): more than 20% of the "
                  f"{run_small:.1f} ms restore at 512 MiB (shadow paging sets up per-page metadata)")
    vmm = (run_large - m_large) / (run_small - m_small) if run_small > m_small else None
    return [
        at_most("ondemand_8g_over_512m", ratio, 1.2,
                "restore to running, ondemand 8 GiB over 512 MiB (same run)", "x", cannot=cannot),
        at_most("ondemand_8g_over_512m_less_memslots", vmm, 1.2,
                f"the same, less the host's memory-slot cost of each size ({m_large:.1f} / {m_small:.1f} ms, "
                "memslot-cost, same run)", "x"),
    ]


def touch_targets(sizes, table):
    """READY minus running of each restore variant against the fresh touch
    of the source VM of the same size, at the smallest and largest size."""
    out = []
    for ram in sorted({sizes[0], sizes[-1]}):
        fresh = table[(ram, "snapshot")]["fresh_touch_ms"]
        for (size, name), med in table.items():
            if size == ram and name != "snapshot":
                out.append(touch_target(f"ready_minus_running_{ram}m_{name}",
                                        med["restore_ready_ms"] - med["restore_running_ms"], fresh))
    return out


if __name__ == "__main__":
    sys.exit(main())
