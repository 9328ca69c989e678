"""Helpers for the virtvsnapd tests: a daemon on a private socket directory,
real virsh, real python3-libvirt, and a raw libvirt-RPC client for what
those clients never send (bad packets, unknown procedures, lying read-only
clients). Never touches /run/libvirt: every daemon gets its own directory.

Paths come from the environment meson sets: VIRTVSNAPD, VSNAP_SHIM,
VSNAP_TESTGUEST, VSNAP_SCHEMA_DIR."""

import itertools
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import uuid as uuidlib

import libvirt

VIRTVSNAPD = os.environ.get("VIRTVSNAPD", "")
SHIM = os.environ.get("VSNAP_SHIM", "")
TESTGUEST = os.environ.get("VSNAP_TESTGUEST", "")
SCHEMA_DIR = os.environ.get("VSNAP_SCHEMA_DIR", "")


def have_guest():
    return bool(SHIM and TESTGUEST and os.access(SHIM, os.X_OK) and os.path.exists(TESTGUEST))


needs_guest = unittest.skipUnless(have_guest(), "vsnap-shim or the test guest is not built")

# libvirt's own messages go to stderr for every error; the tests check codes.
libvirt.registerErrorHandler(lambda ctx, err: None, None)


def domain_xml(name, uuid=None, cmdline="vsnap.fill_mib=1 vsnap.seed=1", memory_mib=64,
               vcpus=1, kernel=None, extra_devices="", on_reboot="restart",
               on_poweroff="destroy", on_crash="destroy", restore_mode=None):
    uuid = uuid or str(uuidlib.uuid4())
    kernel = kernel or TESTGUEST or "/nonexistent/vsnap-testguest"
    metadata = ("  <metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>"
                f"<vsnap:restore mode='{restore_mode}'/></vsnap:vsnap></metadata>\n"
                if restore_mode else "")
    return f"""<domain type='kvm'>
  <name>{name}</name>
  <uuid>{uuid}</uuid>
{metadata}  <memory unit='MiB'>{memory_mib}</memory>
  <vcpu>{vcpus}</vcpu>
  <os>
    <type>hvm</type>
    <kernel>{kernel}</kernel>
    <cmdline>{cmdline}</cmdline>
  </os>
  <on_poweroff>{on_poweroff}</on_poweroff>
  <on_reboot>{on_reboot}</on_reboot>
  <on_crash>{on_crash}</on_crash>
  <devices>
    <vsock model='virtio'><cid auto='yes'/></vsock>
{extra_devices}  </devices>
</domain>
"""


class Daemon:
    """One virtvsnapd on a private directory."""

    def __init__(self, parent=None):
        # parent: where the private directory (sockets, state) is made; the
        # system's temporary directory unless a test needs another filesystem.
        self.dir = tempfile.mkdtemp(prefix="vsnapd-test-", dir=parent)
        self.sock = os.path.join(self.dir, "virtvsnapd-sock")
        self.sock_ro = self.sock + "-ro"
        self.state = os.path.join(self.dir, "state")
        self.log_path = os.path.join(self.dir, "daemon.log")
        self.proc = None
        self.uri = f"vsnap:///system?socket={self.sock}"
        self.ro_uri = f"vsnap:///system?socket={self.sock_ro}"

    def start(self, extra=(), env=None, prefix=()):
        """prefix: a command that execs the daemon (prlimit, say), so the
        pid stays the daemon's; env: variables added to the environment."""
        argv = list(prefix) + [VIRTVSNAPD, "--socket-dir", self.dir, "--state-dir", self.state]
        if SHIM:
            argv += ["--shim", SHIM]
        if SCHEMA_DIR:
            argv += ["--schema-dir", SCHEMA_DIR]
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(argv + list(extra), stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **env) if env else None)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("virtvsnapd exited at start:\n" + self.log())
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.sock_ro)
                return self
            except OSError:
                time.sleep(0.01)
        raise AssertionError("virtvsnapd never listened:\n" + self.log())

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)
        self.proc = None

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def sanitized(self):
        """Built with AddressSanitizer (its allocator, not glibc's)."""
        with open(f"/proc/{self.proc.pid}/maps") as f:
            return "libasan" in f.read()

    def cpu_seconds(self):
        """utime + stime of the daemon so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def shim_pids(self):
        """pid of every shim this daemon's domains run in."""
        pids = {}
        run = os.path.join(self.state, "run")
        for name in os.listdir(run) if os.path.isdir(run) else []:
            try:
                with open(os.path.join(run, name, "pid")) as f:
                    pids[name] = int(f.read())
            except (OSError, ValueError):
                pass
        return pids

    def cleanup(self):
        """Stop the daemon and every shim it started (by pid), remove files."""
        self.stop()
        for pid in self.shim_pids().values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except OSError:
            return ""

    def virsh(self, *args, ro=False, check=True, timeout=60):
        argv = ["virsh", "-q", "-c", self.ro_uri if ro else self.uri] + list(args)
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({res.returncode}):\n{res.stderr}"
                                 f"\ndaemon log:\n{self.log()}")
        return res

    def connect(self, readonly=False):
        if readonly:
            return libvirt.openReadOnly(self.ro_uri)
        return libvirt.open(self.uri)


def wait_for(predicate, timeout=20, interval=0.02, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class AgentReadiness:
    """agent-lifecycle 'connected' events of every domain on conn, timestamped
    on arrival (needs libvirt's default event loop running)."""

    def __init__(self, conn):
        self.cond = threading.Condition()
        self.times = []
        self.cb = conn.domainEventRegisterAny(
            None, libvirt.VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE, self.on_event, None)

    def on_event(self, conn, dom, state, reason, opaque):
        if state == libvirt.VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED:
            with self.cond:
                self.times.append(time.monotonic())
                self.cond.notify_all()

    def wait_after(self, t0, timeout=120):
        """Arrival time of the first 'connected' event at or after t0."""
        with self.cond:
            if not self.cond.wait_for(lambda: any(t >= t0 for t in self.times), timeout):
                raise RuntimeError("no agent-lifecycle 'connected' event")
            return min(t for t in self.times if t >= t0)


class VirshEvents:
    """`virsh event --loop <args>` on a daemon, its output lines collected as
    they come, so a test waits for the events it expects instead of sleeping
    and hoping virsh registered (or printed) in time."""

    def __init__(self, daemon, *args):
        self.proc = subprocess.Popen(["virsh", "-c", daemon.uri, "event", "--loop", *args,
                                      "--timeout", "60"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, needle, after=0, timeout=20):
        """Index of the first line from `after` on that contains needle."""
        def find():
            for i, line in enumerate(self.lines[after:], after):
                if needle in line:
                    return i + 1   # + 1: index 0 must read as found
            return None
        return wait_for(find, timeout, what=f"virsh event printing {needle!r}:\n"
                        + "\n".join(self.lines)) - 1

    def wait_registered(self, probe):
        """Call probe(attempt), which causes an event and returns a text of
        the line it prints, until virsh prints it: virsh has registered (an
        event before that is lost, hence a new attempt). Returns the index of
        the line after it, where the test's own events start."""
        deadline = time.monotonic() + 20
        for attempt in itertools.count():
            start = len(self.lines)
            needle = probe(attempt)
            try:
                return self.wait_for_line(needle, after=start, timeout=2) + 1
            except AssertionError:
                if time.monotonic() > deadline:
                    raise

    def stop(self):
        """Ends virsh; returns everything it printed."""
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.reader.join(timeout=10)
        return "\n".join(self.lines)


class DaemonTest(unittest.TestCase):
    """A fresh daemon per test."""
    daemon_parent = None   # where the daemon's directory is made (Daemon's parent)

    def setUp(self):
        if not VIRTVSNAPD:
            self.skipTest("VIRTVSNAPD is not set")
        self.daemon = Daemon(self.daemon_parent).start()

    def tearDown(self):
        self.daemon.cleanup()

    def define(self, name, **kw):
        xml = domain_xml(name, **kw)
        path = os.path.join(self.daemon.dir, name + ".xml")
        with open(path, "w") as f:
            f.write(xml)
        self.daemon.virsh("define", path)
        return path

    def state(self, name):
        return self.daemon.virsh("domstate", name, "--reason").stdout.strip()


# ---- raw libvirt RPC (XDR by hand) ----

REMOTE_PROGRAM = 0x20008086
KEEPALIVE_PROGRAM = 0x6B656570
CALL, REPLY, MESSAGE = 0, 1, 2


def xdr_string(text):
    data = text.encode()
    return struct.pack(">I", len(data)) + data + b"\0" * (-len(data) % 4)


def xdr_opt_string(text):
    return struct.pack(">I", 0) if text is None else struct.pack(">I", 1) + xdr_string(text)


def decode_error(body):
    """(code, domain, message) of a remote_error."""
    code, domain, present = struct.unpack(">iiI", body[:12])
    message = None
    if present:
        (n,) = struct.unpack(">I", body[12:16])
        message = body[16:16 + n].decode()
    return code, domain, message


class RawClient:
    def __init__(self, path, timeout=10):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.serial = 0

    def close(self):
        self.sock.close()

    def send_packet(self, prog, vers, proc, typ, serial, status, body=b""):
        header = struct.pack(">IIiIII", prog, vers, proc, typ, serial, status)
        self.sock.sendall(struct.pack(">I", 4 + len(header) + len(body)) + header + body)

    def recv_exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("connection closed by the daemon")
            data += chunk
        return data

    def recv_packet(self):
        (length,) = struct.unpack(">I", self.recv_exact(4))
        data = self.recv_exact(length - 4)
        return struct.unpack(">IIiIII", data[:24]), data[24:]

    def call(self, proc, body=b""):
        """(status, body) of the reply to one call."""
        self.serial += 1
        self.send_packet(REMOTE_PROGRAM, 1, proc, CALL, self.serial, 0, body)
        while True:
            hdr, rbody = self.recv_packet()
            if hdr[3] == REPLY and hdr[4] == self.serial:
                return hdr[5], rbody

    def open(self, flags=0):
        status, _ = self.call(66)    # AUTH_LIST
        assert status == 0
        status, body = self.call(1, xdr_opt_string("vsnap:///system") + struct.pack(">I", flags))
        assert status == 0, decode_error(body)
