"""Guest RAM on 2 MiB huge pages against 4 KiB pages, in one run (issue 22):

  ready_ms           vm.restore on demand (default fault blocks: 64 KiB on 4 KiB
                     pages, 2 MiB on huge pages; and 4 KiB pages in 2 MiB blocks) (resume=true) sent -> the guest's READY,
                     which the test guest sends once it has read its whole 64 MiB
                     working set back (one read per 4 KiB page)
  running_ms         ... -> vm.restore answered (the vCPUs run)
  ready_minus_running_ms   the working set's first touches after the restore
  fresh_touch_ms     a booted guest's first touch (TOUCH) of 64 MiB it never
                     touched (median of up to --runs regions): what the host
                     itself charges per page, the reference the restore is
                     compared with
  kvm_mapped_pages   how KVM maps guest RAM after READY (vm.info's
                     vsnap.kvm_mapped_pages, KVM_GET_STATS_FD's pages_4k and
                     pages_2m): whether the guest gets 2 MiB mappings

Restores alternate between the two page sizes (--runs each, medians), each in
a fresh shim, from a chain (base with the 64 MiB fill, a diff of 16 MiB
rewritten) taken of a VM on that page size. The huge pages are added to the
host's pool for the run and given back (needs root).

Targets (tests/bench/targets.py): ready_ms with huge pages <= 0.25 x with
4 KiB pages ("cannot", with why, when KVM mapped no 2 MiB page: the
mappings measured say whether the guest got 2 MiB mappings at all); and per
page size READY minus running <= fresh_touch_ms x 1.2 + 20 ms. One JSON line
per page size and a summary line with "ratios" and "targets".
VSNAP_BENCH_SMOKE=1: one run, nothing judged.

usage: bench-hugepages.py SHIM GUEST RESULTS.jsonl [--runs N] [--ram-mib M]
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "persist"))
from persisttest import ApiShim, Conn, FILL_BASE, MIB  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import HugePages, append_jsonl  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from targets import at_most, smoke, summary_status, touch_target  # noqa: E402

WORKSET = 64 * MIB
REWRITE = 16 * MIB
TARGET = 0.25
# 4k-2m-blocks: 4 KiB pages served in 2 MiB fault blocks, to tell the bigger
# block from the huge page.
KINDS = ("4k", "4k-2m-blocks", "2m")
CHAIN_OF = {"4k": "4k", "4k-2m-blocks": "4k", "2m": "2m"}


def make_chain(args, workdir, kind):
    """(diff directory, fresh_touch_ms) of a VM on the page size kind."""
    src = ApiShim(args.shim, workdir=workdir, name=f"src-{kind}")
    try:
        src.boot(args.guest, f"vsnap.fill_mib={WORKSET // MIB} vsnap.seed=7", memory_mib=args.ram_mib,
                 hugepages=kind == "2m")
        src.wait_ready(120)
        conn = Conn(src.vsock_path)
        # 64 MiB regions after the fill, never touched since boot: a few
        # samples (one shared noisy machine), as many as RAM holds.
        times = []
        for k in range(min(args.runs, (args.ram_mib * MIB - FILL_BASE) // WORKSET - 1)):
            fresh = FILL_BASE + WORKSET * (k + 1)
            t0 = time.monotonic()
            conn.ok(f"TOUCH {fresh:#x} {WORKSET:#x}")
            times.append((time.monotonic() - t0) * 1e3)
        fresh_ms = statistics.median(times)
        base, diff = os.path.join(workdir, f"base-{kind}"), os.path.join(workdir, f"diff-{kind}")
        src.snapshot_paused(base)
        conn.ok(f"FILL {FILL_BASE:#x} {REWRITE:#x} 99")
        src.snapshot_paused(diff, base)
        conn.close()
        return diff, fresh_ms
    finally:
        src.close()


def restore_once(args, workdir, source, kind):
    dst = ApiShim(args.shim, workdir=workdir, name=f"dst-{kind}")
    try:
        t0 = time.monotonic()
        # Pages against pages: no working-set record (it would serve the pages
        # first on the runs after the first, and only once one was kept).
        extra = {"ondemand_workset": False}
        if kind == "4k-2m-blocks":
            extra["ondemand_block_size"] = 2 * MIB
        status, reply = dst.restore(source, "ondemand", resume=True, **extra)
        t1 = time.monotonic()
        if status != 204:
            raise RuntimeError(f"restore {source}: {status} {reply}" + dst.describe())
        dst.wait_ready(120)
        t2 = time.monotonic()
        mapped = dst.ok("GET", "vm.info")["vsnap"]["kvm_mapped_pages"]
        return {"running_ms": (t1 - t0) * 1e3, "ready_ms": (t2 - t0) * 1e3,
                "ready_minus_running_ms": (t2 - t1) * 1e3}, mapped
    finally:
        dst.close()


def why_missed(mapped):
    if mapped and mapped.get("2m", 0) == 0:
        return ("KVM maps the huge-page RAM with 4 KiB entries only (KVM_GET_STATS_FD pages_2m = 0): "
                "KVM's x86 MMU maps no huge page in a memory slot with dirty logging "
                "(KVM_MEM_LOG_DIRTY_PAGES, on from boot for diff snapshots), on any host; what huge pages "
                "save here is one userfaultfd fault and one host allocation per 2 MiB, while every 4 KiB "
                "first touch is still a guest exit (shadow paging on kvm_pvm, an EPT/NPT violation on "
                "VMX/SVM)")
    return "huge pages did not cut the first touches enough on this host (see the samples)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shim")
    ap.add_argument("guest")
    ap.add_argument("results")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ram-mib", type=int, default=512)
    args = ap.parse_args()
    args.shim, args.guest = os.path.abspath(args.shim), os.path.abspath(args.guest)
    if smoke():
        args.runs = 1
    base = {"benchmark": "hugepages", "host": os.uname().nodename, "time": time.time(), "ram_mib": args.ram_mib,
            "workset_mib": WORKSET // MIB}
    if not HugePages.can_reserve():
        why = "huge pages need root and a 2 MiB default huge page size"
        append_jsonl(args.results, [{**base, "skipped": why, "targets": [
            at_most("ready_2m_over_4k", None, TARGET, "READY of the same restore on 4 KiB pages", "x", why=why)]}])
        print("skipped: huge pages need root and a 2 MiB default huge page size")
        return 0
    workdir = tempfile.mkdtemp(prefix="vsnap-bench-hugepages-")
    samples = {k: [] for k in KINDS}
    mapped = {}
    try:
        # One VM on huge pages at a time (the source, then each restore), and a margin.
        with HugePages(args.ram_mib // 2 + 16):
            made = {k: make_chain(args, workdir, k) for k in ("4k", "2m")}
            chains = {k: made[CHAIN_OF[k]] for k in KINDS}
            for _ in range(args.runs):
                for kind in KINDS:
                    run, mapped[kind] = restore_once(args, workdir, chains[kind][0], kind)
                    samples[kind].append(run)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    med = {k: {m: statistics.median(r[m] for r in samples[k]) for m in samples[k][0]} for k in KINDS}
    lines = []
    for kind in KINDS:
        lines.append({**base, "pages": kind, "runs": args.runs, **med[kind], "fresh_touch_ms": chains[kind][1],
                      "kvm_mapped_pages": mapped[kind],
                      "samples": {m: [r[m] for r in samples[kind]] for m in samples[kind][0]}})
        print(f"{kind:>12}: running {med[kind]['running_ms']:7.1f} ms  ready {med[kind]['ready_ms']:7.1f} ms  "
              f"ready-running {med[kind]['ready_minus_running_ms']:7.1f} ms  fresh touch "
              f"{chains[kind][1]:7.1f} ms  KVM maps {mapped[kind]}", flush=True)
    ratios = {
        "ready_2m_over_4k": med["2m"]["ready_ms"] / med["4k"]["ready_ms"],
        "ready_minus_running_2m_over_4k": med["2m"]["ready_minus_running_ms"] / med["4k"]["ready_minus_running_ms"],
        "ready_4k_2m_blocks_over_4k": med["4k-2m-blocks"]["ready_ms"] / med["4k"]["ready_ms"],
        "fresh_touch_2m_over_4k": chains["2m"][1] / chains["4k"][1],
    }
    maps_2m = bool(mapped["2m"] and mapped["2m"].get("2m"))
    targets = [at_most("ready_2m_over_4k", ratios["ready_2m_over_4k"], TARGET,
                       f"READY of the same restore on 4 KiB pages, same run = {med['4k']['ready_ms']:.1f} ms", "x",
                       cannot=None if maps_2m else why_missed(mapped["2m"]))]
    targets += [touch_target(f"ready_minus_running_{kind}", med[kind]["ready_minus_running_ms"], chains[kind][1])
                for kind in KINDS]
    summary = {**base, "ratios": ratios, "targets": targets, "target_status": summary_status(targets),
               "kvm_maps_2m": maps_2m, "kvm_mapped_pages": mapped}
    lines.append(summary)
    append_jsonl(args.results, lines)
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}")
    for t in targets:
        print(f"target {t['name']}: {t['value']} {t['op']} {t['limit']}: {t['status']}"
              + (f" ({t['why']})" if t.get("why") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
