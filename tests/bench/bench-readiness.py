#!/usr/bin/python3
"""Cold spawn to host-observed readiness: pushed READY vs polling.

    bench-readiness.py <vsnap-shim> <vsnap-testguest> <vsock_prober.py dir> <results.jsonl>
                       [--runs 20] [--delays 0,100,800]

For each guest start-up delay (vsnap.delay_ms) and each way of learning that
the guest is ready, a fresh shim is spawned and the clock runs from just
before the spawn to the instant this process knows the guest is ready:

  push      GET vm.wait-ready on an API socket this process created and handed
            to the shim (--api-socket fd=N), so the request is queued before
            the shim even runs: nothing is polled, the answer is the push.
  fixed     the prober: PING the guest's command port every 500 ms.
  adaptive  the prober: PING after 25 ms, doubling up to 500 ms.

Detection lag = host-observed instant - the instant the shim received the
guest's READY (its ready_ns, same host clock). The guest starts listening on
its command port right as it sends READY, so the lag is fair for all three.

Appends one JSON line per (mode, delay) and one summary line per delay
(ratio push/adaptive) to results.jsonl, and prints them.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import append_jsonl, http_exchange, http_unix, percentile, terminate  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from targets import at_most, smoke, summary_status  # noqa: E402

MODES = ("push", "fixed", "adaptive")


def api_get(listener_path, target):
    status, body = http_unix(listener_path, "GET", target, timeout=30)
    return status, body.decode()


class Run:
    """One cold spawn of the shim with the test guest."""

    def __init__(self, shim, guest, delay_ms):
        self.dir = tempfile.mkdtemp(prefix="vsnap-bench-ready-")
        self.vsock = os.path.join(self.dir, "vsock.sock")
        self.api_path = os.path.join(self.dir, "api.sock")
        # The API socket exists before the shim does: clients connect at once.
        self.api = socket.socket(socket.AF_UNIX)
        self.api.bind(self.api_path)
        self.api.listen(8)
        self.argv = [shim, "--kernel", guest, "--cmdline", f"console=ttyS0 vsnap.delay_ms={delay_ms}",
                     "--memory", "size=256M", "--cpus", "boot=1", "--serial", "null",
                     "--console", "off", "--vsock", f"cid=3,socket={self.vsock}",
                     "--api-socket", f"fd={self.api.fileno()}"]
        self.proc = None

    def spawn(self):
        self.start_ns = time.time_ns()
        self.proc = subprocess.Popen(self.argv, pass_fds=[self.api.fileno()],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(self.dir, "shim.log"), "wb"))

    def ready_info(self):
        """The shim's record of the guest's READY (after readiness)."""
        status, body = api_get(self.api_path, "/api/v1/vm.wait-ready?timeout_ms=10000")
        if status != 200:
            raise RuntimeError(f"wait-ready answered {status}: {body}")
        return json.loads(body)

    def close(self):
        if self.proc and self.proc.poll() is None:
            terminate(self.proc)
        self.api.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def measure(shim, guest, delay_ms, mode, prober):
    run = Run(shim, guest, delay_ms)
    try:
        if mode == "push":
            client = socket.socket(socket.AF_UNIX)
            client.settimeout(60)
            client.connect(run.api_path)  # queued on our listening socket
            run.spawn()
            status, body = http_exchange(client, "GET", "/api/v1/vm.wait-ready?timeout_ms=60000")
            observed_ns = time.time_ns()
            client.close()
            if status != 200:
                raise RuntimeError(f"wait-ready answered {status}: {body}")
            probes = 0
        else:
            run.spawn()
            observed_ns, probes = prober.poll_until_ready(run.vsock, 5000, mode, timeout=60)
        info = run.ready_info()
        return {
            "spawn_to_observed_ms": (observed_ns - run.start_ns) / 1e6,
            "spawn_to_guest_ready_ms": (info["ready_ns"] - run.start_ns) / 1e6,
            "lag_ms": (observed_ns - info["ready_ns"]) / 1e6,
            "probes": probes,
        }
    finally:
        run.close()


def summarize(mode, delay_ms, samples):
    obs = [s["spawn_to_observed_ms"] for s in samples]
    lag = [s["lag_ms"] for s in samples]
    return {
        "bench": "readiness", "mode": mode, "delay_ms": delay_ms, "runs": len(samples),
        "spawn_to_observed_ms_median": round(statistics.median(obs), 3),
        "spawn_to_observed_ms_p95": round(percentile(obs, 95), 3),
        "lag_ms_median": round(statistics.median(lag), 3),
        "lag_ms_p95": round(percentile(lag, 95), 3),
        "guest_ready_ms_median": round(statistics.median(s["spawn_to_guest_ready_ms"] for s in samples), 3),
        "probes_median": statistics.median(s["probes"] for s in samples),
    }


def readiness_targets(delay_ms, push, adaptive):
    """Issue 3's targets: push lag under 1 ms (against the guest's READY
    instant the shim recorded, same run), and at delay 800 push/adaptive no
    worse than the published 0.83 s vs 1.53 s."""
    out = [at_most(f"push_lag_ms_median_delay{delay_ms}", push["lag_ms_median"], 1.0,
                   "the shim's record of the guest's READY (ready_ns), same run", "ms")]
    if delay_ms == 800:
        ratio = push["spawn_to_observed_ms_median"] / adaptive["spawn_to_observed_ms_median"]
        # The adaptive poller probes at 25, 75, 175, 375, 775, 1275 ms: a guest
        # ready at ~850 ms is seen at 1275 ms, whatever the push path does.
        bound = push["guest_ready_ms_median"] / 1275
        out.append(at_most("push_over_adaptive_delay800", ratio, 0.54,
                           f"adaptive polling of the same guest, same run = "
                           f"{adaptive['spawn_to_observed_ms_median']:.0f} ms (published pair 0.83 s / 1.53 s)", "x",
                           cannot=(f"the adaptive schedule's probe at 1275 ms sees a guest ready at "
                                   f"{push['guest_ready_ms_median']:.0f} ms, so push/adaptive >= {bound:.2f} "
                                   f"while the push lag is {push['lag_ms_median']:.2f} ms; the published 1.53 s "
                                   "came from a longer back-off" if bound > 0.54 else None)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shim")
    ap.add_argument("guest")
    ap.add_argument("prober_dir")
    ap.add_argument("results")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--delays", default="0,100,800")
    args = ap.parse_args()
    # meson passes build paths relative to the build directory.
    args.shim, args.guest = os.path.abspath(args.shim), os.path.abspath(args.guest)
    if smoke():
        args.runs, args.delays = 1, "0"
    sys.path.insert(0, args.prober_dir)
    import vsock_prober as prober

    lines = []
    for delay_ms in [int(d) for d in args.delays.split(",")]:
        # Modes take turns run by run, so load from elsewhere on this shared
        # machine lands on all three alike rather than on one block of runs.
        samples = {mode: [] for mode in MODES}
        for _ in range(args.runs):
            for mode in MODES:
                samples[mode].append(measure(args.shim, args.guest, delay_ms, mode, prober))
        by_mode = {}
        for mode in MODES:
            by_mode[mode] = summarize(mode, delay_ms, samples[mode])
            lines.append(by_mode[mode])
            print(json.dumps(by_mode[mode]), flush=True)
        push, adaptive = by_mode["push"], by_mode["adaptive"]
        summary = {
            "bench": "readiness-ratio", "delay_ms": delay_ms, "runs": args.runs,
            "push_over_adaptive": round(push["spawn_to_observed_ms_median"] /
                                        adaptive["spawn_to_observed_ms_median"], 3),
            "push_over_fixed": round(push["spawn_to_observed_ms_median"] /
                                     by_mode["fixed"]["spawn_to_observed_ms_median"], 3),
            "push_lag_ms_median": push["lag_ms_median"],
        }
        summary["targets"] = readiness_targets(delay_ms, push, adaptive)
        summary["target_status"] = summary_status(summary["targets"])
        lines.append(summary)
        print(json.dumps(summary), flush=True)
    append_jsonl(args.results, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
