"""vsnap-shim's command line: every option, every refusal, signals, sockets."""

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from apishim import ApiShim

SHIM = sys.argv[1]


def run(*args, timeout=10):
    return subprocess.run([SHIM, *args], capture_output=True, text=True, timeout=timeout)


class Refusals(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="vsnap-cli-")
        self.kernel = os.path.join(self.dir, "kernel")
        with open(self.kernel, "w") as f:
            f.write("not a kernel\n")

    def refused(self, args, needle):
        res = run(*args)
        self.assertEqual(res.returncode, 1, f"{args}: exit {res.returncode}, {res.stderr}")
        self.assertTrue(res.stderr.startswith("vsnap-shim: "), res.stderr)
        self.assertIn(needle, res.stderr, args)

    def test_version(self):
        res = run("--version")
        self.assertEqual(res.returncode, 0)
        self.assertRegex(res.stdout, r"^vsnap-shim v\d+\.\d+\.\d+\n$")

    def test_help(self):
        res = run("--help")
        self.assertEqual(res.returncode, 0)
        for option in ("--api-socket", "--event-monitor", "--kernel", "--memory", "--serial",
                       "--vsock", "--log-file"):
            self.assertIn(option, res.stdout)

    def test_nothing_to_do(self):
        self.refused([], "--api-socket")

    def test_unknown_option(self):
        self.refused(["--balloon", "size=1M"], "Unknown option --balloon")
        self.refused(["--disk", "path=/x"], "--disk and --net need --kernel")
        self.refused(["--net", "tap=t0"], "--disk and --net need --kernel")

    def test_positional(self):
        self.refused(["--api-socket", f"path={self.dir}/s", "extra"], "unexpected argument")

    def test_bad_values(self):
        k = ["--kernel", self.kernel]
        cases = [
            (k + ["--memory", "size=12Q"], "size"),
            (k + ["--memory", "size=1M"], "memory.size"),
            (k + ["--memory", "size=64G1"], "size"),
            (k + ["--memory", "bogus=1"], "unknown parameter 'bogus'"),
            (k + ["--memory", "prefault=maybe"], "prefault"),
            (k + ["--cpus", "boot=0"], "cpus.boot_vcpus"),
            (k + ["--cpus", "boot=65"], "cpus.boot_vcpus"),
            (k + ["--cpus", "boot=4,max=2"], "cpus.boot_vcpus"),
            (k + ["--serial", "bogus"], "unknown parameter 'bogus'"),
            (k + ["--serial", "file="], "needs a path"),
            (k + ["--serial", "tty"], "Tty for both serial and console"),
            (k + ["--console", "file="], "needs a path"),
            (k + ["--vsock", "cid=2,socket=/tmp/v"], "vsock.cid"),
            (k + ["--vsock", "cid=3"], "required"),
            (["--kernel", os.path.join(self.dir, "missing")], "No such file"),
            (["--memory", "size=1G"], "need --kernel"),
            (["--api-socket", "fd=abc"], "not a number"),
            (["--api-socket", "path="], "path="),
            (["--api-socket", "path=/nonexistent-dir/x.sock"], "/nonexistent-dir/x.sock"),
            (["--api-socket", "path=/x,fd=3"], "exactly one"),
            (["--api-socket", "fd=999"], "fd=999"),
            (["--api-socket", f"path={self.dir}/s", "--event-monitor", "path=/nonexistent-dir/ev"],
             "/nonexistent-dir/ev"),
            (["--api-socket", f"path={self.dir}/s", "--event-monitor", "fd=998"], "fd=998"),
            (["--api-socket", f"path={self.dir}/s", "--log-file", "/nonexistent-dir/log"],
             "/nonexistent-dir/log"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                self.refused(args, needle)

    def test_api_socket_path_not_a_socket(self):
        path = os.path.join(self.dir, "regular")
        with open(path, "w") as f:
            f.write("keep me")
        self.refused(["--api-socket", f"path={path}"], "not a socket")
        with open(path) as f:
            self.assertEqual(f.read(), "keep me")


class Running(unittest.TestCase):
    def test_sigterm_and_sigint_exit_0_and_remove_socket(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(sig=sig), ApiShim(SHIM) as shim:
                self.assertEqual(shim.terminate(sig), 0, shim.describe())
                self.assertFalse(os.path.exists(shim.socket_path))

    def test_stale_socket_replaced_live_one_refused(self):
        workdir = tempfile.mkdtemp(prefix="vsnap-cli-")
        path = os.path.join(workdir, "api.sock")
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(path)  # bound, never listening, then closed: what a crash leaves
        stale.close()
        with ApiShim(SHIM, workdir=workdir) as shim:
            shim.alive()
            res = run("--api-socket", f"path={path}")
            self.assertEqual(res.returncode, 1)
            self.assertIn("in use", res.stderr)
            shim.alive()

    def test_api_socket_bare_path(self):
        # Cloud Hypervisor also takes the path without "path=".
        workdir = tempfile.mkdtemp(prefix="vsnap-cli-")
        shim = ApiShim(SHIM, workdir=workdir)
        shim.argv[2] = shim.socket_path
        with shim:
            shim.alive()

    def test_api_socket_fd(self):
        workdir = tempfile.mkdtemp(prefix="vsnap-cli-")
        path = os.path.join(workdir, "handed.sock")
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        listener.listen(8)
        proc = subprocess.Popen([SHIM, "--api-socket", f"fd={listener.fileno()}"],
                                pass_fds=[listener.fileno()], stderr=subprocess.PIPE)
        listener.close()
        try:
            out = subprocess.run(["curl", "-sS", "--max-time", "5", "--unix-socket", path,
                                  "http://localhost/api/v1/vmm.ping"],
                                 capture_output=True, text=True, timeout=10)
            self.assertIn(f'"pid":{proc.pid}', out.stdout, out.stderr)
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=10), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def test_event_monitor_fd_and_log_file(self):
        workdir = tempfile.mkdtemp(prefix="vsnap-cli-")
        r, w = os.pipe()
        sock = os.path.join(workdir, "api.sock")
        log = os.path.join(workdir, "log")
        proc = subprocess.Popen([SHIM, "--api-socket", f"path={sock}", "--event-monitor",
                                 f"fd={w}", "--log-file", log, "-v", "-v"], pass_fds=[w])
        os.close(w)
        try:
            with os.fdopen(r) as events:
                first = events.readline()
            self.assertRegex(first, r'^\{"timestamp":\{"secs":\d+,"nanos":\d+\},'
                                    r'"source":"vmm","event":"starting","properties":null\}$')
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=10), 0)
            with open(log) as f:
                text = f.read()
            self.assertIn("API listening on " + sock, text)
            self.assertIn("debug", text)  # -v -v reaches debug
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def test_event_pipe_closed_by_reader_is_survived(self):
        r, w = os.pipe()
        os.close(r)  # every event write gets EPIPE (and SIGPIPE, which is ignored)
        workdir = tempfile.mkdtemp(prefix="vsnap-cli-")
        shim = ApiShim(SHIM, workdir=workdir)
        shim.argv += ["--event-monitor", f"fd={w}"]
        shim.proc = None
        try:
            shim.start(pass_fds=[w])
            os.close(w)
            shim.alive()
            shim.expect("PUT", "vm.delete", 204)
            shim.alive()
            self.assertIn("event dropped", shim.log())
            self.assertEqual(shim.terminate(), 0)
        finally:
            shim.kill()

    def test_event_fifo_without_reader_does_not_block(self):
        workdir = tempfile.mkdtemp(prefix="vsnap-cli-")
        fifo = os.path.join(workdir, "events")
        os.mkfifo(fifo)
        start = time.monotonic()
        with ApiShim(SHIM, events=fifo) as shim:
            shim.alive()  # nobody reads the FIFO, the shim serves anyway
            self.assertLess(time.monotonic() - start, 5)
            self.assertEqual(shim.terminate(), 0)

    def test_quiet_by_default(self):
        workdir = tempfile.mkdtemp(prefix="vsnap-cli-")
        sock = os.path.join(workdir, "api.sock")
        proc = subprocess.Popen([SHIM, "--api-socket", f"path={sock}"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(500):
            if os.path.exists(sock):
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
        self.assertEqual(proc.returncode, 0)
        self.assertEqual(err, b"", "without -v only warnings are logged")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
