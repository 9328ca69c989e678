"""A vsnap-shim process driven over its API socket, for tests/api (stdlib only).

curl does the HTTP (the same client libvirt uses, libcurl); raw sockets send the
malformed requests curl refuses to produce.
"""

import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import CurlError, curl_api, error_message, read_text  # noqa: E402


class ShimFailure(AssertionError):
    pass


class UnixHTTPConnection(http.client.HTTPConnection):
    """Python's own HTTP/1.1 client (persistent connections, as clients that
    keep a connection open use them) over the API's UNIX socket."""

    def __init__(self, socket_path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


class ApiShim:
    def __init__(self, shim_path, extra_args=(), events=None, workdir=None):
        self.workdir = workdir or tempfile.mkdtemp(prefix="vsnap-api-")
        self.socket_path = os.path.join(self.workdir, "api.sock")
        self.log_path = os.path.join(self.workdir, "shim.log")
        self.argv = [shim_path, "--api-socket", f"path={self.socket_path}", "-v",
                     "--log-file", self.log_path] + list(extra_args)
        if events:
            self.argv += ["--event-monitor", f"path={events}"]
        self.proc = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.kill()
        return False

    def start(self, timeout=10, pass_fds=()):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, pass_fds=pass_fds,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise ShimFailure("shim exited at start" + self.describe())
            if os.path.exists(self.socket_path):
                try:
                    status, _ = self.api("GET", "vmm.ping", timeout=2)
                    if status == 200:
                        return
                except ShimFailure:
                    pass
            if time.monotonic() > deadline:
                raise ShimFailure("API never answered" + self.describe())
            time.sleep(0.01)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()

    def terminate(self, sig=signal.SIGTERM, timeout=15):
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)

    def log(self):
        return read_text(self.log_path)

    def describe(self):
        out = ""
        if self.proc and self.proc.poll() is not None and self.proc.stdout \
                and not self.proc.stdout.closed:
            out = self.proc.stdout.read().decode(errors="replace")
        rc = self.proc.poll() if self.proc else None
        return (f"\n--- {' '.join(self.argv)}\n--- exit code: {rc}\n--- output:\n{out}"
                f"\n--- log:\n{self.log()}")

    def api(self, method, endpoint, body=None, raw_body=None, timeout=30, query=""):
        """(status, parsed JSON or None) for /api/v1/<endpoint>."""
        try:
            return curl_api(self.socket_path, method, endpoint + query, body, timeout,
                            raw_body=raw_body, spill_dir=self.workdir)
        except CurlError as e:
            raise ShimFailure(f"curl {method} {endpoint}: {e}") from None

    def expect(self, method, endpoint, status, body=None, raw_body=None, contains=None,
               query=""):
        got, reply = self.api(method, endpoint, body=body, raw_body=raw_body, query=query)
        if got != status:
            raise ShimFailure(f"{method} {endpoint}: status {got}, expected {status}; "
                              f"reply {reply}")
        if contains is not None:
            message = error_message(reply)
            if contains not in message:
                raise ShimFailure(f"{method} {endpoint}: error {message!r} does not "
                                  f"mention {contains!r}")
        return reply

    def alive(self):
        status, reply = self.api("GET", "vmm.ping", timeout=5)
        if status != 200 or reply.get("pid") != self.proc.pid:
            raise ShimFailure(f"vmm.ping: {status} {reply}")

    def state(self):
        status, reply = self.api("GET", "vm.info")
        return reply["state"] if status == 200 else status

    def wait_state(self, state, timeout=20):
        deadline = time.monotonic() + timeout
        while self.state() != state:
            if time.monotonic() > deadline:
                raise ShimFailure(f"state is {self.state()}, not {state}, after {timeout}s"
                                  + self.describe())
            time.sleep(0.05)

    def raw(self, data, timeout=3, shut_write=True):
        """Send bytes on a fresh connection; return whatever comes back."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.socket_path)
        chunks = []
        try:
            s.sendall(data)
            if shut_write:
                s.shutdown(socket.SHUT_WR)
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except socket.timeout:
            pass
        except (ConnectionResetError, BrokenPipeError):
            pass  # the server hung up on garbage before reading all of it: fine
        finally:
            s.close()
        return b"".join(chunks)
