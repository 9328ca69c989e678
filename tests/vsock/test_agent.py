#!/usr/bin/python3
"""vsnap-agent on the host: the real binary, over UNIX sockets (--unix), with
this script playing the shim's side; and the initramfs builder.

    test_agent.py protocol  <vsnap-agent>
    test_agent.py initramfs <vsnap-agent> <guest/mkinitramfs.sh>
"""

import gzip
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


class AgentProcess:
    """The agent with stderr collected in a thread (its log is what we check)."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def wait_log(self, text, timeout=5):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if any(text in l for l in self.lines):
                    return
            time.sleep(0.02)
        raise Fail(f"agent never logged {text!r}; log: {self.lines}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def read_line(sock):
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise Fail(f"connection closed after {data!r}")
        data += chunk
    return data[:-1].decode()


def accept_ready(listener, expect_generation):
    conn, _ = listener.accept()
    conn.settimeout(5)
    line = read_line(conn)
    check(line.startswith("READY "), f"first line {line!r}")
    info = json.loads(line[len("READY "):])
    check(info["generation"] == expect_generation, f"generation in {info}, expected {expect_generation}")
    return conn, info


def test_protocol(agent):
    tmp = tempfile.mkdtemp(prefix="vsnap-agent-")
    prefix = os.path.join(tmp, "vm")
    proc = AgentProcess([agent, "--unix", prefix, "--ready-port", "1024", "--cmd-port", "5000",
                         "--no-set-clock"])
    try:
        # Nobody listens yet: the agent retries until someone does.
        proc.wait_log("up: readiness port 1024, command port 5000")
        time.sleep(0.3)
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(f"{prefix}_1024")
        listener.listen(2)
        listener.settimeout(3)
        conn, info = accept_ready(listener, 0)
        with open("/proc/sys/kernel/random/boot_id") as f:
            check(info["boot_id"] == f.read().strip(), f"boot_id {info['boot_id']}")
        lag = abs(time.monotonic_ns() - info["mono_ns"])
        check(lag < 2e9, f"mono_ns {info['mono_ns']} is {lag / 1e9:.1f} s off this host's monotonic clock")
        conn.sendall(b'ACK {"host_realtime_ns":%d,"generation":0,"entropy":"%s"}\n'
                     % (time.time_ns(), os.urandom(32).hex().encode()))
        proc.wait_log("ready generation=0 acknowledged")
        proc.wait_log("added 32 bytes of host entropy")

        # The command port.
        cmd = socket.socket(socket.AF_UNIX)
        cmd.settimeout(5)
        cmd.connect(f"{prefix}.listen_5000")
        for line, want in [(b"PING", "PONG"), (b"VERSION", "VERSION 0.1.0"),
                           (b"FROB", "ERR unknown command (PING, VERSION)"), (b"", "ERR empty line"),
                           (b"X" * 3000, "ERR line too long"), (b"PING\r", "PONG")]:
            cmd.sendall(line + b"\n")
            got = read_line(cmd)
            check(got == want, f"{line[:20]!r} answered {got!r}, expected {want!r}")
        # Two lines in one write, answered in order.
        cmd.sendall(b"PING\nVERSION\n")
        check(read_line(cmd) == "PONG" and read_line(cmd).startswith("VERSION "), "pipelined commands")

        # Reset of the readiness connection (as after a restore): READY again
        # with generation + 1. A bad answer is reported and not acted on; the
        # real ACK then makes it take the host's clock.
        conn.close()
        conn, info = accept_ready(listener, 1)
        conn.sendall(b"NOT AN ACK\n")
        proc.wait_log("bad answer to READY")
        host_ns = time.time_ns()
        conn.sendall(b'ACK {"host_realtime_ns":%d,"generation":1}\n' % host_ns)
        proc.wait_log("ready generation=1 acknowledged")
        proc.wait_log(f"clock not set (--no-set-clock): host time {host_ns} ns")
        cmd.sendall(b"PING\n")
        check(read_line(cmd) == "PONG", "PING after the readiness reset")

        proc.proc.send_signal(15)
        check(proc.proc.wait(timeout=5) == 0, "agent exit code after SIGTERM")
        proc.wait_log("exiting")
    finally:
        proc.stop()
    # Bad options are refused with a message.
    res = subprocess.run([agent, "--ready-port", "0"], capture_output=True, text=True, timeout=5)
    check(res.returncode == 2 and "invalid port" in res.stderr, f"--ready-port 0: {res.returncode} {res.stderr}")


def elf_is_static(path):
    """No PT_INTERP program header: the kernel runs it without a loader."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:4] == b"\x7fELF" and data[4] == 2, f"{path} is not a 64-bit ELF")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    types = [struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)]
    return 3 not in types  # PT_INTERP


def parse_newc(data):
    """name -> (mode, rdevmajor, rdevminor, data) of a cpio newc archive."""
    entries, off = {}, 0
    while True:
        check(data[off:off + 6] == b"070701", f"bad cpio magic at {off}")
        fields = [int(data[off + 6 + 8 * i: off + 14 + 8 * i], 16) for i in range(13)]
        mode, filesize, rmaj, rmin, namesize = fields[1], fields[6], fields[9], fields[10], fields[11]
        name = data[off + 110: off + 110 + namesize - 1].decode()
        off += 110 + namesize
        off += -off % 4
        body = data[off: off + filesize]
        off += filesize + (-filesize % 4)
        if name == "TRAILER!!!":
            return entries
        entries[name] = (mode, rmaj, rmin, body)


def test_initramfs(agent, script):
    check(elf_is_static(agent), "vsnap-agent is dynamically linked")
    tmp = tempfile.mkdtemp(prefix="vsnap-initramfs-")
    agent_bytes = open(agent, "rb").read()

    out = os.path.join(tmp, "plain.cpio")
    subprocess.run([script, "-o", out, "-a", agent], check=True, timeout=60)
    entries = parse_newc(open(out, "rb").read())
    mode, _, _, body = entries["init"]
    check(stat.S_ISREG(mode) and mode & 0o777 == 0o755, f"/init mode {oct(mode)}")
    check(body == agent_bytes, "/init is not the agent")
    mode, rmaj, rmin, _ = entries["dev/console"]
    check(stat.S_ISCHR(mode) and (rmaj, rmin) == (5, 1), "/dev/console is not char 5:1")
    check("bin/sh" not in entries, "busybox was not asked for")
    # GNU cpio reads it too.
    listing = subprocess.run(["cpio", "-it"], stdin=open(out, "rb"), capture_output=True,
                             text=True, timeout=30)
    check(listing.returncode == 0 and "init" in listing.stdout.split(), f"cpio -it: {listing.stderr}")

    if os.path.exists("/bin/busybox"):
        out = os.path.join(tmp, "busybox.cpio.gz")
        subprocess.run([script, "-o", out, "-a", agent, "-b", "/bin/busybox", "-z"], check=True, timeout=60)
        entries = parse_newc(gzip.decompress(open(out, "rb").read()))
        mode, _, _, target = entries["bin/sh"]
        check(stat.S_ISLNK(mode) and target == b"busybox", "/bin/sh -> busybox")
        check(entries["init"][3] == agent_bytes, "/init is not the agent (busybox archive)")

    res = subprocess.run([script, "-o", os.path.join(tmp, "x.cpio"), "-a", "/bin/sh"],
                         capture_output=True, text=True, timeout=30)
    check(res.returncode != 0 and "not a static program" in res.stderr,
          f"a dynamic /init: {res.returncode} {res.stderr}")
    res = subprocess.run([script, "-o", os.path.join(tmp, "x.cpio"), "-a", os.path.join(tmp, "missing")],
                         capture_output=True, text=True, timeout=30)
    check(res.returncode != 0 and "not found" in res.stderr, f"missing agent: {res.returncode} {res.stderr}")


if __name__ == "__main__":
    try:
        if sys.argv[1] == "protocol":
            test_protocol(sys.argv[2])
        elif sys.argv[1] == "initramfs":
            test_initramfs(sys.argv[2], sys.argv[3])
        else:
            sys.exit(f"unknown case {sys.argv[1]}")
    except Fail as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"ok {sys.argv[1]}")
