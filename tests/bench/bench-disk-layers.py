#!/usr/bin/python3
"""Disk layers (issue 10), in one run, on the real shim and test guest:

  revert    vm.restore of a snapshot whose disk chain holds 64 MiB the guest
            wrote, until the guest answers a read of the disk, with a 256 MiB
            and a 16 GiB sparse disk: nothing of the image is copied, so the
            two take the same time. Target: t(16 GiB) / t(256 MiB) <= 1.2.
  snapshot  vm.snapshot (a diff, VM paused) with 0, 16 and 256 MiB written to
            the disk since the last snapshot: the disk's part grows with the
            blocks written only (the disk is 16 GiB either way).

Runs are interleaved (a load change on this shared host hits both sides of a
ratio alike) and medians of --runs are reported. JSON lines go to the results
file, a summary line with the ratios and targets (tests/bench/targets.py)
last; a missed target shows in tests/bench/run.sh's table.
VSNAP_BENCH_SMOKE=1: one run, nothing judged.

usage: bench-disk-layers.py SHIM GUEST RESULTS.jsonl [--runs N]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "persist"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from persisttest import ApiShim, Fail, MIB, connect  # noqa: E402
from vsnaptest import append_jsonl  # noqa: E402
sys.path.insert(0, HERE)
from targets import at_most, smoke, summary_status  # noqa: E402

GIB = 1 << 30
MEMORY_MIB = 128


def config(vm, guest, img, work):
    return {"payload": {"kernel": guest, "cmdline": ""}, "memory": {"size": MEMORY_MIB * MIB},
            "cpus": {"boot_vcpus": 1, "max_vcpus": 1}, "serial": {"mode": "File", "file": vm.serial_path},
            "console": {"mode": "Off"}, "vsock": {"cid": 3, "socket": vm.vsock_path},
            "disks": [{"path": img, "id": "vda"}], "vsnap_work_dir": work}


def cmd(conn, text, want="OK"):
    reply = conn.cmd(text)
    if reply != want and not (want is None and reply.startswith("SUM ")):
        raise Fail(f"{text!r} -> {reply!r}")
    return reply


def sparse_image(workdir, name, size):
    path = os.path.join(workdir, name)
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def timed_snapshot(vm, dest, parent):
    vm.ok("PUT", "vm.pause")
    body = {"destination_url": "file://" + dest}
    if parent:
        body.update(mode="diff", parent_url="file://" + parent)
    t0 = time.monotonic()
    vm.ok("PUT", "vm.snapshot", body, timeout=600)
    elapsed = time.monotonic() - t0
    vm.ok("PUT", "vm.resume")
    return elapsed


def prepare_revert(args, workdir, size):
    """A VM on a size-byte sparse disk: s0 (the image becomes the base), 64 MiB
    written, s1. Returns s1's directory."""
    img = sparse_image(workdir, f"revert-{size >> 20}M.img", size)
    work = os.path.join(workdir, f"work-{size >> 20}M")
    s0, s1 = (os.path.join(workdir, f"revert-{size >> 20}M-{n}") for n in ("s0", "s1"))
    with ApiShim(args.shim, workdir=workdir, name=f"prep-{size >> 20}M") as vm:
        vm.ok("PUT", "vm.create", config(vm, args.guest, img, work))
        vm.ok("PUT", "vm.boot")
        conn = connect(vm)
        timed_snapshot(vm, s0, None)
        conn.sock.settimeout(300)
        cmd(conn, f"BLKFILL 0 {size // 2 - 32 * MIB:#x} {64 * MIB:#x} 7")
        timed_snapshot(vm, s1, s0)
        conn.close()
    return s1, work


def one_revert(args, workdir, snap, work, n):
    """vm.restore (copy) into a fresh shim, until the guest has read the disk."""
    vm = ApiShim(args.shim, workdir=workdir, name=f"revert-{n}")
    try:
        body = {"source_url": "file://" + snap, "memory_restore_mode": "copy", "resume": True,
                "config_overrides": {"serial": {"mode": "File", "file": vm.serial_path},
                                     "vsock": {"socket": vm.vsock_path}, "vsnap_work_dir": work}}
        t0 = time.monotonic()
        vm.ok("PUT", "vm.restore", body, timeout=600)
        restore_s = time.monotonic() - t0
        conn = connect(vm, timeout_s=60)
        cmd(conn, "BLKSUM 0 0 0x1000", want=None)
        total_s = time.monotonic() - t0
        conn.close()
        return restore_s, total_s
    finally:
        vm.close()


def bench_revert(args, workdir):
    sizes = (256 * MIB, 16 * GIB)
    snaps = {size: prepare_revert(args, workdir, size) for size in sizes}
    samples = {size: [] for size in sizes}
    for n in range(args.runs):
        for size in sizes:  # interleaved
            samples[size].append(one_revert(args, workdir, *snaps[size], f"{size >> 20}-{n}"))
    rows = []
    for size in sizes:
        restore = statistics.median(s[0] for s in samples[size])
        total = statistics.median(s[1] for s in samples[size])
        rows.append({"benchmark": "disk-layers", "workload": "revert", "disk_bytes": size, "written_bytes": 64 * MIB,
                     "memory_bytes": MEMORY_MIB * MIB, "runs": args.runs, "restore_ms": round(restore * 1e3, 1),
                     "to_guest_read_ms": round(total * 1e3, 1),
                     "samples_ms": [round(s[1] * 1e3, 1) for s in samples[size]],
                     "host": os.uname().nodename, "time": time.time()})
        print(f"revert {size >> 20:6d} MiB disk: vm.restore {restore * 1e3:7.1f} ms, until the guest read "
              f"its disk {total * 1e3:7.1f} ms", flush=True)
    return rows


def bench_snapshot(args, workdir):
    img = sparse_image(workdir, "snap.img", 16 * GIB)
    work = os.path.join(workdir, "work-snap")
    amounts = (0, 16 * MIB, 256 * MIB)
    samples = {a: [] for a in amounts}
    with ApiShim(args.shim, workdir=workdir, name="snap") as vm:
        vm.ok("PUT", "vm.create", config(vm, args.guest, img, work))
        vm.ok("PUT", "vm.boot")
        conn = connect(vm)
        conn.sock.settimeout(600)
        parent = os.path.join(workdir, "snap-base")
        timed_snapshot(vm, parent, None)
        k = 0
        for n in range(args.runs):
            for amount in amounts:  # interleaved
                if amount:
                    cmd(conn, f"BLKFILL 0 {(k % 32) * 256 * MIB:#x} {amount:#x} {k + 1}")
                dest = os.path.join(workdir, f"snap-{k}")
                samples[amount].append(timed_snapshot(vm, dest, parent))
                parent = dest  # (kept: the disk's chain goes through every one)
                k += 1
        conn.close()
    rows = []
    for amount in amounts:
        t = statistics.median(samples[amount])
        rows.append({"benchmark": "disk-layers", "workload": "snapshot", "disk_bytes": 16 * GIB,
                     "written_bytes": amount, "memory_bytes": MEMORY_MIB * MIB, "runs": args.runs,
                     "snapshot_ms": round(t * 1e3, 1), "samples_ms": [round(x * 1e3, 1) for x in samples[amount]],
                     "host": os.uname().nodename, "time": time.time()})
        print(f"snapshot with {amount >> 20:4d} MiB written: {t * 1e3:8.1f} ms", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shim")
    parser.add_argument("guest")
    parser.add_argument("results")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if smoke():
        args.runs = 1
    workdir = tempfile.mkdtemp(prefix="vsnap-bench-disk-layers-")
    os.environ["TMPDIR"] = workdir
    try:
        revert = bench_revert(args, workdir)
        snap = bench_snapshot(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    small, big = (r["to_guest_read_ms"] for r in revert)
    by_amount = {r["written_bytes"]: r["snapshot_ms"] for r in snap}
    summary = {"benchmark": "disk-layers", "summary": True,
               "revert_16g_over_256m": round(big / small, 3),
               "snapshot_256m_over_16m": round(by_amount[256 * MIB] / by_amount[16 * MIB], 3),
               "snapshot_ms_per_written_mib": round((by_amount[256 * MIB] - by_amount[16 * MIB]) / 240, 3),
               "snapshot_ms_nothing_written": by_amount[0],
               "targets": [at_most("revert_16g_over_256m", big / small, 1.2,
                                   f"the same revert with a 256 MiB disk, same run = {small:.1f} ms", "x")],
               "host": os.uname().nodename, "time": time.time()}
    summary["target_status"] = summary_status(summary["targets"])
    append_jsonl(args.results, revert + snap + [summary])
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
