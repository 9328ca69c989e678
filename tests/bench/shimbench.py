"""What the benchmarks that drive vsnap-shim through its API share: the API
without curl, a restore's body, and a snapshot of a booted test guest.
Importing it puts tests/persist and tests/lib on the path."""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
for folder in ("persist", "lib"):
    sys.path.insert(0, os.path.join(HERE, "..", folder))
from persisttest import ApiShim  # noqa: E402
from vsnaptest import http_unix  # noqa: E402


def http(sock_path, method, endpoint, body=None, timeout=120):
    """A request to /api/v1/<endpoint> without curl (its start-up would dominate
    millisecond timings). Returns (status, parsed body or None)."""
    status, text = http_unix(sock_path, method, f"/api/v1/{endpoint}", body, timeout)
    return status, (json.loads(text) if text.strip() else None)


def must(shim, method, endpoint, body=None):
    status, reply = http(shim.sock, method, endpoint, body)
    if status not in (200, 204):
        raise RuntimeError(f"{endpoint} -> {status} {reply}" + shim.describe())
    return reply


def restore_body(dst, source, mode, body_extra):
    """vm.restore of source into the new shim dst, resumed, with its own
    serial file and vsock socket."""
    body = {"source_url": "file://" + source, "memory_restore_mode": mode, "resume": True,
            "config_overrides": {"serial": {"mode": "File", "file": dst.serial_path},
                                 "vsock": {"socket": dst.vsock_path}}}
    body.update(body_extra)
    return body


def timed_restore(dst, source, mode, body_extra, ready_timeout_ms=120000):
    """vm.restore of source into dst, then the guest's READY: the ms from the
    request to the answer (the vCPUs run) and to READY."""
    body = restore_body(dst, source, mode, body_extra)
    t0 = time.monotonic()
    must(dst, "PUT", "vm.restore", body)
    t1 = time.monotonic()
    must(dst, "GET", f"vm.wait-ready?timeout_ms={ready_timeout_ms}")
    t2 = time.monotonic()
    return (t1 - t0) * 1e3, (t2 - t0) * 1e3


def workset_snapshot(args, workdir):
    """A full snapshot of a guest of args.ram_mib that filled args.fill_mib and
    reads back args.ws_mib of it after each restore (vsnap.ws_mib)."""
    src = ApiShim(args.shim, workdir=workdir, name="src")
    try:
        src.boot(args.guest, f"vsnap.fill_mib={args.fill_mib} vsnap.ws_mib={args.ws_mib} vsnap.seed=7",
                 memory_mib=args.ram_mib)
        src.wait_ready(600)
        snap = os.path.join(workdir, "snap")
        must(src, "PUT", "vm.pause")
        must(src, "PUT", "vm.snapshot", {"destination_url": "file://" + snap})
        return snap
    finally:
        src.close()
