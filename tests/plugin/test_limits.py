"""Hostile local users on the read-only socket (mode 0777), and hostile
traffic in general: the owner is never locked out, a read-only caller never
gets root to open what it could not open itself, and the daemon's memory,
threads and CPU stay bounded (virtvsnapd.conf's limits, rpc/server.c)."""

import json
import os
import socket
import stat
import struct
import subprocess
import tempfile
import threading
import time
import unittest

from nobody import ReadableCopy, as_nobody
from vsnapd import (CALL, REMOTE_PROGRAM, DaemonTest, RawClient, decode_error, wait_for,
                    xdr_string)

SAVE_IMAGE_GET_XML_DESC = 235
CONNECT_GET_VERSION = 4
# The defaults of virtvsnapd.conf.
MAX_CLIENTS, RESERVED_RW = 1024, 16


def run_as_nobody(helpers, code, *args, nofile=None, timeout=50):
    """Run python code as nobody with the test helpers (copies in the folder
    helpers) importable; its stdout is one JSON document."""
    res = subprocess.run(["/usr/bin/python3", "-c", "import sys; sys.path.insert(0, sys.argv[1])\n"
                          + code, helpers, *args], preexec_fn=as_nobody(nofile),
                         capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise AssertionError(f"the script as nobody failed:\n{res.stderr}")
    return json.loads(res.stdout)


DUMPXML_CONCURRENTLY = r"""
import json, struct, sys, threading
from vsnapd import RawClient, decode_error, xdr_string
sock, path, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
out = []
# Opened one after the other (at most max_anonymous_clients may be opening at
# once), then all calls at the same time.
clients = []
for _ in range(n):
    c = RawClient(sock, timeout=8)
    c.open()
    clients.append(c)
def one(c):
    try:
        status, body = c.call(235, xdr_string(path) + struct.pack(">I", 0))
        out.append(decode_error(body)[2] if status else "accepted")
        c.close()
    except Exception as e:
        out.append("no reply: %r" % (e,))
threads = [threading.Thread(target=one, args=(c,)) for c in clients]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(out))
"""

HOLD_CONNECTIONS = r"""
import json, socket, sys, time
from vsnapd import RawClient
sock, opened_wanted, idle_wanted = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def closed_by_daemon(s):
    s.settimeout(0.3)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True

held, opened, refused_open = [], 0, 0
for _ in range(opened_wanted):
    c = RawClient(sock, timeout=5)
    try:
        c.open()
        held.append(c)
        opened += 1
    except Exception:
        refused_open += 1
        c.close()
idle = []
for _ in range(idle_wanted):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    idle.append(s)
idle_held = sum(not closed_by_daemon(s) for s in idle)
print(json.dumps({"opened": opened, "refused": refused_open, "idle_held": idle_held}))
sys.stdout.flush()
sys.stdin.read()      # hold everything until the test is done
"""


class LimitsTest(DaemonTest):
    def setUp(self):
        super().setUp()
        readable = ReadableCopy()
        self.addCleanup(readable.close)
        self.helpers = readable.helpers()

    def root_can_list(self, timeout=10):
        t0 = time.monotonic()
        try:
            res = self.daemon.virsh("list", "--all", check=False, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, time.monotonic() - t0, f"no answer in {timeout} s"
        return res.returncode == 0, time.monotonic() - t0, res.stderr

    @unittest.skipUnless(os.geteuid() == 0, "needs root to switch to nobody")
    def test_fifo_named_by_read_only_callers_blocks_nobody(self):
        # 40 read-only save-image-dumpxml calls on a FIFO: each is refused at
        # once (O_NONBLOCK, regular files only) and root is served meanwhile.
        fifo_dir = tempfile.mkdtemp(prefix="vsnap-fifo-")
        os.chmod(fifo_dir, 0o755)
        fifo = os.path.join(fifo_dir, "image")
        os.mkfifo(fifo, 0o666)
        replies = []
        caller = threading.Thread(target=lambda: replies.extend(run_as_nobody(
            self.helpers, DUMPXML_CONCURRENTLY, self.daemon.sock_ro, fifo, "40")))
        try:
            os.chmod(self.daemon.dir, 0o755)
            caller.start()
            time.sleep(1)
            ok, took, err = self.root_can_list()
            caller.join(timeout=40)
        finally:
            # Before the fix every worker sat in open(); a writer lets them go.
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
            caller.join(timeout=20)
            os.unlink(fifo)
            os.rmdir(fifo_dir)
        self.assertTrue(ok, f"root's virsh list failed while nobody's calls ran: {err}")
        self.assertLess(took, 5)
        self.assertEqual(len(replies), 40)
        for reply in replies:
            self.assertIn("not a regular file", reply)
        print(f"40 FIFO calls refused; root's list took {took:.2f} s")

    @unittest.skipUnless(os.geteuid() == 0, "needs root to switch to nobody")
    def test_read_only_caller_opens_only_what_it_could(self):
        os.chmod(self.daemon.dir, 0o755)
        private = tempfile.mkdtemp(prefix="vsnap-private-")     # 0700, root's
        secret = os.path.join(private, "secret.save")
        with open(secret, "wb") as f:
            f.write(b"x" * 100)
        public_dir = tempfile.mkdtemp(prefix="vsnap-public-")
        os.chmod(public_dir, 0o755)
        public = os.path.join(public_dir, "public.save")
        with open(public, "wb") as f:
            f.write(b"x" * 100)
        os.chmod(public, 0o644)
        try:
            got = {}
            for name, path in (("secret", secret), ("missing", os.path.join(private, "none")),
                               ("public", public)):
                got[name] = run_as_nobody(self.helpers, DUMPXML_CONCURRENTLY, self.daemon.sock_ro,
                                          path, "1")[0]
            # Nobody learns neither the content nor whether the file exists.
            self.assertIn("Permission denied", got["secret"])
            self.assertIn("Permission denied", got["missing"])
            self.assertNotIn("too short", got["secret"])
            # What nobody may read itself, the daemon reads for it.
            self.assertIn("too short to be a vsnap save image", got["public"])
            # Root (on the read-only socket too) still reads its own files.
            c = RawClient(self.daemon.sock_ro)
            c.open()
            status, body = c.call(SAVE_IMAGE_GET_XML_DESC, xdr_string(secret) + struct.pack(">I", 0))
            c.close()
            self.assertEqual(status, 1)
            self.assertIn("too short to be a vsnap save image", decode_error(body)[2])
            print(json.dumps(got, indent=1))
        finally:
            for d in (private, public_dir):
                for f in os.listdir(d):
                    os.unlink(os.path.join(d, f))
                os.rmdir(d)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to switch to nobody")
    def test_idle_connections_do_not_lock_root_out(self):
        # 1100 opened read-only connections and 50 idle ones from nobody: the
        # read-only socket fills up to max_clients - reserved_rw_clients, root
        # connects and is answered at once.
        os.chmod(self.daemon.dir, 0o755)
        holder = subprocess.Popen(
            ["/usr/bin/python3", "-c", "import sys; sys.path.insert(0, sys.argv[1])\n" +
             HOLD_CONNECTIONS, self.helpers, self.daemon.sock_ro, "1100", "50"],
            preexec_fn=as_nobody(nofile=4096), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True)
        try:
            line = holder.stdout.readline()
            self.assertTrue(line, "the holder died")
            counts = json.loads(line)
            ok, took, err = self.root_can_list()
            self.assertTrue(ok, f"root locked out by {counts}: {err}")
            self.assertLess(took, 5)
            self.assertEqual(counts["opened"], MAX_CLIENTS - RESERVED_RW)
            self.assertEqual(counts["refused"], 1100 - (MAX_CLIENTS - RESERVED_RW))
            self.assertEqual(counts["idle_held"], 0)
            print(f"nobody: {counts}; root's list took {took:.2f} s")
        finally:
            holder.stdin.close()
            holder.wait(timeout=30)
        wait_for(lambda: self.root_can_list()[0], what="the daemon after the holder left")

    def test_anonymous_and_reserved_limits(self):
        self.daemon.stop()
        conf = os.path.join(self.daemon.dir, "limits.conf")
        with open(conf, "w") as f:
            f.write("[daemon]\nmax_clients=40\nmax_anonymous_clients=5\nreserved_rw_clients=10\n")
        self.daemon.start(extra=["--config", conf])
        idle = []
        for _ in range(12):
            s = socket.socket(socket.AF_UNIX)
            s.connect(self.daemon.sock_ro)
            idle.append(s)
        held = []
        for s in idle:
            s.settimeout(0.5)
            try:
                held.append(s.recv(1) != b"")
            except socket.timeout:
                held.append(True)
        self.assertEqual(sum(held), 5, "anonymous read-only connections held")
        for s in idle:
            s.close()
        opened = []
        for _ in range(40):
            c = RawClient(self.daemon.sock_ro, timeout=5)
            try:
                c.open()
                opened.append(c)
            except Exception:
                c.close()
        self.assertEqual(len(opened), 30)
        # The read-write socket keeps its reserve.
        rw = [RawClient(self.daemon.sock) for _ in range(10)]
        for c in rw:
            c.open()
        self.assertEqual(rw[-1].call(CONNECT_GET_VERSION)[0], 0)
        for c in opened + rw:
            c.close()
        self.assertIn("max_anonymous_clients (5)", self.daemon.log())

    def test_accept_backs_off_when_out_of_descriptors(self):
        # With 48 descriptors, 150 connections exhaust them: the daemon must
        # neither spin on the listening socket nor flood its log.
        self.daemon.stop()
        self.daemon.start(prefix=["prlimit", "--nofile=48:48", "--"])
        log_before = len(self.daemon.log())
        socks = []
        for _ in range(150):
            s = socket.socket(socket.AF_UNIX)
            s.setblocking(False)
            try:
                s.connect(self.daemon.sock)
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                continue
            socks.append(s)
        time.sleep(0.5)
        cpu0, t0 = self.daemon.cpu_seconds(), time.monotonic()
        time.sleep(3)
        busy = (self.daemon.cpu_seconds() - cpu0) / (time.monotonic() - t0)
        log = self.daemon.log()[log_before:]
        for s in socks:
            s.close()
        print(f"out of descriptors: {busy:.1%} CPU, {len(log)} bytes of log in 3.5 s")
        self.assertLess(busy, 0.2, f"the daemon used {busy:.0%} of a CPU while out of descriptors")
        self.assertLess(len(log), 4000, f"{len(log)} bytes of log in 3.5 s")
        self.assertIn("Too many open files", log)
        wait_for(lambda: self.root_can_list()[0], timeout=20, what="accepting again")

    def test_packets_cost_memory_only_as_their_data_arrives(self):
        # Before CONNECT_OPEN and on the read-only socket a packet is at most
        # 64 KiB, and all read-only clients hold at most 32 MiB together.
        rss0 = self.daemon.rss_mib()
        header = struct.pack(">IIiIII", REMOTE_PROGRAM, 1, 1, CALL, 1, 0)
        hogs = []
        for _ in range(8):
            s = socket.socket(socket.AF_UNIX)
            s.connect(self.daemon.sock_ro)
            s.sendall(struct.pack(">I", 32 << 20) + header)
            try:
                s.sendall(b"\0" * (32 << 20))
            except OSError:
                pass      # closed on the length word, as it must be
            hogs.append(s)
        rss_hogs = self.daemon.rss_mib()
        # 600 opened read-only clients each with 60 KiB of a 64 KiB packet.
        partial = []
        dropped = 0
        call = struct.pack(">IIiIII", REMOTE_PROGRAM, 1, 4, CALL, 99, 0)
        for _ in range(600):
            c = RawClient(self.daemon.sock_ro)
            c.open()
            try:
                c.sock.sendall(struct.pack(">I", 4 + 24 + 65000) + call + b"\0" * 60000)
            except OSError:
                dropped += 1
            partial.append(c)
        time.sleep(1)
        rss_partial = self.daemon.rss_mib()
        for c in hogs:
            c.close()
        for c in partial:
            c.close()
        ok, _, err = self.root_can_list()
        self.assertTrue(ok, err)
        print(f"RSS {rss0:.0f} MiB; 8 x 32 MiB packets: {rss_hogs:.0f} MiB; 600 x 60 KiB: "
              f"{rss_partial:.0f} MiB")
        if self.daemon.sanitized():
            self.skipTest("AddressSanitizer's allocator keeps freed memory in quarantine")
        self.assertLess(rss_hogs - rss0, 8)
        self.assertLess(rss_partial - rss0, 48)

    def test_rss_stays_bounded_under_hostile_traffic(self):
        # Rounds of many threads sending packets from 1 KB to 6 MB (refused
        # definitions) on the read-write socket: RSS must come back down
        # after each round (the allocator's arenas and mmap threshold).
        def hammer(seed):
            import random
            rng = random.Random(seed)
            c = RawClient(self.daemon.sock, timeout=60)
            c.open()
            for _ in range(12):
                size = rng.choice([1000, 100_000, 300_000, 1_000_000, 3_000_000, 6_000_000])
                c.call(11, xdr_string("<domain>" + "x" * size))
                c.call(273, struct.pack(">iI", 1, 0))
            c.close()
        rss = [self.daemon.rss_mib()]
        for r in range(3):
            threads = [threading.Thread(target=hammer, args=(r * 100 + i,)) for i in range(20)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            time.sleep(0.5)
            rss.append(self.daemon.rss_mib())
        print("RSS (MiB) at start and after each round:", [f"{x:.1f}" for x in rss])
        if self.daemon.sanitized():
            self.skipTest("AddressSanitizer's allocator keeps freed memory in quarantine")
        self.assertLess(max(rss[1:]) - rss[0], 30, rss)


if __name__ == "__main__":
    unittest.main(verbosity=2)
