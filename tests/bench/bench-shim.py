"""Foundation benchmark of vsnap-shim on the real test guest and real KVM:

  api_ready_ms     process start -> API socket connectable and vmm.ping answered
  boot_to_guest_ms PUT vm.boot sent -> "vsnap-testguest: booted" in the serial file
  vmm_overhead_mib process RSS minus the guest RAM it has touched (from smaps)
  vmm_private_mib  the same, counting only private dirty pages (heap, stacks,
                   relocated data): what each extra VM really costs, since the
                   shared libraries' pages are shared between shims

20 runs each (--runs), medians and p95, printed beside Firecracker's published
anchors, and one JSON object per metric appended to the results file.

usage: bench-shim.py SHIM GUEST RESULTS.jsonl [--runs N]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import append_jsonl, http_unix, percentile, terminate  # noqa: E402

BOOTED = b"vsnap-testguest: booted"
RAM_MIB = 128

ANCHORS = {
    "api_ready_ms": ("Firecracker: API socket up in ~12 ms", 12.0),
    "boot_to_guest_ms": ("(no anchor: test guest, emulated CPL0 here)", None),
    "vmm_overhead_mib": ("Firecracker: VMM overhead < 5 MiB", 5.0),
    "vmm_private_mib": ("Firecracker: VMM overhead < 5 MiB", 5.0),
}
UNITS = {"ms": "ms", "mib": "MiB"}


def http(sock_path, method, endpoint, body=None, timeout=10):
    """A request to /api/v1/<endpoint> without curl. Returns (status, body)."""
    return http_unix(sock_path, method, f"/api/v1/{endpoint}", body, timeout)


def wait_api_ready(sock_path, proc, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, _ = http(sock_path, "GET", "vmm.ping", timeout=1)
            if status == 200:
                return
        except (FileNotFoundError, ConnectionRefusedError, IndexError, ValueError, OSError):
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"shim exited with {proc.returncode} before its API was up")
        if time.monotonic() > deadline:
            raise RuntimeError("API not up after 10 s")
        time.sleep(0.0002)


def wait_serial(path, needle, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path, "rb") as f:
                if needle in f.read():
                    return time.monotonic()
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {needle!r} on the serial port after {timeout} s")
        time.sleep(0.0005)


def rss_overhead_bytes(pid, ram_bytes):
    """(Rss outside guest RAM, private dirty outside guest RAM, guest RAM Rss).
    Guest RAM is the one mapping of exactly the guest's size."""
    total = private = guest = 0
    is_guest = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                start, end = (int(x, 16) for x in line.split()[0].split("-"))
                is_guest = end - start == ram_bytes
            elif line.startswith("Rss:"):
                size = int(line.split()[1]) * 1024
                if is_guest:
                    guest += size
                else:
                    total += size
            elif line.startswith("Private_Dirty:") and not is_guest:
                private += int(line.split()[1]) * 1024
    return total, private, guest


def one_run(shim, guest, workdir):
    sock = os.path.join(workdir, "api.sock")
    serial = os.path.join(workdir, "serial.log")
    for path in (sock, serial):
        if os.path.exists(path):
            os.unlink(path)
    start = time.monotonic()
    proc = subprocess.Popen([shim, "--api-socket", f"path={sock}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_api_ready(sock, proc)
        api_ready = time.monotonic() - start

        # The guest spins when idle, so it is still running when smaps is read.
        config = {"payload": {"kernel": guest, "cmdline": "vsnap.idle_spin=1"},
                  "memory": {"size": RAM_MIB << 20},
                  "serial": {"mode": "File", "file": serial}, "console": {"mode": "Off"}}
        status, body = http(sock, "PUT", "vm.create", config)
        if status != 204:
            raise RuntimeError(f"vm.create: {status} {body!r}")
        boot_start = time.monotonic()
        status, body = http(sock, "PUT", "vm.boot")
        if status != 204:
            raise RuntimeError(f"vm.boot: {status} {body!r}")
        booted = wait_serial(serial, BOOTED) - boot_start

        wait_serial(serial, b"ready sum=")
        time.sleep(0.05)
        overhead, private, guest_rss = rss_overhead_bytes(proc.pid, RAM_MIB << 20)
        if guest_rss == 0:
            with open(serial, errors="replace") as f:
                raise RuntimeError("no guest RAM mapping found in smaps; serial:\n" + f.read())
        return (api_ready * 1000, booted * 1000, overhead / (1 << 20), private / (1 << 20),
                guest_rss)
    finally:
        terminate(proc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shim")
    ap.add_argument("guest")
    ap.add_argument("results")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    # meson passes build paths relative to the build directory.
    args.shim, args.guest = os.path.abspath(args.shim), os.path.abspath(args.guest)
    if os.environ.get("VSNAP_BENCH_SMOKE") == "1":   # one short run (tests/bench/targets.py)
        args.runs = 1

    workdir = tempfile.mkdtemp(prefix="vsnap-bench-shim-")
    samples = {"api_ready_ms": [], "boot_to_guest_ms": [], "vmm_overhead_mib": [],
               "vmm_private_mib": []}
    guest_rss = []
    try:
        one_run(args.shim, args.guest, workdir)  # warm the page cache; not counted
        for _ in range(args.runs):
            *values, g = one_run(args.shim, args.guest, workdir)
            for metric, value in zip(samples, values):
                samples[metric].append(value)
            guest_rss.append(g)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"vsnap-shim foundation benchmark, {args.runs} runs, guest RAM {RAM_MIB} MiB "
          f"(guest RAM touched: median {statistics.median(guest_rss) / (1 << 20):.1f} MiB, "
          "not counted as overhead)")
    print(f"{'metric':<18} {'median':>9} {'p95':>9}  anchor")
    records = []
    for metric, values in samples.items():
        anchor, anchor_value = ANCHORS[metric]
        med, high = statistics.median(values), percentile(values, 95)
        print(f"{metric:<18} {med:>9.2f} {high:>9.2f}  {anchor}")
        records.append({"bench": "shim", "metric": metric, "unit": UNITS[metric.rsplit("_", 1)[1]],
                        "runs": len(values), "median": round(med, 3), "p95": round(high, 3),
                        "min": round(min(values), 3), "max": round(max(values), 3),
                        "anchor": anchor, "anchor_value": anchor_value,
                        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    # Its anchors are Firecracker's published figures, not measured in this
    # run: shown beside the medians, no target judged against them.
    records.append({"bench": "shim", "summary": True, "targets": [],
                    "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    append_jsonl(args.results, records)


if __name__ == "__main__":
    main()
