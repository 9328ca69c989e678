"""Who may do what: the read-write socket is for its owner (root) only, the
read-only socket for anyone, and session mode for a normal user."""

import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import unittest

import libvirt

from nobody import NOBODY, ReadableCopy, as_nobody
from vsnapd import VIRTVSNAPD, SCHEMA_DIR, DaemonTest, RawClient, decode_error, domain_xml, \
    wait_for, xdr_string


RAW_CLIENT = r"""
import struct, sys
sys.path.insert(0, sys.argv[1])
from vsnapd import RawClient, decode_error, xdr_string, domain_xml
c = RawClient(sys.argv[2])
try:
    c.open()
except (ConnectionError, OSError) as e:
    print("closed"); sys.exit(0)
status, body = c.call(273, struct.pack(">iI", 1, 0))      # LIST_ALL_DOMAINS
print("list", status, struct.unpack(">I", body[:4])[0] if status == 0 else decode_error(body)[0])
status, body = c.call(11, xdr_string(domain_xml("nobodys")))   # DEFINE_XML
print("define", status, decode_error(body)[0] if status else 0)
"""


@unittest.skipUnless(os.geteuid() == 0, "needs root to switch to nobody")
class AccessTest(DaemonTest):
    def setUp(self):
        super().setUp()
        self.readable = ReadableCopy()
        self.addCleanup(self.readable.close)

    def run_as_nobody(self, socket_path):
        res = subprocess.run(["/usr/bin/python3", "-c", RAW_CLIENT, self.readable.helpers(),
                              socket_path],
                             preexec_fn=as_nobody(), capture_output=True, text=True, timeout=30)
        self.assertEqual(res.returncode, 0, res.stderr)
        return res.stdout.split("\n")

    def test_nobody_reads_but_does_not_write(self):
        os.chmod(self.daemon.dir, 0o755)
        self.define("mine")
        out = self.run_as_nobody(self.daemon.sock_ro)
        self.assertEqual(out[0], "list 0 1")
        self.assertEqual(out[1], f"define 1 {libvirt.VIR_ERR_OPERATION_DENIED}")
        # Even when the file mode lets nobody reach the read-write socket, the
        # daemon checks the peer's credentials and hangs up.
        os.chmod(self.daemon.sock, 0o777)
        self.assertEqual(self.run_as_nobody(self.daemon.sock)[0], "closed")
        self.assertEqual(self.daemon.virsh("list", "--all", "--name").stdout.split(), ["mine"])


@unittest.skipUnless(os.geteuid() == 0, "needs root to switch to nobody")
class SessionTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="vsnapd-session-")
        os.chmod(self.dir, 0o755)
        self.runtime = os.path.join(self.dir, "run")
        self.home = os.path.join(self.dir, "home")
        for d in (self.runtime, self.home):
            os.mkdir(d, 0o700)
            os.chown(d, NOBODY.pw_uid, NOBODY.pw_gid)
        self.env = dict(os.environ, XDG_RUNTIME_DIR=self.runtime, HOME=self.home)
        self.env.pop("XDG_DATA_HOME", None)
        self.env.pop("XDG_CONFIG_HOME", None)
        self.proc = None
        # nobody runs the daemon: a copy it can reach, wherever the build is.
        readable = ReadableCopy()
        self.addCleanup(readable.close)
        self.virtvsnapd = readable.copy(VIRTVSNAPD)
        self.schema_dir = readable.copy(SCHEMA_DIR) if SCHEMA_DIR else None

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def virsh(self, *args):
        return subprocess.run(["virsh", "-q", "-c", "vsnap:///session"] + list(args),
                              preexec_fn=as_nobody(), env=self.env, capture_output=True,
                              text=True, timeout=30)

    def write_session_config(self, text):
        """nobody's ~/.config/vsnap/virtvsnapd.conf."""
        path = self.home
        for name in (".config", "vsnap"):
            path = os.path.join(path, name)
            os.mkdir(path, 0o700)
            os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
        with open(os.path.join(path, "virtvsnapd.conf"), "w") as f:
            f.write(text)
        os.chown(f.name, NOBODY.pw_uid, NOBODY.pw_gid)

    def test_session_daemon(self):
        argv = [self.virtvsnapd, "--timeout", "2"]
        if self.schema_dir:
            argv += ["--schema-dir", self.schema_dir]
        self.proc = subprocess.Popen(argv, preexec_fn=as_nobody(), env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sock = os.path.join(self.runtime, "libvirt", "virtvsnapd-sock")
        wait_for(lambda: os.path.exists(sock) or self.proc.poll() is not None, what="socket")
        self.assertIsNone(self.proc.poll())
        # Plain vsnap:///session finds the daemon through XDG_RUNTIME_DIR.
        xml_path = os.path.join(self.dir, "s.xml")
        with open(xml_path, "w") as f:
            f.write(domain_xml("sess"))
        res = self.virsh("define", xml_path)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(self.virsh("list", "--all", "--name").stdout.split(), ["sess"])
        self.assertEqual(self.virsh("uri").stdout.strip(), "vsnap:///session")
        self.assertTrue(os.path.exists(
            os.path.join(self.home, ".local", "share", "vsnap", "domains", "sess.xml")))
        # Idle (no client, nothing running) for --timeout seconds: it exits.
        self.assertEqual(self.proc.wait(timeout=15), 0, self.proc.stdout.read())
        self.assertFalse(os.path.exists(sock))

    def test_client_spawns_the_daemon(self):
        # In direct mode libvirt's client starts the session daemon itself
        # ($VIRTD_PATH/virtvsnapd --timeout=120) when nobody listens.
        env = dict(self.env, VIRTD_PATH=os.path.dirname(self.virtvsnapd))
        if self.schema_dir:   # the copy is outside the build tree: it needs telling
            self.write_session_config(f"[daemon]\nschema_dir = {self.schema_dir}\n")
        res = subprocess.run(["virsh", "-q", "-c", "vsnap:///session?mode=direct", "list", "--all"],
                             preexec_fn=as_nobody(), env=env, capture_output=True, text=True,
                             timeout=30)
        self.assertEqual(res.returncode, 0, res.stderr)
        sock = os.path.join(self.runtime, "libvirt", "virtvsnapd-sock-ro")
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(sock)
            pid, uid, _ = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                           struct.calcsize("3i")))
        self.assertEqual(uid, NOBODY.pw_uid)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            self.assertIn(b"--timeout=120", f.read())
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not os.path.exists(sock), what="the spawned daemon to exit")


if __name__ == "__main__":
    unittest.main(verbosity=2)
