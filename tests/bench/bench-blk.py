#!/usr/bin/python3
"""virtio-blk throughput and IOPS inside the test guest against fio on the
host, on the same image file, in one run:

  seqread, seqwrite    1 MiB requests, 4 in flight
  randread, randwrite  4 KiB requests at random 4 KiB-aligned offsets, 1 and
                       8 in flight

The guest side is BLKBENCH on the test guest's command port (its own TSC
clock, from the first submit to the last completion), on two disks of one
VM, each on its own copy of the image: disk 0 with the default io (one
transfer at a time on the disk's thread), disk 1 with vsnap_io io_uring
(<driver io='io_uring'/>: the queued requests in flight together). The host side is fio
on the image the shim serves, with the same block size, queue depth, span
and byte count, twice: the psync engine (one synchronous preadv/pwritev at a
time, what the shim's I/O thread does) and io_uring at the queue depth, each
run interleaved with one of the guest's so a change of load on this shared
host hits all three alike (medians of --runs). The faster of the two fio
engines is the host's limit; guest/host is the ratio reported. Every run
starts with the image's dirty pages written back.
Buffered I/O on both sides (the shim's disk without direct=true, fio
--direct=0), and again with O_DIRECT on both sides.

One JSON line per workload and a summary line with every ratio go to the
results file. Target (tests/bench/targets.py): guest/host >= 0.5 for
sequential I/O, each workload and mode a target. VSNAP_BENCH_SMOKE=1: one run
over 32 MiB, cached only, a tenth of the requests, nothing judged.

usage: bench-blk.py SHIM GUEST RESULTS.jsonl [--runs N] [--span-mib N]
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import Shim, append_jsonl, wait_command_port  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from targets import at_least, smoke, summary_status  # noqa: E402

MIB = 1 << 20
WORKLOADS = [
    # name, guest op, fio rw, block size, depth, requests
    ("seqread", "read", "read", MIB, 4, 512),
    ("seqwrite", "write", "write", MIB, 4, 512),
    ("randread-qd1", "randread", "randread", 4096, 1, 20000),
    ("randread-qd8", "randread", "randread", 4096, 8, 20000),
    ("randwrite-qd1", "randwrite", "randwrite", 4096, 1, 20000),
    ("randwrite-qd8", "randwrite", "randwrite", 4096, 8, 20000),
]


def settle(path):
    """Write back what earlier runs left dirty in the page cache: otherwise the
    next O_DIRECT run pays for it, whichever side it is."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fio(path, rw, bs, depth, nbytes, span, engine, direct):
    """fio on path; returns bytes per second."""
    settle(path)
    argv = ["fio", "--name=bench", f"--filename={path}", f"--rw={rw}", f"--bs={bs}", f"--size={span}",
            f"--io_size={nbytes}", f"--ioengine={engine}", f"--iodepth={depth if engine != 'psync' else 1}",
            f"--direct={1 if direct else 0}", "--norandommap", "--randrepeat=0", "--output-format=json",
            "--invalidate=0", "--end_fsync=0"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"fio failed: {res.stderr.strip()}")
    job = json.loads(res.stdout)["jobs"][0]
    side = job["read"] if rw.endswith("read") else job["write"]
    return side["bw_bytes"]


def guest_bench(conn, disk, img, op, bs, depth, count, span):
    settle(img)
    reply = conn.cmd(f"BLKBENCH {disk} {op} 0 {span:#x} {bs} {depth} {count}")
    parts = reply.split()
    if len(parts) != 4 or parts[0] != "BENCH":
        raise RuntimeError(f"BLKBENCH {op}: {reply}")
    nbytes, usec = int(parts[2]), int(parts[3])
    return nbytes / (usec / 1e6)


def prefill(img, span):
    """A written image (not holes): reads then read data."""
    subprocess.run(["fio", "--name=prefill", f"--filename={img}", "--rw=write", "--bs=1M", f"--size={span}",
                    "--ioengine=psync", "--end_fsync=1", "--output-format=terse"], check=True, capture_output=True)


def run_mode(args, workdir, direct):
    img, ring_img = os.path.join(workdir, "bench.img"), os.path.join(workdir, "bench-uring.img")
    span = args.span_mib * MIB
    prefill(img, span)
    prefill(ring_img, span)
    vsock = os.path.join(workdir, "bench.vsock")
    disks = []
    for path, io in ((img, ""), (ring_img, ",vsnap_io=io_uring")):
        disks += ["--disk", f"path={path}" + (",direct=on" if direct else "") + io]
    rows = []
    with Shim(args.shim, args.guest, memory="256M", workdir=workdir,
              extra_args=["--vsock", f"cid=3,socket={vsock}"] + disks) as vm:
        conn = wait_command_port(vsock, timeout=30)
        conn.sock.settimeout(600)  # a slow random run on a busy host takes a while
        try:
            for name, op, rw, bs, depth, count in WORKLOADS:
                count = count // 10 if smoke() else count
                nbytes = bs * count
                guest, guest_ring, psync, uring = [], [], [], []
                for _ in range(args.runs):  # interleaved: a load change hits all four alike
                    guest.append(guest_bench(conn, 0, img, op, bs, depth, count, span))
                    guest_ring.append(guest_bench(conn, 1, ring_img, op, bs, depth, count, span))
                    psync.append(fio(img, rw, bs, depth, nbytes, span, "psync", direct))
                    uring.append(fio(img, rw, bs, depth, nbytes, span, "io_uring", direct))
                g, gr, p, u = (statistics.median(x) for x in (guest, guest_ring, psync, uring))
                host = max(p, u)
                row = {"benchmark": "blk", "workload": name, "direct": direct, "block_size": bs,
                       "queue_depth": depth, "bytes": nbytes, "runs": args.runs,
                       "guest_mb_s": round(g / 1e6, 1), "guest_io_uring_mb_s": round(gr / 1e6, 1),
                       "guest_io_uring_over_guest": round(gr / g, 3), "guest_io_uring_over_host": round(gr / host, 3),
                       "host_psync_mb_s": round(p / 1e6, 1),
                       "host_io_uring_mb_s": round(u / 1e6, 1), "guest_iops": round(g / bs),
                       "host_iops": round(host / bs), "guest_over_host": round(g / host, 3),
                       "io_uring_over_psync": round(u / p, 3),
                       "samples_mb_s": {"guest": [round(x / 1e6, 1) for x in guest],
                                        "guest_io_uring": [round(x / 1e6, 1) for x in guest_ring],
                                        "psync": [round(x / 1e6, 1) for x in psync],
                                        "io_uring": [round(x / 1e6, 1) for x in uring]},
                       "host": os.uname().nodename, "time": time.time()}
                rows.append(row)
                print(f"{'direct' if direct else 'cached'} {name:14s} guest {g / 1e6:8.1f} MB/s "
                      f"({g / bs:8.0f} IOPS)  guest io_uring {gr / 1e6:8.1f}  fio psync {p / 1e6:8.1f}  "
                      f"io_uring {u / 1e6:8.1f} MB/s  guest/host {g / host:5.2f}  io_uring/threads {gr / g:5.2f}",
                      flush=True)
        finally:
            conn.close()
    os.unlink(img)
    os.unlink(ring_img)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shim")
    parser.add_argument("guest")
    parser.add_argument("results")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--span-mib", type=int, default=512)
    args = parser.parse_args()
    if not shutil.which("fio"):
        print("fio is not installed (scripts/setup.sh installs it)")
        sys.exit(77)
    modes = (False, True)
    if smoke():
        args.runs, args.span_mib, modes = 1, 32, (False,)
    workdir = tempfile.mkdtemp(prefix="vsnap-bench-blk-")
    try:
        rows = []
        for direct in modes:
            rows += run_mode(args, workdir, direct)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    ratios = {f"{'direct' if r['direct'] else 'cached'}_{r['workload']}": r["guest_over_host"] for r in rows}
    summary = {"benchmark": "blk", "summary": True, "guest_over_host": ratios,
               "io_uring_over_psync": {f"{'direct' if r['direct'] else 'cached'}_{r['workload']}":
                                       r["io_uring_over_psync"] for r in rows},
               "guest_io_uring_over_guest": {f"{'direct' if r['direct'] else 'cached'}_{r['workload']}":
                                             r["guest_io_uring_over_guest"] for r in rows},
               "host": os.uname().nodename, "time": time.time()}
    summary["targets"] = [
        at_least(f"{'direct' if r['direct'] else 'cached'}_{r['workload']}_guest_over_host", r["guest_over_host"], 0.5,
                 f"fio on the same image, the faster of psync and io_uring, same run = {r['host_iops'] * r['block_size'] / 1e6:.1f} MB/s",
                 "x")
        for r in rows if r["workload"].startswith("seq")]
    summary["target_status"] = summary_status(summary["targets"])
    append_jsonl(args.results, rows + [summary])
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
