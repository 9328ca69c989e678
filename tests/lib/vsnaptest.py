"""Helpers for tests that run the real vsnap-shim (Python 3 stdlib only).

    from vsnaptest import Shim, pattern_checksum
    with Shim(shim_path, kernel=guest, cmdline="vsnap.fill_mib=64", memory="512M") as vm:
        line = vm.wait_for_serial(r"ready sum=([0-9a-f]{16})", timeout=30)
        vm.api("PUT", "vm.pause")

Paths come from the test's command line (meson passes the built targets), so
the helpers never guess where a build directory is.
"""

import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time

GUEST_FILL_BASE = 16 << 20  # where the test guest's fill region starts
CMD_PORT = 5000             # the test guest's command port (vsock)


class ShimError(Exception):
    pass


class Fail(Exception):
    """What a test found wrong, in words for a person."""


def check(cond, what):
    if not cond:
        raise Fail(what)


class CurlError(Exception):
    """curl itself failed (no answer): its message."""


def read_text(path):
    """A log or serial file's text so far; "" while it does not exist."""
    try:
        with open(path, "r", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def curl_api(api_socket, method, endpoint, body=None, timeout=30, raw_body=None, spill_dir=None):
    """Call /api/v1/<endpoint> with curl over the UNIX socket, as libvirt's ch
    driver would. body is sent as JSON, raw_body as it is (one too long for an
    argument goes through a file in spill_dir). Returns (HTTP status, parsed
    JSON body or None)."""
    argv = ["curl", "-sS", "--max-time", str(timeout), "--unix-socket", api_socket,
            "-X", method, "-w", "\n%{http_code}", f"http://localhost/api/v1/{endpoint}"]
    if body is not None:
        raw_body = json.dumps(body)
    if raw_body is not None and len(raw_body) > 65536 and spill_dir:
        path = os.path.join(spill_dir, "body")
        with open(path, "w") as f:
            f.write(raw_body)
        raw_body = "@" + path
    if raw_body is not None:
        argv += ["-H", "Content-Type: application/json", "--data-binary", raw_body]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 5)
    if res.returncode != 0:
        raise CurlError(res.stderr.strip())
    text, _, status = res.stdout.rpartition("\n")
    return int(status), (json.loads(text) if text.strip() else None)


def error_message(reply):
    """The text of an error answer: Cloud Hypervisor's shape, a JSON list of
    messages from the outermost error to its cause ("" if reply is not one)."""
    if isinstance(reply, list) and all(isinstance(m, str) for m in reply):
        return ": ".join(reply)
    return ""


def terminate(proc, timeout=10):
    """SIGTERM, then SIGKILL if proc has not exited within timeout seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def pattern_checksum(pattern_tool, seed, length):
    """The checksum the test guest reports for `length` bytes filled with `seed`,
    from the host reference (tests/lib/vsnap-pattern)."""
    out = subprocess.run([pattern_tool, str(seed), str(length)], check=True,
                         capture_output=True, text=True, timeout=600).stdout.strip()
    if not re.fullmatch(r"[0-9a-f]{16}", out):
        raise ShimError(f"vsnap-pattern printed {out!r}, not 16 hex digits")
    return out


class Shim:
    """One vsnap-shim process in direct mode (--kernel), optionally with its API
    socket. Serial output goes to a file in a private temporary directory.
    Use as a context manager: on exit the process is killed (by its pid) if it
    is still running, and the directory removed."""

    def __init__(self, shim_path, kernel, cmdline="", memory="512M", cpus=1,
                 api=False, extra_args=(), workdir=None):
        self.shim_path = shim_path
        self.own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="vsnap-test-")
        self.serial_path = os.path.join(self.workdir, "serial.log")
        self.api_socket = os.path.join(self.workdir, "api.sock") if api else None
        self.stderr_path = os.path.join(self.workdir, "shim.stderr")
        self.argv = [shim_path, "--kernel", kernel, "--cmdline", cmdline,
                     "--memory", f"size={memory}", "--cpus", f"boot={cpus}",
                     "--serial", f"file={self.serial_path}", "--console", "off"]
        if api:
            self.argv += ["--api-socket", f"path={self.api_socket}"]
        self.argv += list(extra_args)
        self.proc = None

    def __enter__(self):
        if not self.proc:   # started already by whoever made it (restored_shim)
            self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def start(self):
        if self.proc and self.proc.poll() is None:
            # a second process would take over the API socket's path and
            # the first, no longer known here, would outlive the test
            raise ShimError("start() of a shim that is running" + self.describe())
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=self._stderr, stderr=subprocess.STDOUT)
        if self.api_socket:
            self._wait_for_socket(timeout=10)

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if getattr(self, "_stderr", None):
            self._stderr.close()
        if self.own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # --- output -----------------------------------------------------------

    def serial(self):
        return read_text(self.serial_path)

    def shim_output(self):
        return read_text(self.stderr_path)

    def describe(self):
        """Everything a failing test should show."""
        rc = self.proc.poll() if self.proc else None
        return (f"\n--- command: {' '.join(self.argv)}\n--- shim exit code: {rc}\n"
                f"--- shim output:\n{self.shim_output()}\n--- serial:\n{self.serial()}")

    def wait_for_serial(self, regex, timeout):
        """Wait until a serial line matches regex; returns the match object.
        Fails early (with the output) if the shim exits first."""
        pattern = re.compile(regex)
        deadline = time.monotonic() + timeout
        while True:
            for line in self.serial().splitlines():
                m = pattern.search(line)
                if m:
                    return m
            if self.proc.poll() is not None:
                # One last read: the line may have landed just before the exit.
                for line in self.serial().splitlines():
                    m = pattern.search(line)
                    if m:
                        return m
                raise ShimError(f"shim exited before serial matched {regex!r}" + self.describe())
            if time.monotonic() > deadline:
                raise ShimError(f"no serial line matched {regex!r} within {timeout}s" + self.describe())
            time.sleep(0.05)

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ShimError(f"shim still running after {timeout}s" + self.describe()) from None

    # --- API --------------------------------------------------------------

    def _wait_for_socket(self, timeout):
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.api_socket):
            if self.proc.poll() is not None:
                raise ShimError("shim exited before creating its API socket" + self.describe())
            if time.monotonic() > deadline:
                raise ShimError(f"no API socket after {timeout}s" + self.describe())
            time.sleep(0.02)

    def api(self, method, endpoint, body=None, timeout=30):
        """Call /api/v1/<endpoint> with curl over the UNIX socket. Returns
        (HTTP status, parsed JSON body or None)."""
        if not self.api_socket:
            raise ShimError("this Shim was started without api=True")
        try:
            return curl_api(self.api_socket, method, endpoint, body, timeout)
        except CurlError as e:
            raise ShimError(f"curl {method} {endpoint} failed: {e}" + self.describe()) from None


# --- the guest's command port over the hybrid vsock socket -------------------

class CommandConn:
    """A host-initiated connection: CONNECT <port> on the VM's vsock socket.
    The shim's answer to CONNECT ("OK <host port>" or an error) is kept in
    connect_reply; the caller decides what a refusal means."""

    def __init__(self, path, port=CMD_PORT, timeout=5):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.buf = b""
        try:
            self.sock.connect(path)
            self.sock.sendall(b"CONNECT %d\n" % port)
            self.connect_reply = self.line()
        except BaseException:
            self.sock.close()
            raise

    def line(self):
        while b"\n" not in self.buf:
            data = self.sock.recv(4096)
            if not data:
                raise Fail(f"connection closed, partial line {self.buf!r}")
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode()

    def cmd(self, text):
        self.sock.sendall(text.encode() + b"\n")
        return self.line()

    def close(self):
        self.sock.close()


def wait_command_port(path, timeout=20, connect_timeout=5, conn_class=None, port=CMD_PORT, interval=0.05):
    """A connection (a CommandConn, or the given subclass) once the guest
    accepts CONNECT on its command port (or port: it listens only once
    ready); Fail if it has not within timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = (conn_class or CommandConn)(path, port, connect_timeout)
            if conn.connect_reply.startswith("OK "):
                return conn
            conn.close()
        except (OSError, Fail):
            pass
        if time.monotonic() > deadline:
            raise Fail(f"the guest's port {port} on {path} never answered")
        time.sleep(interval)


# --- memory layers (common/snapshot/layer.h, format version 1) ------------------

LAYER_MAGIC = b"VSNAPLYR"
LAYER_PAGE = 4096
LAYER_DATA_OFFSET = 4096


def layer_data_runs(path, start=0):
    """The data runs of the memory layer at byte `start` of file path (a layer
    file, or a save image section holding one): (first RAM page, pages, file
    offset of the first page's data). Zero runs are left out."""
    with open(path, "rb") as f:
        f.seek(start)
        header = f.read(128)
        check(header[:8] == LAYER_MAGIC, f"{path}+{start}: not a memory layer")
        run_count, index_offset = struct.unpack_from("<Q8xQ", header, 72)
        f.seek(start + index_offset)
        index = f.read(16 * run_count)
    runs, data_page = [], 0
    for i in range(run_count):
        first, npages, kind = struct.unpack_from("<QII", index, 16 * i)
        if kind == 0:
            runs.append((first, npages, start + LAYER_DATA_OFFSET + data_page * LAYER_PAGE))
            data_page += npages
    return runs


def layer_page_offset(path, ram_offset, start=0):
    """File offset of the stored data of the page at RAM offset ram_offset, or
    None when the layer does not store that page."""
    page = ram_offset // LAYER_PAGE
    for first, npages, offset in layer_data_runs(path, start):
        if first <= page < first + npages:
            return offset + (page - first) * LAYER_PAGE + ram_offset % LAYER_PAGE
    return None


def flip_byte(path, offset, mask=0x01):
    """Change one byte in place: the file keeps its size (a silent corruption
    once its times are put back, which the tests do where it matters)."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ mask]))


# --- HTTP over the API socket without curl ------------------------------------

def http_exchange(sock, method, target, body=None):
    """One HTTP/1.1 request on a connected socket, without curl (its start-up
    would dominate millisecond timings). Reads until the body is complete by
    Content-Length, or until the server closes. Returns (status, body bytes)."""
    payload = json.dumps(body).encode() if body is not None else b""
    head = (f"{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            f"Content-Length: {len(payload)}\r\n"
            + ("Content-Type: application/json\r\n" if payload else "") + "\r\n")
    sock.sendall(head.encode() + payload)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        header, sep, rest = data.partition(b"\r\n\r\n")
        m = re.search(rb"content-length:\s*(\d+)", header, re.I)
        if sep and m and len(rest) >= int(m.group(1)):
            break
    header, _, rest = data.partition(b"\r\n\r\n")
    return int(header.split(b" ", 2)[1]), rest


def http_unix(sock_path, method, target, body=None, timeout=10):
    """http_exchange on a fresh connection to the UNIX socket at sock_path."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        return http_exchange(s, method, target, body)
    finally:
        s.close()


# --- benchmark results ---------------------------------------------------------

def percentile(values, p):
    """The nearest-rank p-th percentile (p in 0..100) of a non-empty sequence."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))]


def append_jsonl(path, records):
    """Append one JSON line per record to path (its directory made if needed)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")


STATE_DIGEST = "state_sha256"


def write_state_json(path, state):
    """Write state.json with a correct checksum, as common/snapshot/README.md
    defines it (SHA-256 of the file with the digest's digits as zeros, the
    digest the last member): an edit the checksum does not catch, so a test
    reaches the shim's own checks of what it edited."""
    import hashlib
    state = dict(state)
    state.pop(STATE_DIGEST, None)
    state[STATE_DIGEST] = "0" * 64
    text = json.dumps(state, indent=2)
    at = text.rindex('"' + "0" * 64 + '"') + 1
    digest = hashlib.sha256(text.encode()).hexdigest()
    with open(path, "w") as f:
        f.write(text[:at] + digest + text[at + 64:])


NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"
HUGEPAGES_LOCK = "/run/vsnap-test-hugepages.lock"
# Held for as long as a test uses the pool: shared by tests that only need
# their pages, exclusive by one that counts what is free (a VM sized from
# HugePages_Free is wrong as soon as another test adds or maps pages).
HUGEPAGES_USE_LOCK = "/run/vsnap-test-hugepages-use.lock"


def hugepages_meminfo():
    """/proc/meminfo's HugePages_* and Hugepagesize (kB) as a dict."""
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.startswith("HugePages_") or key == "Hugepagesize":
                out[key] = int(value.split()[0])
    return out


def hugepages_available():
    """2 MiB huge pages free and not reserved by a mapping."""
    m = hugepages_meminfo()
    return m["HugePages_Free"] - m["HugePages_Rsvd"]


class HugePages:
    """count 2 MiB huge pages added to the host's pool (/proc/sys/vm/nr_hugepages)
    for the test and taken back after. The pool is the host's and other tests
    may be using it at the same moment, so a test adds to and takes from what
    is there, under a lock file, and never sets a number of its own. Needs
    root and a default huge page size of 2 MiB; can_reserve() says."""

    def __init__(self, count, alone=False):
        self.count = count
        self.added = 0
        self.alone = alone   # no other test uses the pool meanwhile
        self.use = None

    @staticmethod
    def can_reserve():
        return os.access(NR_HUGEPAGES, os.W_OK) and hugepages_meminfo().get("Hugepagesize") == 2048

    @staticmethod
    def _change(delta):
        import fcntl
        with open(HUGEPAGES_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with open(NR_HUGEPAGES) as f:
                before = int(f.read())
            with open(NR_HUGEPAGES, "w") as f:
                f.write(str(max(0, before + delta)))
            with open(NR_HUGEPAGES) as f:
                return int(f.read()) - before

    def __enter__(self):
        import fcntl
        self.use = open(HUGEPAGES_USE_LOCK, "a")
        fcntl.flock(self.use, fcntl.LOCK_EX if self.alone else fcntl.LOCK_SH)
        self.added = self._change(self.count)
        if self.added < self.count:
            self.__exit__()
            raise Fail(f"the host could not make {self.count} huge pages of 2 MiB (it made {self.added})")
        return self

    def __exit__(self, *exc):
        if self.added:
            self._change(-self.added)
            self.added = 0
        if self.use:
            self.use.close()
            self.use = None
