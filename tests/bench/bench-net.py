#!/usr/bin/python3
"""virtio-net: UDP echo between a peer network namespace and the test guest
(peer -> veth -> bridge -> tap -> vsnap-shim -> the guest's polled driver and
back) against the same traffic between the peer and a third namespace on
the same bridge through a veth pair (the kernel's own path; the echo there is
tests/lib's vsnap-udp-echo, in C), in one run:

  latency     round trips of one 64-byte datagram at a time: median and p99
  throughput  a window of 32 datagrams of 1472 bytes in flight, every echo
              checked, MiB/s each way

Ratios: guest/veth throughput, guest/veth latency (median over median, p99
over p99). Offloads (checksum, TSO) are not offered
by the device yet, so there is nothing to compare them with: every frame
crosses the tap whole and checksummed.

One JSON line per path and a summary line go to the results file.

usage: bench-net.py SHIM GUEST RESULTS.jsonl --echo VSNAP-UDP-ECHO [--rounds N] [--mib N]
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
from nettest import (GUEST_IP, MIB, Fail, NetShim, Network, check, guest_cmdline, ping_until,  # noqa: E402
                     udp_echo_once, udp_stream, vm_config, workdir)
from vsnaptest import append_jsonl, percentile  # noqa: E402



def latency(sock, dest, rounds):
    rtts = []
    for n in range(rounds):
        rtt = udp_echo_once(sock, dest, b"%08d" % n + b"x" * 56, timeout=1.0)
        if rtt is not None:
            rtts.append(rtt * 1e6)
    check(len(rtts) >= rounds * 0.95, f"{dest}: only {len(rtts)} of {rounds} round trips came back")
    return {"rounds": rounds, "answered": len(rtts), "median_us": statistics.median(rtts),
            "p99_us": percentile(rtts, 99)}


def throughput(sock, dest, mib):
    seconds, echoed, expected, sent = udp_stream(sock, dest, mib * MIB, timeout=300)
    check(echoed == expected, f"{dest}: the echoed stream differs from the sent one")
    return {"mib": mib, "seconds": seconds, "mib_per_s": mib / seconds, "datagrams_sent": sent}


def measure(net, dest, args):
    sock = net.peer_socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    check(udp_echo_once(sock, dest, b"warm-up", timeout=5) is not None, f"{dest} does not echo")
    row = {"latency": latency(sock, dest, args.rounds), "throughput": throughput(sock, dest, args.mib)}
    sock.close()
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shim")
    parser.add_argument("guest")
    parser.add_argument("results")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--echo", required=True, help="vsnap-udp-echo (tests/lib)")
    args = parser.parse_args()
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
            with NetShim(args.shim, net, wd) as shim:
                mac = "52:54:00:12:34:56"
                shim.ok("PUT", "vm.create", vm_config(args.guest, shim, guest_cmdline(mac),
                                                      [{"id": "net0", "tap": "tap0", "mac": mac}]))
                shim.ok("PUT", "vm.boot")
                shim.ok("GET", "vm.wait-ready?timeout_ms=30000", timeout=40)
                check(ping_until(net.peer_socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
                                 GUEST_IP, 20) is not None, "the guest does not answer")
                # Interleaved, so a change of load on this shared host hits both.
                veth = measure(net, echo_ip, args)
                guest = measure(net, GUEST_IP, args)
                counters = shim.counters("net0")
    finally:
        if echo:
            echo.kill()
            echo.wait()
        shutil.rmtree(wd, ignore_errors=True)
    now = time.time()
    rows = [dict({"benchmark": "net", "path": "guest", "host": os.uname().nodename, "time": now}, **guest,
                 counters=counters),
            dict({"benchmark": "net", "path": "veth", "host": os.uname().nodename, "time": now}, **veth)]
    summary = {"benchmark": "net", "summary": True,
               "throughput_guest_over_veth": guest["throughput"]["mib_per_s"] / veth["throughput"]["mib_per_s"],
               "latency_median_guest_over_veth": guest["latency"]["median_us"] / veth["latency"]["median_us"],
               "latency_p99_guest_over_veth": guest["latency"]["p99_us"] / veth["latency"]["p99_us"],
               "guest": {"mib_per_s": guest["throughput"]["mib_per_s"], "median_us": guest["latency"]["median_us"],
                         "p99_us": guest["latency"]["p99_us"]},
               "veth": {"mib_per_s": veth["throughput"]["mib_per_s"], "median_us": veth["latency"]["median_us"],
                        "p99_us": veth["latency"]["p99_us"]},
               "offloads": "none offered by the device yet: no comparison",
               "host": os.uname().nodename, "time": now}
    append_jsonl(args.results, rows + [summary])
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    try:
        main()
    except Fail as e:
        print(f"bench-net: {e}")
        sys.exit(1)
