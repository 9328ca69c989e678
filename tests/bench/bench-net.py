#!/usr/bin/python3
"""virtio-net: UDP echo between a peer network namespace and the test guest
(peer -> veth -> bridge -> tap -> vsnap-shim -> the guest's polled driver and
back) against the same traffic between the peer and a third namespace on
the same bridge through a veth pair (the kernel's own path; the echo there is
tests/lib's vsnap-udp-echo, in C), in one run:

  latency     round trips of one 64-byte datagram at a time: median and p99
  throughput  a window of 32 datagrams of 1472 bytes in flight, every echo
              checked, MiB/s each way

Both sides of the reference are C (tests/lib's vsnap-udp-bench in the peer
namespace, vsnap-udp-echo in the third), so neither path measures Python.

Ratios: guest/veth throughput, guest/veth latency (median over median, p99
over p99), and checksum offload on/off: a second guest with
"offload_csum": false (frames cross the tap whole and checksummed) beside the
default one (VIRTIO_NET_F_CSUM and _GUEST_CSUM: the UDP checksum is left to
whoever needs it). Segmentation offload (TSO) is not offered: the test guest
speaks UDP only.

One JSON line per path and a summary line go to the results file.

usage: bench-net.py SHIM GUEST RESULTS.jsonl --echo VSNAP-UDP-ECHO --client VSNAP-UDP-BENCH
                    [--rounds N] [--mib N] [--runs N]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "net"))
from nettest import (GUEST_IP, Fail, NetShim, Network, check, guest_cmdline, ping_until,  # noqa: E402
                     udp_echo_once, vm_config, workdir)
from vsnaptest import append_jsonl  # noqa: E402

PLAIN_IP = "10.77.0.4"  # the guest without checksum offload



def client(net, args, *argv):
    """vsnap-udp-bench in the peer namespace: its JSON answer."""
    res = subprocess.run(["ip", "netns", "exec", net.peer, args.client, *map(str, argv)], capture_output=True,
                         text=True, timeout=600)
    check(res.returncode == 0, f"vsnap-udp-bench {' '.join(map(str, argv))}: {res.stderr.strip()}")
    return json.loads(res.stdout)


def measure(net, dest, args):
    sock = net.peer_socket(socket.AF_INET, socket.SOCK_DGRAM)
    check(udp_echo_once(sock, dest, b"warm-up", timeout=5) is not None, f"{dest} does not echo")
    sock.close()
    lat = client(net, args, "latency", dest, args.rounds)
    check(lat["answered"] >= args.rounds * 0.95, f"{dest}: only {lat['answered']} of {args.rounds} round trips")
    return {"latency": lat, "throughput": client(net, args, "stream", dest, args.mib, 1472, 32)}



def medians(rows):
    """The median of each figure over runs of measure()."""
    return {"runs": len(rows),
            "latency": {k: statistics.median(r["latency"][k] for r in rows) for k in ("median_us", "p99_us")},
            "throughput": {"mib_per_s": statistics.median(r["throughput"]["mib_per_s"] for r in rows),
                           "mib": rows[0]["throughput"]["mib"]}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shim")
    parser.add_argument("guest")
    parser.add_argument("results")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--echo", required=True, help="vsnap-udp-echo (tests/lib)")
    parser.add_argument("--client", required=True, help="vsnap-udp-bench (tests/lib)")
    args = parser.parse_args()
    if os.environ.get("VSNAP_BENCH_SMOKE") == "1":   # one short run (tests/bench/targets.py)
        args.rounds, args.runs, args.mib = 200, 1, 4
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("bench-net needs root and iproute2 (network namespaces): skipped")
        sys.exit(77)
    wd = workdir()
    echo = None
    try:
        with Network("bench") as net:
            echo_ip = net.add_echo_namespace()
            echo = subprocess.Popen(["ip", "netns", "exec", net.echo, args.echo])
            net.add_tap("tap0")
            net.add_tap("tap1")
            with NetShim(args.shim, net, wd, "csum") as csum, NetShim(args.shim, net, wd, "plain") as plain:
                for shim, tap, ip, offload in ((csum, "tap0", GUEST_IP, True), (plain, "tap1", PLAIN_IP, False)):
                    mac = "52:54:00:12:34:%02x" % (0x56 + offload)
                    shim.ok("PUT", "vm.create", vm_config(args.guest, shim, guest_cmdline(mac, ip),
                                                          [{"id": "net0", "tap": tap, "mac": mac,
                                                            "offload_csum": offload}]))
                    shim.ok("PUT", "vm.boot")
                    shim.ok("GET", "vm.wait-ready?timeout_ms=30000", timeout=40)
                    check(ping_until(net.peer_socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
                                     ip, 20) is not None, f"the guest at {ip} does not answer")
                # Interleaved, so a change of load on this shared host hits all
                # three; each figure is the median of --runs.
                runs = {"veth": [], "guest": [], "plain": []}
                for _ in range(args.runs):
                    runs["veth"].append(measure(net, echo_ip, args))
                    runs["guest"].append(measure(net, GUEST_IP, args))
                    runs["plain"].append(measure(net, PLAIN_IP, args))
                veth, guest, guest_plain = (medians(runs[k]) for k in ("veth", "guest", "plain"))
                counters = csum.counters("net0")
    finally:
        if echo:
            echo.kill()
            echo.wait()
        shutil.rmtree(wd, ignore_errors=True)
    now = time.time()
    rows = [dict({"benchmark": "net", "path": "guest", "host": os.uname().nodename, "time": now}, **guest,
                 counters=counters),
            dict({"benchmark": "net", "path": "guest-no-csum-offload", "host": os.uname().nodename, "time": now},
                 **guest_plain),
            dict({"benchmark": "net", "path": "veth", "host": os.uname().nodename, "time": now}, **veth)]
    summary = {"benchmark": "net", "summary": True,
               "throughput_guest_over_veth": guest["throughput"]["mib_per_s"] / veth["throughput"]["mib_per_s"],
               "latency_median_guest_over_veth": guest["latency"]["median_us"] / veth["latency"]["median_us"],
               "latency_p99_guest_over_veth": guest["latency"]["p99_us"] / veth["latency"]["p99_us"],
               "guest": {"mib_per_s": guest["throughput"]["mib_per_s"], "median_us": guest["latency"]["median_us"],
                         "p99_us": guest["latency"]["p99_us"]},
               "veth": {"mib_per_s": veth["throughput"]["mib_per_s"], "median_us": veth["latency"]["median_us"],
                        "p99_us": veth["latency"]["p99_us"]},
               "csum_offload": {
                   "throughput_on_over_off": guest["throughput"]["mib_per_s"] /
                   guest_plain["throughput"]["mib_per_s"],
                   "latency_median_on_over_off": guest["latency"]["median_us"] / guest_plain["latency"]["median_us"],
                   "off": {"mib_per_s": guest_plain["throughput"]["mib_per_s"],
                           "median_us": guest_plain["latency"]["median_us"],
                           "p99_us": guest_plain["latency"]["p99_us"]}},
               "tso": "not offered (the test guest speaks UDP only; segmentation offload helps TCP)",
               # issue 13 sets no target: the veth path is the limit, reported as ratios
               "targets": [], "host": os.uname().nodename, "time": now}
    append_jsonl(args.results, rows + [summary])
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    try:
        main()
    except Fail as e:
        print(f"bench-net: {e}")
        sys.exit(1)
