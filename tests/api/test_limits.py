"""The API socket's limits under hostile clients: a chunked body is cut off as
it arrives, a burst of connects all get in, clients that hang up leave
nothing behind, and idle clients are disconnected while a request being
answered (a long vm.wait-ready) is not. Each prints what it measured."""

import os
import signal
import socket
import sys
import threading
import time
import unittest

from apishim import ApiShim

SHIM = sys.argv[1]
GUEST = sys.argv[2] if len(sys.argv) > 2 else None
MIB = 1 << 20
IDLE_TIMEOUT_S = 30  # shim/api/connections.c
PING = b"GET /api/v1/vmm.ping HTTP/1.1\r\nHost: localhost\r\n\r\n"


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])  # kB
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def read_response(sock):
    """One whole response to a GET vmm.ping (its body ends the JSON object)."""
    data = b""
    while not data.endswith(b"}"):
        chunk = sock.recv(4096)
        if not chunk:
            raise AssertionError(f"connection closed mid-response: {data!r}")
        data += chunk
    return data


def seconds_until_closed(sock, limit):
    """How long until the shim closes sock (reads end-of-file); None if it
    has not after limit seconds."""
    sock.settimeout(limit)
    start = time.monotonic()
    try:
        while sock.recv(4096):
            pass
    except socket.timeout:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - start


class Limits(unittest.TestCase):
    def setUp(self):
        self.shim = ApiShim(SHIM)
        self.shim.start()
        self.pid = self.shim.proc.pid

    def tearDown(self):
        self.shim.kill()

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.shim.socket_path)
        return s

    def test_chunked_body_is_cut_off_as_it_arrives(self):
        """Content-Length is checked before the body is read; a chunked body
        has none, so it is counted as it arrives: past 1 MiB the shim answers
        413 and hangs up. It used to keep all of it (256 MiB: +790 MB RSS)."""
        before = proc_status(self.pid, "VmHWM")
        s = self.connect()
        s.sendall(b"PUT /api/v1/vm.snapshot HTTP/1.1\r\nHost: localhost\r\n"
                  b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n" % 65536 + b" " * 65536 + b"\r\n"
        sent, total = 0, 256 * MIB
        try:
            while sent < total:
                s.sendall(chunk)
                sent += 65536
            s.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            reply = s.recv(4096)
        except ConnectionResetError:
            reply = b""
        s.close()
        self.shim.alive()
        after = proc_status(self.pid, "VmHWM")
        print(f"chunked body: sent {sent / MIB:.1f} of {total // MIB} MiB before the shim hung up; "
              f"peak RSS {before} -> {after} kB; reply {reply[:40]!r}")
        self.assertLess(sent, 16 * MIB, "the shim read on far past the limit")
        self.assertLess(after - before, 32 * 1024, "the shim kept the body")
        if reply:
            self.assertRegex(reply, rb"^HTTP/1\.1 413 ")

    def test_a_burst_of_200_connects_all_get_in(self):
        """With the shim stopped (as when its main loop is busy), 200 clients
        connect at once: the listen backlog must hold them all (it was 10)."""
        clients = []
        os.kill(self.pid, signal.SIGSTOP)
        try:
            refused = 0
            for _ in range(200):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.setblocking(False)
                try:
                    s.connect(self.shim.socket_path)
                    clients.append(s)
                except BlockingIOError:
                    refused += 1
                    s.close()
        finally:
            os.kill(self.pid, signal.SIGCONT)
        try:
            print(f"burst: {len(clients)} of 200 connects accepted, {refused} refused")
            self.assertEqual(refused, 0)
            for s in clients:
                s.setblocking(True)
                s.settimeout(30)
                s.sendall(PING)
            for s in clients:
                self.assertIn(b'"pid":%d' % self.pid, read_response(s))
        finally:
            for s in clients:
                s.close()

    def test_clients_that_hang_up_leave_nothing_behind(self):
        """A client that reuses its connection and hangs up between requests (as
        libcurl does when a handle is cleaned up) used to leave an open socket in
        the shim, one per call."""
        self.shim.alive()
        before = open_fds(self.pid)
        for _ in range(300):
            s = self.connect()
            s.sendall(PING)
            read_response(s)
            s.sendall(PING)     # the second request on the same connection
            read_response(s)
            s.close()
        for _ in range(50):     # connect and leave at once, or after half a request
            s = self.connect()
            s.sendall(b"GET /api/v1/vmm.ping HTTP/1.1\r\nHo")
            s.close()
        deadline = time.monotonic() + 10
        while open_fds(self.pid) > before + 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        after = open_fds(self.pid)
        print(f"350 clients hung up: shim file descriptors {before} -> {after}")
        self.assertLessEqual(after, before + 2)
        self.shim.alive()

    @unittest.skipUnless(GUEST and os.path.exists(GUEST), "the test guest is not built")
    def test_idle_clients_are_disconnected_but_long_polls_are_not(self):
        """Silent, half-sent and idle keep-alive connections are closed after
        the idle timeout, and so is a request trickled in a byte every few
        seconds (each byte restarted libsoup's timeout: it stayed open); a
        vm.wait-ready answered later than that is not cut."""
        cfg = {"payload": {"kernel": GUEST, "cmdline": ""}, "memory": {"size": 64 << 20},
               "serial": {"mode": "File", "file": os.path.join(self.shim.workdir, "serial")},
               "console": {"mode": "Off"}}
        self.shim.expect("PUT", "vm.create", 204, body=cfg)
        self.shim.expect("PUT", "vm.boot", 204)
        poll = {}

        def long_poll():
            start = time.monotonic()
            poll["status"], poll["reply"] = self.shim.api(
                "GET", "vm.wait-ready", query=f"?timeout_ms={(IDLE_TIMEOUT_S + 6) * 1000}",
                timeout=IDLE_TIMEOUT_S + 20)
            poll["seconds"] = time.monotonic() - start

        poller = threading.Thread(target=long_poll)
        poller.start()
        silent = self.connect()
        half = self.connect()
        half.sendall(b"PUT /api/v1/vm.create HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
        kept = self.connect()
        kept.sendall(PING)
        read_response(kept)
        second_half = self.connect()
        second_half.sendall(PING)
        read_response(second_half)
        second_half.sendall(b"GET /api/v1/vmm.ping HTTP/1.1\r\nHo")
        trickled = self.connect()
        stop = threading.Event()

        def trickle():
            for byte in b"GET /api/v1/vmm.ping HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 64:
                try:
                    trickled.send(bytes([byte]))
                except OSError:
                    return
                if stop.wait(4):
                    return

        trickler = threading.Thread(target=trickle)
        trickler.start()
        closed = {}
        waiters = [threading.Thread(target=lambda n=name, s=sock: closed.__setitem__(
                       n, seconds_until_closed(s, IDLE_TIMEOUT_S + 15)))
                   for name, sock in (("silent", silent), ("half-sent request", half),
                                      ("idle after a request", kept),
                                      ("half-sent second request", second_half),
                                      ("trickled request", trickled))]
        for t in waiters:
            t.start()
        self.shim.alive()   # meanwhile, others are served
        for t in waiters:
            t.join()
        poller.join()
        stop.set()
        trickler.join()
        for s in (silent, half, kept, second_half, trickled):
            s.close()
        print("idle clients closed after: " +
              ", ".join(f"{n} {s:.1f} s" if s is not None else f"{n} never" for n, s in closed.items()))
        print(f"vm.wait-ready: {poll['status']} after {poll['seconds']:.1f} s")
        for name, seconds in closed.items():
            self.assertIsNotNone(seconds, f"{name}: still open")
            self.assertGreater(seconds, IDLE_TIMEOUT_S - 5, name)
        self.assertEqual(poll["status"], 504, poll)
        self.assertGreater(poll["seconds"], IDLE_TIMEOUT_S + 5)
        self.assertEqual(self.shim.state(), "Running")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
