"""libvirt's Cloud Hypervisor driver (src/ch/) replayed against the shim's
cloud-hypervisor link: the version probe, the VMM started as the driver starts
it (an inherited listening socket, an event-monitor FIFO it reads), and the
requests its monitor sends for start, info, suspend, resume, save into a
directory it prepared, restore, shutdown and vmm.shutdown, with the HTTP
client it uses (libcurl, here through curl) and, for vm.restore, the raw
request it writes to the socket itself.

argv: cloud-hypervisor link, test guest, vsnap-pattern tool."""

import json
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import CommandConn, pattern_checksum  # noqa: E402

CH, GUEST, PATTERN = sys.argv[1:4]
MIB = 1 << 20
FILL_MIB, SEED = 8, 5
READY = re.compile(r"vsnap-testguest: ready sum=([0-9a-f]{16})")
TICK = re.compile(r"vsnap-testguest: tick (\d+)")


def libvirt_version(output):
    """chExtractVersion (ch_conf.c): skip "cloud-hypervisor ", keep what follows
    the last '/' of the whole output, drop a leading 'v', cut at the first '-',
    then virStringParseVersion with missing parts allowed."""
    if not output.startswith("cloud-hypervisor "):
        raise ValueError("Unexpected output of cloud-hypervisor binary")
    rest = output[len("cloud-hypervisor "):]
    rest = rest[rest.rfind("/") + 1:]
    if rest.startswith("v"):
        rest = rest[1:]
    rest = rest.split("-", 1)[0]
    m = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", rest)
    if not m:
        raise ValueError(f"Unable to parse cloud-hypervisor version: {rest}")
    major, minor, micro = (int(x or 0) for x in m.groups())
    return major * 1000000 + minor * 1000 + micro


def vm_json(kernel, cmdline, memory_kib, vcpus=1, extra=None):
    """virCHMonitorBuildVMJson for <console type='pty'>, <serial type='pty'>, a
    kernel, a cmdline and no disks or nets, members in its order."""
    content = {
        "console": {"mode": "Pty"},
        "serial": {"mode": "Pty"},
        "cpus": {"boot_vcpus": vcpus, "max_vcpus": vcpus},
        "memory": {"size": memory_kib * 1024},
        "payload": {"kernel": kernel, "cmdline": cmdline},
    }
    content.update(extra or {})
    return json.dumps(content, separators=(",", ":"))


class ChVmm:
    """One cloud-hypervisor process as virCHMonitorNew starts it, and the
    requests virCHMonitor* send."""

    def __init__(self, workdir, name):
        self.dir = workdir
        self.name = name
        self.socket_path = os.path.join(workdir, f"{name}-socket")
        self.fifo = os.path.join(workdir, f"{name}-event-monitor-fifo")
        self.empty = os.path.join(workdir, "empty-upload")
        open(self.empty, "w").close()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.socket_path)
        listener.listen(1)
        os.chmod(self.socket_path, 0o664)
        os.mkfifo(self.fifo, 0o600)
        self.log = open(os.path.join(workdir, f"{name}.log"), "wb")
        fd = listener.fileno()
        self.proc = subprocess.Popen([CH, "--api-socket", f"fd={fd}", "--event-monitor", f"path={self.fifo}"],
                                     pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, preexec_fn=lambda: os.umask(0o002))
        listener.close()  # VIR_COMMAND_PASS_FD_CLOSE_PARENT
        self.events = []
        self.events_lock = threading.Condition()
        self.event_fd = os.open(self.fifo, os.O_RDONLY)
        self.reader = threading.Thread(target=self._read_events, daemon=True)
        self.reader.start()

    def _read_events(self):
        """ch_events.c: JSON documents found by counting braces."""
        buf = ""
        while True:
            try:
                data = os.read(self.event_fd, 4096)
            except OSError:
                return
            if not data:
                return
            buf += data.decode()
            depth, start, i = 0, None, 0
            while i < len(buf):
                if buf[i] == "{":
                    depth += 1
                    if depth == 1:
                        start = i
                elif buf[i] == "}" and depth > 0:
                    depth -= 1
                    if depth == 0:
                        with self.events_lock:
                            self.events.append(json.loads(buf[start:i + 1]))
                            self.events_lock.notify_all()
                        buf, i, start = buf[i + 1:], -1, None
                i += 1

    def wait_event(self, source, event, timeout=20):
        deadline = time.monotonic() + timeout
        with self.events_lock:
            while not any(e["source"] == source and e["event"] == event for e in self.events):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.name}: no {source}:{event} event in {self.names()}")
                self.events_lock.wait(left)

    def names(self):
        """Cloud Hypervisor's events (vm and vmm); the driver only warns about
        others, such as vsnap's guest:ready."""
        with self.events_lock:
            return [f"{e['source']}:{e['event']}" for e in self.events if e["source"] in ("vm", "vmm")]

    def curl(self, *args):
        argv = ["curl", "-sS", "--max-time", "60", "--unix-socket", self.socket_path, "-w", "\n%{http_code}",
                *args]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=70)
        if res.returncode != 0:
            raise AssertionError(f"curl {args}: {res.stderr}")
        text, _, code = res.stdout.rpartition("\n")
        return int(code), text

    def put_no_content(self, endpoint):
        """virCHMonitorPutNoContent: CURLOPT_UPLOAD with CURLOPT_INFILESIZE 0."""
        return self.curl("-T", self.empty, "-H", "Accept: application/json",
                         f"http://localhost/api/v1/{endpoint}")[0]

    def put_json(self, endpoint, payload):
        """virCHMonitorCreateVM / SaveVM: a custom PUT with CURLOPT_POSTFIELDS."""
        return self.curl("-X", "PUT", "-H", "Accept: application/json", "-H", "Content-Type: application/json",
                         "--data-binary", payload, f"http://localhost/api/v1/{endpoint}")

    def get(self, endpoint):
        """virCHMonitorGet with a response wanted."""
        code, text = self.curl("-H", "Accept: application/json", "-H", "Content-Type: application/json",
                               f"http://localhost/api/v1/{endpoint}")
        return code, json.loads(text) if code == 200 else text

    def connect_and_close(self):
        """chProcessAddNetworkDevices with no <interface>: connect, send nothing."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.socket_path)
        s.close()

    def raw_restore(self, from_dir):
        """virCHProcessStartRestore: its own request on a fresh connection
        (sendmsg, as with tap fds), one recv of the answer."""
        payload = json.dumps({"source_url": "file://" + from_dir}, separators=(",", ":"))
        request = ("PUT /api/v1/vm.restore HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(payload)}\r\n\r\n{payload}").encode()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self.socket_path)
            s.sendmsg([request])
            s.settimeout(120)  # libvirt waits without a timeout: restore is synchronous
            response = s.recv(1023).decode(errors="replace")
        finally:
            s.close()
        m = re.match(r"HTTP/1\.\d (\d+)", response)
        if not m:
            raise AssertionError(f"Failed to parse HTTP response code: {response!r}")
        return int(m.group(1)), response

    def abort(self):
        """virProcessAbort: SIGTERM, then SIGKILL."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self):
        self.abort()
        os.close(self.event_fd)
        self.log.close()
        for path in (self.socket_path, self.fifo):
            if os.path.exists(path):
                os.unlink(path)

    def log_text(self):
        with open(os.path.join(self.dir, f"{self.name}.log"), errors="replace") as f:
            return f.read()[-3000:]


class Pty:
    """The reading end libvirt hands out for a pty console: the path vm.info names."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        self.text = ""

    def wait_for(self, pattern, timeout=30, after=0):
        deadline = time.monotonic() + timeout
        while True:
            m = pattern.search(self.text, after)
            if m:
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern.pattern!r} on the pty; got {self.text[-500:]!r}")
            if select.select([self.fd], [], [], left)[0]:
                try:
                    self.text += os.read(self.fd, 4096).decode(errors="replace")
                except BlockingIOError:
                    pass

    def close(self):
        os.close(self.fd)


def assert_pty_path(testcase, path):
    testcase.assertIsInstance(path, str)
    testcase.assertTrue(stat.S_ISCHR(os.stat(path).st_mode), path)


class ChDriver(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="vsnap-ch-")
        self.vmms = []

    def tearDown(self):
        for vmm in self.vmms:
            vmm.close()
        subprocess.run(["rm", "-rf", self.dir])

    def start_vmm(self, name):
        vmm = ChVmm(self.dir, name)
        self.vmms.append(vmm)
        vmm.wait_event("vmm", "starting")
        return vmm

    def start_domain(self, vmm, cmdline, extra=None):
        """virCHProcessStart: vm.create, the net step, vm.boot, then
        virCHProcessSetup's vm.info for the pty paths."""
        code, text = vmm.put_json("vm.create", vm_json(GUEST, cmdline, 64 * 1024, extra=extra))
        self.assertEqual(code, 204, f"vm.create: {text}\n{vmm.log_text()}")
        vmm.connect_and_close()
        self.assertEqual(vmm.put_no_content("vm.boot"), 204, vmm.log_text())
        vmm.wait_event("vm", "booted")
        code, info = vmm.get("vm.info")
        self.assertEqual(code, 200)
        self.assertEqual(info["state"], "Running")
        assert_pty_path(self, info["config"]["console"]["file"])
        assert_pty_path(self, info["config"]["serial"]["file"])
        self.assertNotEqual(info["config"]["console"]["file"], info["config"]["serial"]["file"])
        return info

    def test_version_probe(self):
        res = subprocess.run([CH, "--version"], capture_output=True, text=True, timeout=10,
                             env=dict(os.environ, LC_ALL="C"))
        self.assertEqual(res.returncode, 0)
        self.assertRegex(res.stdout, r"^cloud-hypervisor v\d+\.\d+\.\d+\nvsnap-shim v\d+\.\d+\.\d+\n$")
        version = libvirt_version(res.stdout)
        self.assertGreaterEqual(version, 15000000)  # the driver's minimum
        self.assertGreaterEqual(version, 28000000)  # it then sends "payload", which the shim speaks
        vmm = self.start_vmm("ping")
        code, ping = vmm.get("vmm.ping")
        self.assertEqual(code, 200)
        self.assertEqual(version, libvirt_version("cloud-hypervisor v" + ping["version"]))
        self.assertIn("vsnap-shim v", ping["build_version"])

    def test_lifecycle(self):
        """Start, info, suspend, resume, shutdown, vmm.shutdown."""
        vmm = self.start_vmm("life")
        info = self.start_domain(vmm, f"console=hvc0 vsnap.hvc=1 vsnap.fill_mib={FILL_MIB} vsnap.seed={SEED} "
                                      "vsnap.heartbeat_ms=100")
        console = Pty(info["config"]["console"]["file"])
        serial = Pty(info["config"]["serial"]["file"])
        try:
            want = pattern_checksum(PATTERN, SEED, FILL_MIB * MIB)
            self.assertEqual(console.wait_for(READY).group(1), want)
            self.assertEqual(serial.wait_for(READY).group(1), want)
            console.wait_for(TICK)
            self.assertEqual(vmm.put_no_content("vm.pause"), 204)
            vmm.wait_event("vm", "paused")
            self.assertEqual(vmm.get("vm.info")[1]["state"], "Paused")
            self.assertEqual(vmm.put_no_content("vm.resume"), 204)
            vmm.wait_event("vm", "resumed")
            last = int(TICK.findall(console.text)[-1])
            console.wait_for(re.compile(rf"tick {last + 2}\n"))
            code, counters = vmm.get("vm.counters")
            self.assertGreater(counters["console"]["tx_bytes"], 0)
        finally:
            console.close()
            serial.close()
        self.assertEqual(vmm.put_no_content("vm.shutdown"), 204)
        vmm.wait_event("vm", "shutdown")
        self.assertEqual(vmm.put_no_content("vmm.shutdown"), 204)
        vmm.wait_event("vmm", "shutdown")
        self.assertEqual(vmm.proc.wait(timeout=20), 0)
        self.assertEqual(vmm.names(), ["vmm:starting", "vm:booting", "vm:booted", "vm:pausing", "vm:paused",
                                       "vm:resuming", "vm:resumed", "vm:shutdown", "vmm:shutdown"])

    def test_save_into_prepared_directory_and_restore(self):
        """chDoDomainSave, then chDomainRestoreFlags. vm.create carries a vsock
        device besides libvirt's members, so the test can ask the restored guest
        for the checksum of its fill region."""
        vsock = os.path.join(self.dir, "vsock")
        vmm = self.start_vmm("src")
        info = self.start_domain(vmm, f"vsnap.hvc=1 vsnap.fill_mib={FILL_MIB} vsnap.seed={SEED} "
                                      "vsnap.heartbeat_ms=100",
                                 extra={"vsock": {"cid": 3, "socket": vsock}})
        console = Pty(info["config"]["console"]["file"])
        try:
            saved_sum = console.wait_for(READY).group(1)
        finally:
            console.close()
        self.assertEqual(saved_sum, pattern_checksum(PATTERN, SEED, FILL_MIB * MIB))

        # chDoDomainSave: suspend, the directory with libvirt-save.xml, vm.snapshot, stop.
        self.assertEqual(vmm.put_no_content("vm.pause"), 204)
        save_dir = os.path.join(self.dir, "dom.save")
        os.mkdir(save_dir, 0o770)
        xml = os.path.join(save_dir, "libvirt-save.xml")
        header = b"CloudHypervisorXML\0" + b"<domain type='kvm'><name>dom</name></domain>\0"
        with open(os.open(xml, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600), "wb") as f:
            f.write(header)
        code, text = vmm.put_json("vm.snapshot", json.dumps({"destination_url": "file://" + save_dir},
                                                            separators=(",", ":")))
        self.assertEqual(code, 204, f"vm.snapshot: {text}\n{vmm.log_text()}")
        vmm.wait_event("vm", "snapshotted")
        self.assertEqual(sorted(os.listdir(save_dir)),
                         ["config.json", "libvirt-save.xml", "memory-ranges", "state.json"])
        with open(xml, "rb") as f:
            self.assertEqual(f.read(), header)
        self.assertFalse([n for n in os.listdir(self.dir) if ".partial" in n])
        # A second save into the same directory is refused, and changes nothing.
        code, text = vmm.put_json("vm.snapshot", json.dumps({"destination_url": "file://" + save_dir}))
        self.assertEqual(code, 400, text)
        self.assertIn("state.json", text)
        vmm.abort()
        self.assertEqual(vmm.names()[-4:], ["vm:pausing", "vm:paused", "vm:snapshotting", "vm:snapshotted"])

        # virCHProcessStartRestore: a new VMM, the raw vm.restore, setup's
        # vm.info, then chDomainRestoreFlags' vm.resume.
        dst = self.start_vmm("dst")
        code, response = dst.raw_restore(save_dir)
        self.assertEqual(code, 204, f"{response}\n{dst.log_text()}")
        code, info = dst.get("vm.info")
        self.assertEqual((code, info["state"]), (200, "Paused"))
        assert_pty_path(self, info["config"]["console"]["file"])
        console = Pty(info["config"]["console"]["file"])
        try:
            self.assertEqual(dst.put_no_content("vm.resume"), 204)
            dst.wait_event("vm", "resumed")
            console.wait_for(TICK)  # the restored guest writes to the new pty
            self.assertEqual(self.restored_sum(vsock), saved_sum)
        finally:
            console.close()
        self.assertEqual(dst.names(), ["vmm:starting", "vm:restoring", "vm:restored", "vm:resuming",
                                       "vm:resumed"])
        self.assertEqual(dst.put_no_content("vm.shutdown"), 204)
        self.assertEqual(dst.put_no_content("vmm.shutdown"), 204)
        self.assertEqual(dst.proc.wait(timeout=20), 0)

    def restored_sum(self, vsock, timeout=30):
        """The guest serves its command port again once it has re-announced
        itself after the restore's transport reset."""
        deadline = time.monotonic() + timeout
        while True:
            conn = None
            try:
                conn = CommandConn(vsock)
                if conn.connect_reply.startswith("OK "):
                    reply = conn.cmd(f"SUM {16 * MIB:#x} {FILL_MIB * MIB:#x}")
                    self.assertTrue(reply.startswith("SUM "), reply)
                    return reply[4:]
            except OSError:
                pass
            finally:
                if conn:
                    conn.close()
            if time.monotonic() > deadline:
                raise AssertionError("the restored guest never served its command port")
            time.sleep(0.1)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
