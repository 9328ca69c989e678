#!/usr/bin/python3
"""virtio-vsock end to end: the real vsnap-shim on KVM, the test guest's polled
driver, the hybrid UNIX socket.

    test_vsock.py <vsnap-shim> <vsnap-testguest> <vsock-stream> <vsnap-pattern> <lib dir> <case>

Each case boots its own VM (a few hundred ms) so the cases are independent and
meson can run them in parallel.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SHIM, GUEST, STREAM, PATTERN, LIBDIR, CASE = sys.argv[1:7]
sys.path.insert(0, LIBDIR)
from vsnaptest import (CMD_PORT, CommandConn, Fail, Shim, ShimError, check,  # noqa: E402
                       http_exchange, pattern_checksum, wait_command_port)

READY_PORT = 1024
MIB = 1 << 20


# --- helpers ----------------------------------------------------------------

def vsock_shim(delay_ms=0, api=True, extra_cmdline="", readiness_port=None, workdir=None):
    """A shim with the test guest and a vsock device; returns (Shim, socket path)."""
    shim = Shim(SHIM, GUEST, cmdline=f"console=ttyS0 vsnap.delay_ms={delay_ms} {extra_cmdline}",
                memory="256M", api=api, workdir=workdir)
    path = os.path.join(shim.workdir, "vsock.sock")
    spec = f"cid=3,socket={path}"
    if readiness_port:
        spec += f",readiness_port={readiness_port}"
    shim.argv += ["--vsock", spec]
    return shim, path


class Conn(CommandConn):
    """A command connection whose CONNECT answer the cases check as .ok."""

    def __init__(self, path, port=CMD_PORT, timeout=5):
        super().__init__(path, port, timeout)
        self.ok = self.connect_reply


def wait_guest_serving(path, timeout=20):
    """Until the guest listens on its command port (it does once ready)."""
    return wait_command_port(path, timeout, conn_class=Conn)


def http_get_unix(sock_path, target, timeout):
    """GET over the API socket without a subprocess, so the return instant is
    measured in this process. Returns (status, body, realtime ns at return)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        status, body = http_exchange(s, "GET", target)
        return status, body.decode(), time.time_ns()
    finally:
        s.close()


def counters(shim):
    status, body = shim.api("GET", "vm.counters")
    check(status == 200, f"vm.counters answered {status}")
    return body.get("vsock", {})


def wait_open_connections(shim, want, timeout=5):
    deadline = time.monotonic() + timeout
    while True:
        got = counters(shim).get("open_connections")
        if got == want:
            return
        if time.monotonic() > deadline:
            raise Fail(f"open vsock connections stayed at {got}, expected {want}")
        time.sleep(0.05)


def run_stream(*args, timeout=120):
    res = subprocess.run([STREAM, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise Fail(f"vsock-stream {' '.join(map(str, args))}: {res.stderr.strip()}")
    print(res.stdout.strip())
    return json.loads(res.stdout)


# --- cases ------------------------------------------------------------------

def readiness_lag_ms():
    """Boot a VM, long-poll wait-ready, return how long after the shim received
    READY (its ready_ns) the answer reached this process."""
    shim, _ = vsock_shim(delay_ms=300)
    events_path = os.path.join(shim.workdir, "events.jsonl")
    shim.argv += ["--event-monitor", f"path={events_path}"]
    with shim:
        status, body, returned = http_get_unix(shim.api_socket, "/api/v1/vm.wait-ready?timeout_ms=20000", 25)
        check(status == 200, f"wait-ready answered {status}: {body}")
        info = json.loads(body)
        check(info.get("ready") is True and info.get("generation") == 0, f"ready info {info}")
        check(re.fullmatch(r"[0-9a-f]{16}", info.get("boot_id", "")), f"boot_id in {info}")
        check(info.get("port") == READY_PORT and info["guest"].get("cid") == 3, f"ready info {info}")
        shim.wait_for_serial(r"readiness acknowledged generation=0", timeout=5)
        # Already ready: a second wait answers at once with the same announcement.
        status, body, _ = http_get_unix(shim.api_socket, "/api/v1/vm.wait-ready?timeout_ms=1000", 5)
        check(status == 200 and json.loads(body)["boot_id"] == info["boot_id"], f"second wait: {status} {body}")
        status, vm_info = shim.api("GET", "vm.info")
        vsnap = vm_info.get("vsnap", {}) if status == 200 else {}
        # The readiness object sits in "vsnap" itself or in "vsnap.ready".
        shown = vsnap.get("ready") if isinstance(vsnap.get("ready"), dict) else vsnap
        check(shown.get("boot_id") == info["boot_id"] and shown.get("generation") == 0,
              f"vm.info has no matching vsnap readiness: {vm_info}")
        # The event monitor got {"source":"guest","event":"ready",...} too.
        deadline = time.monotonic() + 5
        while True:
            with open(events_path) as f:
                events = [json.loads(l) for l in f if l.strip()]
            if any(e.get("source") == "guest" and e.get("event") == "ready" for e in events):
                break
            check(time.monotonic() < deadline, f"no guest ready event in {events}")
            time.sleep(0.02)
        return (returned - info["ready_ns"]) / 1e6


def case_readiness():
    """READY is pushed: wait-ready answers within 5 ms of the shim seeing it.
    The machine running the suite is shared by parallel tests (2 cores), so a
    single scheduling hiccup is forgiven: the best of three boots counts."""
    # Under ASan/UBSan (scripts/test.sh's second run) every shim call is several
    # times slower; the 5 ms promise is checked by the plain build's run.
    limit = 50 if os.environ.get("VSNAP_SANITIZED") else 5
    lags = []
    for _ in range(3):
        lags.append(readiness_lag_ms())
        print(f"wait-ready returned {lags[-1]:.3f} ms after the shim received READY")
        if lags[-1] < limit:
            break
    check(0 <= min(lags) < limit, f"wait-ready lags {lags} ms after READY (limit {limit} ms)")


def case_never_ready():
    """A guest that is not ready in time: wait-ready gives 504 with a reason."""
    shim, _ = vsock_shim(delay_ms=60000)
    with shim:
        shim.wait_for_serial(r"vsock cid=3", timeout=20)
        start = time.monotonic()
        status, body, _ = http_get_unix(shim.api_socket, "/api/v1/vm.wait-ready?timeout_ms=300", 10)
        took = time.monotonic() - start
        check(status == 504, f"wait-ready of a guest that is not ready answered {status}: {body}")
        check(len(body.strip()) > 0, "504 without a body")
        check(0.25 < took < 3, f"the 300 ms wait took {took:.3f} s")


def case_custom_readiness_port():
    shim, _ = vsock_shim(readiness_port=1100, extra_cmdline="vsnap.ready_port=1100")
    with shim:
        status, body, _ = http_get_unix(shim.api_socket, "/api/v1/vm.wait-ready?timeout_ms=20000", 25)
        check(status == 200 and json.loads(body)["port"] == 1100, f"wait-ready: {status} {body}")


def case_host_initiated():
    shim, path = vsock_shim()
    with shim:
        c = wait_guest_serving(path)
        m = re.fullmatch(r"OK (\d+)", c.ok)
        check(m and int(m.group(1)) >= 1 << 30, f"CONNECT answered {c.ok!r}")
        check(c.cmd("PING") == "PONG", "PING")
        base, length, seed = 16 * MIB, 4 * MIB, 7
        check(c.cmd(f"FILL {base:#x} {length} {seed}") == "OK", "FILL")
        want = pattern_checksum(PATTERN, seed, length)
        check(c.cmd(f"SUM {base:#x} {length}") == f"SUM {want}", "SUM after FILL")
        check(c.cmd(f"TOUCH {base} {length}") == "OK", "TOUCH")
        check(c.cmd(f"ZERO {base} {length}") == "OK", "ZERO")
        zero = pattern_checksum(PATTERN, 0, 0)
        check(c.cmd(f"SUM {base} 0") == f"SUM {zero}", "SUM of nothing")
        check(c.cmd("FILL 0x1000 8 1").startswith("ERR "), "FILL over the guest itself must fail")
        check(c.cmd("NOPE").startswith("ERR "), "unknown command")
        check(c.cmd("PING") == "PONG", "PING after errors")
        # Bytes sent right behind the CONNECT line belong to the stream.
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(path)
        s.sendall(b"CONNECT 5000\nPING\n")
        data = b""
        while data.count(b"\n") < 2:
            data += s.recv(100)
        check(re.fullmatch(rb"OK \d+\nPONG\n", data), f"pipelined CONNECT+PING gave {data!r}")
        s.close()


def case_halt():
    """HALT answers OK, then the guest powers off through ACPI S5."""
    shim, path = vsock_shim()
    with shim:
        c = wait_guest_serving(path)
        check(c.cmd("HALT") == "OK", "HALT")
        shim.wait_for_serial(r"HALT command, powering off", timeout=5)
        deadline = time.monotonic() + 10
        while True:
            status, info = shim.api("GET", "vm.info") if shim.proc.poll() is None else (0, None)
            if shim.proc.poll() is not None or (status == 200 and info.get("state") != "Running"):
                break
            check(time.monotonic() < deadline, f"the VM still runs 10 s after HALT: {info}")
            time.sleep(0.05)
        if shim.proc.poll() is None:
            reason = info.get("vsnap", {}).get("last_stop_reason")
            check(reason == "poweroff", f"stop reason after HALT: {reason} ({info})")


def case_reboot():
    """vm.reboot rebuilds the device: the socket is bound again and the new
    boot announces itself (new boot_id)."""
    shim, path = vsock_shim()
    with shim:
        status, body, _ = http_get_unix(shim.api_socket, "/api/v1/vm.wait-ready?timeout_ms=20000", 25)
        check(status == 200, f"wait-ready answered {status}: {body}")
        first = json.loads(body)
        status, reply = shim.api("PUT", "vm.reboot")
        check(status in (200, 204), f"vm.reboot answered {status}: {reply}")
        status, body, _ = http_get_unix(shim.api_socket, "/api/v1/vm.wait-ready?timeout_ms=20000", 25)
        check(status == 200, f"wait-ready after reboot answered {status}: {body}")
        second = json.loads(body)
        check(second["boot_id"] != first["boot_id"], f"same boot_id after a reboot: {second}")
        c = wait_guest_serving(path)
        check(c.cmd("PING") == "PONG", "PING after the reboot")


def case_guest_initiated():
    shim, path = vsock_shim()
    with shim:
        wait_guest_serving(path).close()
        run_stream("dial", path, CMD_PORT, 6000, 8192, 1, 2)


def case_data_64mib():
    """64 MiB both ways, checked: host-initiated echo and a guest-initiated stream."""
    shim, path = vsock_shim()
    with shim:
        wait_guest_serving(path).close()
        run_stream("echo", path, CMD_PORT, 1, 64 * MIB, 7)
        run_stream("dial", path, CMD_PORT, 6000, 64 * MIB, 3, 4)
        # Everything the device wrote into guest RAM went through vm_mark_dirty;
        # the stream checksums above show the data itself arrived intact.


def case_send_and_close():
    """The guest sends and closes at once while the host reads late and slowly:
    what the shim still holds when the close arrives is delivered all the same."""
    shim, path = vsock_shim()
    with shim:
        wait_guest_serving(path).close()
        run_stream("send", path, CMD_PORT, 6002, 4 * MIB, 21)
        run_stream("send", path, CMD_PORT, 6002, 8 * MIB + 8, 22)


def case_many_connections():
    """32 connections open at once, interleaved commands, then 32 parallel echoes."""
    shim, path = vsock_shim()
    with shim:
        wait_guest_serving(path).close()
        conns = [Conn(path) for _ in range(32)]
        for c in conns:
            check(c.ok.startswith("OK "), f"CONNECT answered {c.ok!r}")
        ports = {c.ok for c in conns}
        check(len(ports) == 32, "host ports of simultaneous connections must differ")
        for c in conns:
            c.sock.sendall(b"PING\n")
        for c in conns:
            check(c.line() == "PONG", "PONG on one of 32 connections")
        for c in conns:
            c.close()
        run_stream("echo", path, CMD_PORT, 32, 1 * MIB, 100)


def case_peer_closes():
    """The host side vanishes mid-transfer, both directions; the guest goes on."""
    shim, path = vsock_shim()
    with shim:
        cmd = wait_guest_serving(path)
        base = counters(shim)["open_connections"]  # readiness + this one
        # Host-initiated: 8 MiB into an echo, never reading, then close.
        c = Conn(path)
        check(c.cmd("ECHO") == "OK", "ECHO")
        c.sock.setblocking(False)
        sent = 0
        chunk = b"\x5a" * 65536
        last_progress = time.monotonic()
        # Until 8 MiB went out or the stream stalled (the echo is not read).
        while sent < 8 * MIB and time.monotonic() - last_progress < 0.3:
            try:
                sent += c.sock.send(chunk)
                last_progress = time.monotonic()
            except BlockingIOError:
                time.sleep(0.001)
        c.sock.close()
        print(f"closed an echo after sending {sent} bytes without reading")
        # Guest-initiated: the host accepts, reads 1 MiB, closes.
        lpath = f"{path}_6001"
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(lpath)
        listener.listen(1)
        listener.settimeout(5)
        cmd.sock.sendall(b"DIAL 6001 67108864 5\n")
        peer, _ = listener.accept()
        got = 0
        while got < MIB:
            got += len(peer.recv(65536))
        peer.close()
        answer = cmd.line()
        print(f"guest after the host closed its dial: {answer}")
        check(answer.startswith("DIALED ") or answer.startswith("ERR "), f"DIAL answered {answer!r}")
        check(cmd.cmd("PING") == "PONG", "PING after both closes")
        wait_open_connections(shim, base)
        c2 = Conn(path)
        check(c2.cmd("PING") == "PONG", "a new connection after the closes")


def case_refused():
    shim, path = vsock_shim()
    with shim:
        cmd = wait_guest_serving(path)
        # Guest connects to a host port where nobody listens: RST, guest survives.
        answer = cmd.cmd("DIAL 7777 8 1")
        check(answer.startswith("ERR "), f"DIAL to nobody answered {answer!r}")
        check(cmd.cmd("PING") == "PONG", "PING after the refused DIAL")
        # Host connects to a guest port nobody listens on: closed, no OK, within 1 s.
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        s.connect(path)
        start = time.monotonic()
        s.sendall(b"CONNECT 4444\n")
        data = s.recv(100)
        took = time.monotonic() - start
        check(data == b"", f"CONNECT to a closed guest port answered {data!r}")
        check(took < 1.0, f"closing took {took:.3f} s (limit 1 s)")
        print(f"CONNECT to a closed guest port: closed after {took * 1000:.1f} ms")
        check(cmd.cmd("PING") == "PONG", "PING after the refused CONNECT")


def case_unanswered_connect():
    """A guest that does not answer (paused here) does not hold a CONNECT
    forever: the shim gives up after its 2 s connect timeout."""
    shim, path = vsock_shim()
    with shim:
        wait_guest_serving(path).close()
        status, reply = shim.api("PUT", "vm.pause")
        check(status in (200, 204), f"vm.pause answered {status}: {reply}")
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(6)
        s.connect(path)
        start = time.monotonic()
        s.sendall(b"CONNECT 5000\n")
        data = s.recv(100)
        took = time.monotonic() - start
        check(data == b"", f"CONNECT to a paused guest answered {data!r}")
        check(1.5 < took < 3.5, f"the unanswered CONNECT was closed after {took:.2f} s, expected ~2 s")
        status, reply = shim.api("PUT", "vm.resume")
        check(status in (200, 204), f"vm.resume answered {status}: {reply}")
        c = wait_guest_serving(path)
        check(c.cmd("PING") == "PONG", "PING after resume")


def case_malformed_connect():
    shim, path = vsock_shim()
    with shim:
        wait_guest_serving(path).close()
        bad = [b"HELLO\n", b"CONNECT\n", b"CONNECT \n", b"CONNECT abc\n", b"CONNECT -1\n",
               b"CONNECT 99999999999\n", b"connect 5000\n", b"CONNECT 5000 6000\n",
               b"\x00\xff\xfe\n", b"X" * 100]
        for line in bad:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(7)
            s.connect(path)
            s.sendall(line)
            data = b""
            while True:
                chunk = s.recv(200)
                if not chunk:
                    break
                data += chunk
            s.close()
            check(data.startswith(b"ERR "), f"{line[:20]!r} answered {data!r}, expected ERR then close")
        # A client that connects and says nothing does not block others.
        idle = socket.socket(socket.AF_UNIX)
        idle.connect(path)
        c = Conn(path)
        check(c.cmd("PING") == "PONG", "the socket still serves after malformed lines")
        idle.close()


def case_socket_lifecycle():
    # A stale socket file (its listener died) is replaced at bind.
    shim, path = vsock_shim(api=False)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()
    check(os.path.exists(path), "the stale socket file exists")
    with shim:
        c = wait_guest_serving(path)
        check(c.cmd("PING") == "PONG", "PING over a replaced stale socket")
        c.close()
        # Unlinked on exit (SIGTERM is a clean shutdown).
        shim.proc.send_signal(signal.SIGTERM)
        rc = shim.wait_exit(10)
        check(not os.path.exists(path), f"socket still there after the shim exited ({rc})")
    # A socket a live process listens on is not stolen.
    shim, path = vsock_shim(api=False)
    live = socket.socket(socket.AF_UNIX)
    live.bind(path)
    live.listen(1)
    with shim:
        rc = shim.wait_exit(10)
        check(rc != 0 and "in use" in shim.shim_output(), f"live socket: rc={rc} {shim.shim_output()}")
    live.close()
    # Nor is a file that is not a socket removed.
    shim, path = vsock_shim(api=False)
    with open(path, "w") as f:
        f.write("keep me")
    with shim:
        rc = shim.wait_exit(10)
        check(rc != 0 and "not a socket" in shim.shim_output(), f"regular file: rc={rc} {shim.shim_output()}")
        check(open(path).read() == "keep me", "the regular file was touched")


def case_malformed_packets():
    """Garbage from the guest driver: the device answers or drops each packet,
    the VM and every other connection go on."""
    shim, path = vsock_shim()
    with shim:
        cmd = wait_guest_serving(path)
        for _ in range(3):
            answer = cmd.cmd("BADPKT")
            check(answer == "OK 8", f"BADPKT answered {answer!r}")
        check(cmd.cmd("PING") == "PONG", "PING after malformed packets")
        c = Conn(path)
        check(c.cmd("PING") == "PONG", "a new connection after malformed packets")
        run_stream("echo", path, CMD_PORT, 2, MIB, 9)
        # Short header, bad length, buffer outside RAM, empty buffer: 4 per batch.
        errors = counters(shim).get("guest_errors")
        check(errors == 12, f"vm.counters vsock.guest_errors is {errors}, expected 12")
        status, info = shim.api("GET", "vm.info")
        check(status == 200 and info.get("state") == "Running", f"vm.info after malformed packets: {info}")


RESTORES = 8
RESET_WITHIN_US = 50_000  # the device thread's timer ticks every 100 ms


def restore_target(snap, target_dir, ondemand):
    """A new shim restoring snap (resumed, its own vsock socket); returns it,
    its API socket and its vsock socket."""
    os.mkdir(target_dir)
    api = os.path.join(target_dir, "api.sock")
    new_vsock = os.path.join(target_dir, "vsock.sock")
    with open(os.path.join(target_dir, "shim.log"), "wb") as log:
        target = subprocess.Popen([SHIM, "--api-socket", f"path={api}"], stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while not os.path.exists(api):
        check(time.monotonic() < deadline and target.poll() is None, "restore target has no API socket")
        time.sleep(0.02)
    body = json.dumps({"source_url": "file://" + snap, "resume": True,
                       "memory_restore_mode": "ondemand" if ondemand else "copy",
                       "config_overrides": {"vsock": {"socket": new_vsock}}})
    res = subprocess.run(["curl", "-sS", "--unix-socket", api, "-X", "PUT", "-w", "\n%{http_code}",
                          "-H", "Content-Type: application/json", "-d", body,
                          "http://localhost/api/v1/vm.restore"],
                         capture_output=True, text=True, timeout=60)
    text, _, code = res.stdout.rpartition("\n")
    check(code in ("200", "204"), f"vm.restore answered {code}: {text} {res.stderr}")
    return target, api, new_vsock


def check_restored(api, new_vsock, first):
    """READY again (generation + 1, same boot), told at once, memory intact."""
    status, body, _ = http_get_unix(api, "/api/v1/vm.wait-ready?timeout_ms=20000", 25)
    check(status == 200, f"wait-ready after restore answered {status}: {body}")
    again = json.loads(body)
    check(again["generation"] == first["generation"] + 1, f"generation after restore: {again}")
    check(again["boot_id"] == first["boot_id"], "the restored guest is the same boot")
    # The reset event must reach the guest on the request's own wake-up, not
    # on the device thread's next timer tick (a lost wake-up that delayed
    # about every second restore's READY by up to 100 ms).
    status, body, _ = http_get_unix(api, "/api/v1/vm.counters", 10)
    delivery = json.loads(body)["vsock"]["reset_delivery_us"]
    check(0 < delivery < RESET_WITHIN_US, f"TRANSPORT_RESET reached the guest {delivery} us after the request")
    c = wait_guest_serving(new_vsock)
    want = pattern_checksum(PATTERN, 3, 4096)
    check(c.cmd("SUM 0x1000000 4096") == f"SUM {want}", "memory after the restore")
    c.close()
    return delivery


def case_ready_after_restore():
    """A restored guest hears TRANSPORT_RESET, reconnects and announces READY
    again with generation + 1; the restored shim's wait-ready sees it. Each of
    several restores (by copy and on demand) is told of the reset at once."""
    shim, path = vsock_shim()
    snap = os.path.join(shim.workdir, "snap")
    with shim:
        status, body, _ = http_get_unix(shim.api_socket, "/api/v1/vm.wait-ready?timeout_ms=20000", 25)
        check(status == 200, f"wait-ready answered {status}: {body}")
        first = json.loads(body)
        c = wait_guest_serving(path)
        check(c.cmd("FILL 0x1000000 4096 3") == "OK", "FILL before the snapshot")
        c.close()
        for method, endpoint, req in [("PUT", "vm.pause", None),
                                      ("PUT", "vm.snapshot", {"destination_url": "file://" + snap})]:
            status, reply = shim.api(method, endpoint, req)
            check(status in (200, 204), f"{endpoint} answered {status}: {reply}")
        delays = []
        for i in range(RESTORES):
            target, api, new_vsock = restore_target(snap, os.path.join(shim.workdir, f"target{i}"), i % 2 == 1)
            try:
                delays.append(check_restored(api, new_vsock, first))
            finally:
                target.kill()
                target.wait()
        print(f"generation {first['generation']} -> {first['generation'] + 1} after each of {RESTORES} restores;"
              f" reset delivered after {delays} us")


NOTIFY_PORT = 1025


def wait_notify(shim, pred, what, timeout=20):
    """vm.info's vsnap.notify once pred(notify) holds."""
    deadline = time.monotonic() + timeout
    while True:
        status, info = shim.api("GET", "vm.info")
        notify = (info or {}).get("vsnap", {}).get("notify") if status == 200 else None
        if notify and pred(notify):
            return notify
        if time.monotonic() > deadline:
            raise Fail(f"vm.info's vsnap.notify never showed {what}: {notify}")
        time.sleep(0.05)


def case_notify():
    """systemd's sd_notify on the notify port (the test guest in notify mode):
    READY=1 is readiness exactly as the agent's READY (wait-ready, vm.info,
    the guest ready event); STATUS, WATCHDOG, X_SYSTEMD_* and garbage on one
    connection; STOPPING=1 and EXIT_STATUS= as systemd shuts down."""
    shim, path = vsock_shim(extra_cmdline=f"vsnap.notify_port={NOTIFY_PORT}")
    events_path = os.path.join(shim.workdir, "events.jsonl")
    shim.argv += ["--event-monitor", f"path={events_path}"]
    with shim:
        status, body, _ = http_get_unix(shim.api_socket, "/api/v1/vm.wait-ready?timeout_ms=20000", 25)
        check(status == 200, f"wait-ready answered {status}: {body}")
        info = json.loads(body)
        check(info.get("ready") is True and info.get("generation") == 0 and info.get("source") == "notify",
              f"ready info {info}")
        check(info.get("port") == NOTIFY_PORT and re.fullmatch(r"[0-9a-f]{16}", info.get("boot_id", "")),
              f"ready info {info}")
        check(info.get("guest") == {"READY": "1", "STATUS": "vsnap-testguest ready"},
              f"READY and STATUS of one write belong together: {info}")
        shim.wait_for_serial(r"notify sent ready", timeout=5)
        check("readiness acknowledged" not in shim.serial(), "the guest used the agent protocol too")
        notify = wait_notify(shim, lambda n: n.get("watchdog_count") == 2, "two WATCHDOG=1")
        print(f"notify after the several-notifications connection: {notify}")
        check(notify.get("status") == "vsnap-testguest serving", f"last STATUS= in {notify}")
        check(notify.get("x_systemd") == {"X_SYSTEMD_UNIT_ACTIVE": "vsnap-testguest.target"}, f"x_systemd {notify}")
        check(notify.get("ignored_lines") == 2, f"two garbage lines counted: {notify}")
        check(notify.get("stopping") is False and notify.get("exit_status") is None, f"not stopping yet: {notify}")
        status, vm_info = shim.api("GET", "vm.info")
        vsnap = vm_info["vsnap"]
        check(vsnap.get("ready") is True and vsnap.get("source") == "notify" and vsnap.get("generation") == 0,
              f"vm.info's readiness: {vsnap}")
        with open(events_path) as f:
            events = [json.loads(l) for l in f if l.strip()]
        ready_events = [e for e in events if e.get("source") == "guest" and e.get("event") == "ready"]
        check(len(ready_events) == 1, f"one guest ready event: {ready_events}")
        c = wait_guest_serving(path)
        check(c.cmd("NOTIFYSTOP") == "OK", "NOTIFYSTOP")
        notify = wait_notify(shim, lambda n: n.get("exit_status") is not None, "EXIT_STATUS=3")
        check(notify.get("stopping") is True and notify.get("exit_status") == 3 and
              notify.get("status") == "vsnap-testguest stopping", f"systemd's shutdown messages: {notify}")
        c.close()


def case_notify_after_restore():
    """A guest that was ready through notify is ready again as soon as the
    restored VM runs (generation + 1, same boot), and keeps what it told."""
    with tempfile.TemporaryDirectory(prefix="vsnap-notify-") as tmp:
        notify_restore_in(os.path.join(tmp, "snap"))


def notify_restore_in(snap):
    shim, path = vsock_shim(extra_cmdline=f"vsnap.notify_port={NOTIFY_PORT}")
    with shim:
        status, body, _ = http_get_unix(shim.api_socket, "/api/v1/vm.wait-ready?timeout_ms=20000", 25)
        check(status == 200, f"wait-ready answered {status}: {body}")
        first = json.loads(body)
        wait_notify(shim, lambda n: n.get("watchdog_count") == 2, "two WATCHDOG=1")
        for method, endpoint, req in [("PUT", "vm.pause", None),
                                      ("PUT", "vm.snapshot", {"destination_url": "file://" + snap})]:
            status, reply = shim.api(method, endpoint, req)
            check(status in (200, 204), f"{endpoint} answered {status}: {reply}")
    target = Shim(SHIM, GUEST, api=True)
    target.argv = [SHIM, "--api-socket", f"path={target.api_socket}"]
    new_vsock = os.path.join(target.workdir, "vsock.sock")
    with target:
        status, reply = target.api("PUT", "vm.restore", {
            "source_url": "file://" + snap,
            "config_overrides": {"vsock": {"socket": new_vsock},
                                 "serial": {"mode": "File", "file": target.serial_path}}})
        check(status in (200, 204), f"vm.restore answered {status}: {reply}")
        status, info = target.api("GET", "vm.info")
        check(info["vsnap"].get("ready") is False, f"a paused restored VM is not ready yet: {info['vsnap']}")
        status, reply = target.api("PUT", "vm.resume")
        check(status in (200, 204), f"vm.resume answered {status}: {reply}")
        status, body, _ = http_get_unix(target.api_socket, "/api/v1/vm.wait-ready?timeout_ms=5000", 10)
        check(status == 200, f"wait-ready after the restore answered {status}: {body}")
        again = json.loads(body)
        print(f"before: generation {first['generation']}, after restore: {again}")
        check(again.get("generation") == first["generation"] + 1 and again.get("boot_id") == first["boot_id"]
              and again.get("source") == "notify", f"readiness after the restore: {again}")
        status, info = target.api("GET", "vm.info")
        notify = info["vsnap"]["notify"]
        check(notify.get("watchdog_count") == 2 and notify.get("status") == "vsnap-testguest serving",
              f"what the guest told before the snapshot: {notify}")
        c = wait_guest_serving(new_vsock)
        check(c.cmd("PING") == "PONG", "the restored guest serves")
        c.close()


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return f"{h:016x}"


def rng_shim(spec):
    shim, path = vsock_shim()
    shim.argv += ["--rng", spec]
    return shim, path


def case_rng():
    """virtio-rng from /dev/urandom: the guest's RNG <n> gets n bytes, and two
    reads differ; from a file, the bytes are exactly the file's, in order."""
    shim, path = rng_shim("src=/dev/urandom")
    with shim:
        c = wait_guest_serving(path)
        first, second = c.cmd("RNG 4096"), c.cmd("RNG 4096")
        print(f"two reads: {first!r}, {second!r}")
        check(re.fullmatch(r"RNG 4096 [0-9a-f]{16}", first) and re.fullmatch(r"RNG 4096 [0-9a-f]{16}", second),
              f"RNG answers {first!r} {second!r}")
        check(first != second, "two reads of virtio-rng gave the same bytes")
        check(c.cmd("RNG 0").startswith("ERR"), "RNG 0 is refused")
        c.close()
        rng = counters_all(shim).get("rng", {})
        check(rng.get("rx_bytes", 0) >= 8192 and rng.get("throttled") == 0, f"vm.counters rng: {rng}")
    with tempfile.TemporaryDirectory(prefix="vsnap-rng-") as tmp:
        data = os.urandom(12288)
        src = os.path.join(tmp, "entropy")
        with open(src, "wb") as f:
            f.write(data)
        shim, path = rng_shim(f"src={src}")
        with shim:
            c = wait_guest_serving(path)
            check(c.cmd("RNG 4096") == f"RNG 4096 {fnv1a64(data[:4096])}", "the file's first 4096 bytes")
            check(c.cmd("RNG 8192") == f"RNG 8192 {fnv1a64(data[4096:])}", "then the next 8192")
            c.close()


def case_rng_rate_limit():
    """A bandwidth limit of 4 KiB per 500 ms: 12 KiB take about a second
    (4 KiB at once from the full bucket, then 8 KiB refilled), and the device
    counts the requests it held back."""
    shim, path = rng_shim("src=/dev/urandom,bw_size=4096,bw_refill_time=500")
    with shim:
        c = wait_guest_serving(path)
        started = time.monotonic()
        answer = c.cmd("RNG 12288")
        took = time.monotonic() - started
        print(f"RNG 12288 under 4096 bytes / 500 ms: {answer!r} after {took:.2f} s")
        check(re.fullmatch(r"RNG 12288 [0-9a-f]{16}", answer), f"RNG answer {answer!r}")
        check(took >= 0.9, f"12 KiB came in {took:.2f} s: the limit allows 4 KiB per 500 ms")
        rng = counters_all(shim).get("rng", {})
        check(rng.get("throttled", 0) > 0 and rng.get("rx_bytes") == 12288, f"vm.counters rng: {rng}")
        c.close()


def counters_all(shim):
    status, body = shim.api("GET", "vm.counters")
    check(status == 200, f"vm.counters answered {status}")
    return body


def restored_shim(snap):
    """A new shim with the snapshot at snap restored and running; returns
    (Shim, its vsock socket path). Use as a context manager."""
    target = Shim(SHIM, GUEST, api=True)
    target.argv = [SHIM, "--api-socket", f"path={target.api_socket}"]
    new_vsock = os.path.join(target.workdir, "vsock.sock")
    target.start()
    status, reply = target.api("PUT", "vm.restore", {
        "source_url": "file://" + snap, "resume": True,
        "config_overrides": {"vsock": {"socket": new_vsock},
                             "serial": {"mode": "File", "file": target.serial_path}}})
    if status not in (200, 204):
        target.close()
        raise Fail(f"vm.restore answered {status}: {reply}")
    return target, new_vsock


def snapshot(shim, snap):
    for method, endpoint, req in [("PUT", "vm.pause", None),
                                  ("PUT", "vm.snapshot", {"destination_url": "file://" + snap}),
                                  ("PUT", "vm.resume", None)]:
        status, reply = shim.api(method, endpoint, req)
        check(status in (200, 204), f"{endpoint} answered {status}: {reply}")


def guest_vmgenid(path):
    """(id, gpe pending) as the guest reads them through ACPI."""
    c = wait_guest_serving(path)
    try:
        answer = c.cmd("VMGENID")
    finally:
        c.close()
    m = re.fullmatch(r"VMGENID ([0-9a-f]{32}) gpe=([01])", answer)
    check(m, f"VMGENID answered {answer!r}")
    return m.group(1), m.group(2) == "1"


def shim_vmgenid(shim):
    status, info = shim.api("GET", "vm.info")
    check(status == 200, f"vm.info answered {status}")
    return info["vsnap"]["vmgenid"]["id"]


def case_vmgenid():
    """The VM generation ID the guest finds through ACPI is new after every
    restore (with its GPE pending), two clones of one snapshot differ, and a
    clone's own snapshot restored changes it again. The restored clock says
    how it was set and moved on by the time stopped."""
    with tempfile.TemporaryDirectory(prefix="vsnap-vmgenid-") as tmp:
        shim, path = vsock_shim()
        with shim:
            booted, pending = guest_vmgenid(path)
            check(not pending and booted == shim_vmgenid(shim), f"at boot: {booted} pending={pending}")
            check(guest_vmgenid(path)[0] == booted, "the id stays while the VM runs")
            snap = os.path.join(tmp, "snap")
            snapshot(shim, snap)
        with open(os.path.join(snap, "state.json")) as f:
            saved_clock = int(json.load(f)["kvm"]["clock_ns"], 16)
        time.sleep(1.0)
        ids = [booted]
        first, first_path = restored_shim(snap)
        with first:
            second, second_path = restored_shim(snap)
            with second:
                for clone, clone_path in ((first, first_path), (second, second_path)):
                    gid, pending = guest_vmgenid(clone_path)
                    check(pending, "the restore raised the generation-changed GPE")
                    check(gid == shim_vmgenid(clone), f"guest {gid} and vm.info agree")
                    check(guest_vmgenid(clone_path) == (gid, False), "the GPE was cleared, the id stays")
                    ids.append(gid)
                status, info = second.api("GET", "vm.info")
                clock = info["vsnap"]["clock"]
                print(f"clock after the restore: {clock} (saved kvmclock {saved_clock})")
                check(clock["restore"] in ("realtime", "advance"), f"vsnap.clock {clock}")
                check(clock["stopped_ns"] >= 1_000_000_000, f"stopped at least the 1 s slept: {clock}")
                check(clock["clock_ns"] - saved_clock >= 1_000_000_000,
                      f"the kvmclock moved on by the time stopped: {clock}, saved {saved_clock}")
            snap2 = os.path.join(tmp, "snap2")
            snapshot(first, snap2)
        again, again_path = restored_shim(snap2)
        with again:
            ids.append(guest_vmgenid(again_path)[0])
        print(f"generation ids: boot, clone 1, clone 2, clone 1 restored: {ids}")
        check(len(set(ids)) == len(ids), f"every restore gives a new id: {ids}")


def case_host_ports_after_restore():
    """Host-initiated connections of a restored VM take host ports after the
    ones used before its snapshot, never the same again: Linux keeps a closed
    connection in its table until its close handshake ends, and took a
    restored shim's first connection, on the same port, for that one (and
    reset it; tests/linux found it)."""
    shim, path = vsock_shim()
    snap = os.path.join(shim.workdir, "snap")
    with shim:
        used = []
        for _ in range(3):
            c = wait_guest_serving(path)
            check(c.cmd("PING") == "PONG", "PING before the snapshot")
            used.append(int(c.ok.split()[1]))
            c.close()
        snapshot(shim, snap)
        target, new_vsock = restored_shim(snap)
        with target:
            c = wait_guest_serving(new_vsock)
            port = int(c.ok.split()[1])
            c.close()
    print(f"host ports before the snapshot {used}, first after the restore {port}")
    check(port > max(used), f"the restored shim's first host port {port} is one used before it: {used}")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    if CASE not in CASES:
        sys.exit(f"unknown case {CASE}; cases: {' '.join(CASES)}")
    try:
        CASES[CASE]()
    except (Fail, ShimError) as e:
        print(f"FAIL {CASE}: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"ok {CASE}")
