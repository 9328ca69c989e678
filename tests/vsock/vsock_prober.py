#!/usr/bin/python3
"""The polling baseline that pushed readiness is measured against: a host-side
prober that asks the guest "are you there?" over the VM's hybrid vsock socket
until it answers.

One probe = connect to the VM's vsock UNIX socket, "CONNECT <port>\\n",
expect "OK ...", send "PING\\n", expect "PONG". The guest only listens on its
command port once it is ready, so the first successful probe is the moment
the host learns that the guest is ready. Between failed probes the prober
sleeps: a fixed period (500 ms), or adaptively (25 ms, doubling up to 500 ms),
the two strategies a host without a push channel uses.

    vsock_prober.py <vsock socket> [--port 5000] [--mode fixed|adaptive] [--timeout 60]

prints one JSON line: {"mode":..., "probes":N, "observed_ns": <CLOCK_REALTIME>}.
"""

import argparse
import json
import socket
import sys
import time

FIXED_PERIOD_S = 0.5
ADAPTIVE_FIRST_S = 0.025
ADAPTIVE_MAX_S = 0.5


def probe_once(path, port, timeout=2.0):
    """True if the guest answered PONG on port."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(b"CONNECT %d\nPING\n" % port)
        data = b""
        while data.count(b"\n") < 2:
            chunk = s.recv(256)
            if not chunk:
                return False  # refused: closed without OK, or closed before PONG
            data += chunk
        first, second = data.split(b"\n")[:2]
        return first.startswith(b"OK ") and second == b"PONG"
    except OSError:
        return False  # no socket yet (VM still starting), or refused
    finally:
        s.close()


def intervals(mode):
    """Sleep before each retry."""
    if mode == "fixed":
        while True:
            yield FIXED_PERIOD_S
    delay = ADAPTIVE_FIRST_S
    while True:
        yield delay
        delay = min(delay * 2, ADAPTIVE_MAX_S)


def poll_until_ready(path, port=5000, mode="adaptive", timeout=60.0):
    """Probe until the guest answers. Returns (realtime ns when it did, probes)."""
    deadline = time.monotonic() + timeout
    probes = 0
    for pause in intervals(mode):
        probes += 1
        if probe_once(path, port):
            return time.time_ns(), probes
        if time.monotonic() + pause > deadline:
            raise TimeoutError(f"the guest did not answer on port {port} within {timeout} s")
        time.sleep(pause)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("socket")
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--mode", choices=["fixed", "adaptive"], default="adaptive")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    try:
        observed, probes = poll_until_ready(args.socket, args.port, args.mode, args.timeout)
    except TimeoutError as e:
        print(f"vsock_prober: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"mode": args.mode, "probes": probes, "observed_ns": observed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
