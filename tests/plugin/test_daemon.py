"""How the daemon is started: systemd socket activation (LISTEN_FDS) and the
configuration file."""

import os
import shutil
import socket
import subprocess
import tempfile
import unittest

from vsnapd import SCHEMA_DIR, VIRTVSNAPD, domain_xml, wait_for


def virsh(uri, *args):
    return subprocess.run(["virsh", "-q", "-c", uri] + list(args), capture_output=True,
                          text=True, timeout=30)


@unittest.skipUnless(VIRTVSNAPD, "VIRTVSNAPD is not set")
class DaemonStartTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="vsnapd-start-")
        self.proc = None

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_socket_activation(self):
        paths = [os.path.join(self.dir, n) for n in ("act-sock", "act-sock-ro")]
        socks = []
        for p in paths:
            s = socket.socket(socket.AF_UNIX)
            s.bind(p)
            s.listen(8)
            socks.append(s)

        def as_fds_3_and_4():
            # systemd hands listening sockets over from fd 3 on.
            os.dup2(socks[0].fileno(), 3)
            os.dup2(socks[1].fileno(), 4)

        script = ('LISTEN_PID=$$ LISTEN_FDS=2 LISTEN_FDNAMES=virtvsnapd-sock:virtvsnapd-sock-ro '
                  'exec "$0" "$@"')
        state = os.path.join(self.dir, "state")
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", script, VIRTVSNAPD, "--state-dir", state,
             "--socket-dir", os.path.join(self.dir, "unused")] +
            (["--schema-dir", SCHEMA_DIR] if SCHEMA_DIR else []),
            preexec_fn=as_fds_3_and_4, pass_fds=(socks[0].fileno(), socks[1].fileno()),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for s in socks:
            s.close()
        uri, ro_uri = (f"vsnap:///system?socket={p}" for p in paths)
        res = virsh(uri, "version")
        self.assertEqual(res.returncode, 0, res.stderr)
        xml = os.path.join(self.dir, "a.xml")
        with open(xml, "w") as f:
            f.write(domain_xml("act"))
        self.assertEqual(virsh(uri, "define", xml).returncode, 0)
        res = subprocess.run(["/usr/bin/python3", "-c", f"""
import libvirt, sys
libvirt.registerErrorHandler(lambda c, e: None, None)
conn = libvirt.open({ro_uri!r})     # the second socket is the read-only one
try:
    conn.lookupByName("act").undefine()
except libvirt.libvirtError as e:
    sys.exit(0 if e.get_error_code() == libvirt.VIR_ERR_OPERATION_DENIED else 1)
sys.exit(2)
"""], capture_output=True, text=True, timeout=30)
        self.assertEqual(res.returncode, 0, res.stderr)
        # Sockets came from systemd: the socket directory was never used.
        self.assertFalse(os.path.exists(os.path.join(self.dir, "unused")))

    def test_config_file(self):
        conf = os.path.join(self.dir, "virtvsnapd.conf")
        sockdir = os.path.join(self.dir, "from-config")
        state = os.path.join(self.dir, "cfg-state")
        with open(conf, "w") as f:
            f.write(f"[daemon]\nsocket_dir={sockdir}\nstate_dir={state}\n"
                    f"run_dir={state}/run\nlog_dir={state}/log\n")
            if SCHEMA_DIR:
                f.write(f"schema_dir={SCHEMA_DIR}\n")
        self.proc = subprocess.Popen([VIRTVSNAPD, "--config", conf], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        sock = os.path.join(sockdir, "virtvsnapd-sock")
        wait_for(lambda: os.path.exists(sock + "-ro") or self.proc.poll() is not None,
                 what="socket from the config file")
        self.assertIsNone(self.proc.poll())
        xml = os.path.join(self.dir, "c.xml")
        with open(xml, "w") as f:
            f.write(domain_xml("cfg"))
        res = virsh(f"vsnap:///system?socket={sock}", "define", xml)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertTrue(os.path.exists(os.path.join(state, "domains", "cfg.xml")))

    def test_bad_config_file_is_a_clear_error(self):
        conf = os.path.join(self.dir, "broken.conf")
        with open(conf, "w") as f:
            f.write("this is not a key file\n")
        res = subprocess.run([VIRTVSNAPD, "--config", conf, "--socket-dir", self.dir],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(res.returncode, 1)
        self.assertIn("broken.conf", res.stderr)
        res = subprocess.run([VIRTVSNAPD, "--no-such-option"], capture_output=True, text=True,
                             timeout=30)
        self.assertEqual(res.returncode, 2)
        self.assertIn("no-such-option", res.stderr)

    def test_second_daemon_on_same_socket_is_refused(self):
        args = [VIRTVSNAPD, "--socket-dir", self.dir, "--state-dir", os.path.join(self.dir, "s")]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(os.path.join(self.dir, "virtvsnapd-sock-ro")),
                 what="first daemon")
        res = subprocess.run(args, capture_output=True, text=True, timeout=30)
        self.assertEqual(res.returncode, 1)
        self.assertIn("already listening", res.stderr)
        self.assertIsNone(self.proc.poll())
        self.assertEqual(virsh(f"vsnap:///system?socket={self.dir}/virtvsnapd-sock",
                               "version").returncode, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
