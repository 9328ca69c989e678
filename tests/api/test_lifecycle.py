"""The whole lifecycle on the real test guest and real KVM: create, boot, pause,
resume, reboot (API and guest), power button, shutdown, delete, the event
monitor's lines in order, vm.counters, SIGTERM with a running VM."""

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from apishim import ApiShim
from vsnaptest import error_message, read_text  # apishim puts tests/lib on the path

SHIM = sys.argv[1]
GUEST = sys.argv[2] if len(sys.argv) > 2 else None
BOOTED = "vsnap-testguest: booted"
# Guests that must keep running spin when idle: these tests are about the API,
# not about the guest's HLT/LAPIC-timer idle path (tests/boot covers that).
SPIN = "vsnap.idle_spin=1"


class EventReader:
    """Reads the event monitor FIFO on a thread, one JSON object per line."""

    def __init__(self, path):
        self.path = path
        self.events = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        with open(self.path) as f:
            for line in f:
                with self.lock:
                    self.events.append(json.loads(line))

    def names(self):
        with self.lock:
            return [(e["source"], e["event"]) for e in self.events]

    def wait_for(self, source, event, count=1, timeout=20):
        deadline = time.monotonic() + timeout
        while self.names().count((source, event)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {count}x {source}/{event} event; got {self.names()}")
            time.sleep(0.02)


serial_text = read_text


def wait_serial(path, regex, count=1, timeout=60):
    deadline = time.monotonic() + timeout
    while len(re.findall(regex, serial_text(path))) < count:
        if "vsnap-testguest: exception" in serial_text(path):
            raise AssertionError(f"the guest crashed waiting for {regex!r}:\n{serial_text(path)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"serial never showed {count}x {regex!r}:\n{serial_text(path)}")
        time.sleep(0.05)


@unittest.skipUnless(GUEST and os.path.exists(GUEST), "the test guest is not built")
class Lifecycle(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="vsnap-life-")
        self.fifo = os.path.join(self.dir, "events")
        os.mkfifo(self.fifo)
        self.serial = os.path.join(self.dir, "serial.log")
        self.shim = ApiShim(SHIM, events=self.fifo, workdir=self.dir)
        self.shim.start()
        self.events = EventReader(self.fifo)

    def tearDown(self):
        self.shim.kill()

    def config(self, cmdline=""):
        return {"payload": {"kernel": GUEST, "cmdline": cmdline},
                "cpus": {"boot_vcpus": 1}, "memory": {"size": 64 << 20},
                "serial": {"mode": "File", "file": self.serial}, "console": {"mode": "Off"}}

    def info(self):
        return self.shim.expect("GET", "vm.info", 200)

    def ticks(self):
        return len(re.findall(r"vsnap-testguest: tick \d+", serial_text(self.serial)))

    def test_lifecycle(self):
        s = self.shim
        s.expect("PUT", "vm.create", 204, body=self.config(SPIN + " vsnap.heartbeat_ms=20"))
        s.expect("PUT", "vm.boot", 204)
        self.assertEqual(self.info()["state"], "Running")
        wait_serial(self.serial, BOOTED)
        wait_serial(self.serial, r"tick \d+", count=2)
        s.expect("PUT", "vm.boot", 405, contains="Running")
        s.expect("PUT", "vm.resume", 405, contains="Running")

        counters = s.expect("GET", "vm.counters", 200)
        # The guest printed "booted" and ticks, so the serial port counted them.
        self.assertGreaterEqual(counters["serial"]["tx_bytes"], len(BOOTED))
        for device, values in counters.items():
            for name, value in values.items():
                self.assertIsInstance(value, int, f"{device}.{name}")

        s.expect("PUT", "vm.pause", 204)
        self.assertEqual(self.info()["state"], "Paused")
        s.expect("PUT", "vm.pause", 405, contains="Paused")
        s.expect("PUT", "vm.power-button", 405)
        before = self.ticks()
        time.sleep(0.5)
        self.assertEqual(self.ticks(), before, "the guest ran while paused")
        s.expect("PUT", "vm.resume", 204)
        self.assertEqual(self.info()["state"], "Running")
        wait_serial(self.serial, r"tick \d+", count=before + 3)

        s.expect("PUT", "vm.reboot", 204)
        info = self.info()
        self.assertEqual(info["state"], "Running")
        self.assertEqual(info["vsnap"]["last_stop_reason"], "reboot")
        self.assertEqual(info["vsnap"]["last_stop_origin"], "api")
        self.assertEqual(info["vsnap"]["boot_count"], 2)
        wait_serial(self.serial, BOOTED, count=2)

        s.expect("PUT", "vm.power-button", 204)
        s.wait_state("Shutdown", timeout=30)
        wait_serial(self.serial, "power button, powering off")
        info = self.info()
        self.assertEqual(info["vsnap"]["last_stop_reason"], "poweroff")
        self.assertEqual(info["vsnap"]["last_stop_origin"], "guest")
        s.expect("PUT", "vm.shutdown", 405, contains="Shutdown")
        s.expect("GET", "vm.counters", 405)

        s.expect("PUT", "vm.boot", 204)  # a shut-down VM boots again
        wait_serial(self.serial, BOOTED, count=3)
        s.expect("PUT", "vm.shutdown", 204)
        self.assertEqual(self.info()["state"], "Shutdown")
        s.expect("PUT", "vm.delete", 204)
        s.expect("GET", "vm.info", 404)
        s.alive()

        self.events.wait_for("vm", "deleted")
        vm_events = [e for src, e in self.events.names() if src == "vm"]
        self.assertEqual(vm_events, [
            "booting", "booted", "pausing", "paused", "resuming", "resumed",
            "rebooting", "rebooted", "shutdown", "booting", "booted", "shutdown", "deleted"])
        self.assertEqual(self.events.names()[0], ("vmm", "starting"))
        stamps = [e["timestamp"]["secs"] * 10**9 + e["timestamp"]["nanos"]
                  for e in self.events.events]
        self.assertEqual(stamps, sorted(stamps))

    def test_coredump_nmi_and_scancodes(self):
        """vm.coredump (Cloud Hypervisor's file:// form) of a running VM is
        live: no pause or resume event; vm.nmi and vsnap's vm.send-scancodes
        answer 204, and their bad bodies 400."""
        s = self.shim
        s.expect("PUT", "vm.create", 204, body=self.config(SPIN))
        s.expect("PUT", "vm.boot", 204)
        wait_serial(self.serial, BOOTED)
        core = os.path.join(self.dir, "vm.core")
        s.expect("PUT", "vm.coredump", 204, body={"destination_url": "file://" + core})
        with open(core, "rb") as f:
            head = f.read(20)
        self.assertEqual((head[:4], head[16]), (b"\x7fELF", 4))   # ET_CORE
        self.assertEqual(self.info()["state"], "Running")
        s.expect("PUT", "vm.coredump", 400, body={"destination_url": "file://" + core}, contains="exists")
        for body in ({}, {"destination_url": "http://x/y"}, {"destination_url": "file:///x", "more": 1}):
            with self.subTest(body=body):
                s.expect("PUT", "vm.coredump", 400, body=body, contains="vm.coredump takes")
        s.expect("PUT", "vm.nmi", 204)
        s.expect("PUT", "vm.send-scancodes", 204, body={"scancodes": [0x1e, 0x9e]})
        for body in ({"scancodes": []}, {"scancodes": [256]}, {"scancodes": ["a"]}, {"scancodes": [1] * 65},
                     {"scancodes": [1], "more": 1}, {"codes": [1]}):
            with self.subTest(body=body):
                s.expect("PUT", "vm.send-scancodes", 400, body=body, contains="vm.send-scancodes takes")
        s.expect("PUT", "vm.pause", 204)
        s.expect("PUT", "vm.nmi", 204)    # pending until the VM runs
        os.unlink(core)
        s.expect("PUT", "vm.coredump", 204, body={"destination_url": "file://" + core})
        s.expect("PUT", "vm.resume", 204)
        s.expect("PUT", "vm.shutdown", 204)
        for endpoint, body in (("vm.nmi", None), ("vm.send-scancodes", {"scancodes": [1]}),
                               ("vm.coredump", {"destination_url": "file://" + core + "2"})):
            with self.subTest(endpoint=endpoint):
                s.expect("PUT", endpoint, 405, body=body, contains="Shutdown")
        self.events.wait_for("vm", "shutdown")
        vm_events = [e for src, e in self.events.names() if src == "vm"]
        self.assertEqual(vm_events, ["booting", "booted", "pausing", "paused", "resuming", "resumed", "shutdown"])

    def test_guest_reset_reboots_from_same_config(self):
        s = self.shim
        s.expect("PUT", "vm.create", 204, body=self.config("vsnap.reboot_after_ready=1"))
        s.expect("PUT", "vm.boot", 204)
        self.events.wait_for("vm", "rebooted", timeout=60)
        wait_serial(self.serial, BOOTED, count=2)
        info = self.info()
        self.assertEqual(info["state"], "Running")
        self.assertEqual(info["vsnap"]["last_stop_reason"], "reboot")
        self.assertEqual(info["vsnap"]["last_stop_origin"], "guest")
        self.assertGreaterEqual(info["vsnap"]["boot_count"], 2)
        s.expect("PUT", "vm.shutdown", 204)

    def test_serial_pty_in_vm_info(self):
        s = self.shim
        cfg = self.config(SPIN + " vsnap.heartbeat_ms=20")
        cfg["serial"] = {"mode": "Pty"}
        s.expect("PUT", "vm.create", 204, body=cfg)
        self.assertIsNone(self.info()["vsnap"]["serial_pty"])
        s.expect("PUT", "vm.boot", 204)
        info = self.info()
        pty = info["vsnap"]["serial_pty"]
        self.assertRegex(pty or "", r"^/dev/pts/\d+$")
        # Where Cloud Hypervisor reports it (and libvirt's ch driver reads it).
        self.assertEqual(info["config"]["serial"]["file"], pty)
        fd = os.open(pty, os.O_RDONLY | os.O_NOCTTY)
        try:
            seen = b""
            deadline = time.monotonic() + 30
            while BOOTED.encode() not in seen and time.monotonic() < deadline:
                seen += os.read(fd, 4096)
            self.assertIn(BOOTED.encode(), seen)
        finally:
            os.close(fd)
        s.expect("PUT", "vm.shutdown", 204)
        self.assertIsNone(self.info()["vsnap"]["serial_pty"])

    def vsock_config(self, cmdline):
        cfg = self.config(SPIN + " " + cmdline)
        cfg["vsock"] = {"cid": 3, "socket": os.path.join(self.dir, "vsock.sock")}
        return cfg

    def long_poll(self, query):
        """Start GET vm.wait-ready on a thread; returns a function giving
        (status, reply, seconds)."""
        result = {}

        def call():
            start = time.monotonic()
            result["reply"] = self.shim.api("GET", "vm.wait-ready", query=query, timeout=60)
            result["seconds"] = time.monotonic() - start

        thread = threading.Thread(target=call)
        thread.start()

        def join():
            thread.join(timeout=90)
            status, reply = result["reply"]
            return status, reply, result["seconds"]
        return join

    def test_readiness_pushed_over_vsock(self):
        s = self.shim
        s.expect("PUT", "vm.create", 204, body=self.vsock_config("vsnap.delay_ms=500"))
        s.expect("PUT", "vm.boot", 204)
        self.assertIs(self.info()["vsnap"]["ready"], False)
        join = self.long_poll("?timeout_ms=30000")
        for _ in range(5):  # the long-poll blocks nobody else
            start = time.monotonic()
            s.alive()
            self.assertLess(time.monotonic() - start, 1.0)
        status, reply, _ = join()
        self.assertEqual(status, 200, reply)
        self.assertTrue(reply["ready"])
        self.assertEqual(reply["port"], 1024)
        # The announcement's members are vm.info's vsnap object's readiness part.
        vsnap = self.info()["vsnap"]
        for key, value in reply.items():
            self.assertEqual(vsnap[key], value, key)
        self.events.wait_for("guest", "ready")
        ready_event = [e for e in self.events.events if e["source"] == "guest"][0]
        self.assertEqual(ready_event["properties"], reply)
        # Already ready: answered at once.
        status, again, seconds = self.long_poll("?timeout_ms=30000")()
        self.assertEqual((status, again), (200, reply))
        self.assertLess(seconds, 2)

        # A reboot is a new guest: readiness starts over.
        s.expect("PUT", "vm.reboot", 204)
        status, after, _ = self.long_poll("?timeout_ms=30000")()
        self.assertEqual(status, 200, after)
        self.assertNotEqual(after["boot_id"], reply["boot_id"])
        self.events.wait_for("guest", "ready", count=2)
        s.expect("PUT", "vm.shutdown", 204)
        self.assertIs(self.info()["vsnap"]["ready"], False)

    def test_wait_ready_ends_when_the_vm_stops_or_times_out(self):
        s = self.shim
        s.expect("PUT", "vm.create", 204, body=self.vsock_config("vsnap.delay_ms=20000"))
        s.expect("PUT", "vm.boot", 204)
        status, reply, seconds = self.long_poll("?timeout_ms=300")()
        self.assertEqual(status, 504, reply)
        self.assertLess(seconds, 5)
        for attempt in range(1, 6):
            join = self.long_poll("?timeout_ms=30000")
            time.sleep(0.3 * attempt)   # for the poll to arrive; nothing tells when it has
            s.expect("PUT", "vm.shutdown", 204)
            status, reply, seconds = join()
            if "the VM is Shutdown" not in str(reply):
                break
            # The poll came after the shutdown (a loaded machine): again, waiting longer.
            s.expect("PUT", "vm.boot", 204)
        self.assertEqual(status, 405, reply)
        self.assertIn("stopped", error_message(reply))
        self.assertLess(seconds, 10)

    def test_guest_poweroff_and_sigterm(self):
        s = self.shim
        s.expect("PUT", "vm.create", 204, body=self.config("vsnap.halt_after_ready=1"))
        s.expect("PUT", "vm.boot", 204)
        s.wait_state("Shutdown", timeout=60)
        self.assertEqual(self.info()["vsnap"]["last_stop_reason"], "poweroff")
        self.events.wait_for("vm", "shutdown")

        # SIGTERM with a running VM: torn down cleanly, exit 0, socket gone.
        s.expect("PUT", "vm.delete", 204)
        s.expect("PUT", "vm.create", 204, body=self.config(SPIN + " vsnap.heartbeat_ms=50"))
        s.expect("PUT", "vm.boot", 204)
        wait_serial(self.serial, r"tick \d+")
        self.assertEqual(s.terminate(), 0, s.describe())
        self.assertFalse(os.path.exists(s.socket_path))


@unittest.skipUnless(GUEST and os.path.exists(GUEST), "the test guest is not built")
class DirectMode(unittest.TestCase):
    """--kernel creates and boots at once, as Cloud Hypervisor's command line."""

    def argv(self, workdir, cmdline):
        return [SHIM, "--kernel", GUEST, "--cmdline", cmdline, "--memory", "size=64M",
                "--cpus", "boot=1", "--serial", f"file={workdir}/serial.log", "--console", "off"]

    def test_exits_0_when_the_guest_powers_off(self):
        workdir = tempfile.mkdtemp(prefix="vsnap-direct-")
        res = subprocess.run(self.argv(workdir, "vsnap.halt_after_ready=1"),
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        text = serial_text(f"{workdir}/serial.log")
        self.assertIn(BOOTED, text)
        self.assertIn("halt_after_ready, powering off", text)

    def test_with_api_socket_is_running_at_once(self):
        workdir = tempfile.mkdtemp(prefix="vsnap-direct-")
        shim = ApiShim(SHIM, workdir=workdir)
        shim.argv = self.argv(workdir, SPIN + " vsnap.heartbeat_ms=50") + shim.argv[1:]
        shim.start()
        try:
            info = shim.expect("GET", "vm.info", 200)
            self.assertEqual(info["state"], "Running")
            self.assertEqual(info["config"]["memory"]["size"], 64 << 20)
            self.assertEqual(info["config"]["payload"]["cmdline"], SPIN + " vsnap.heartbeat_ms=50")
            wait_serial(f"{workdir}/serial.log", BOOTED)
            # With an API the process outlives the guest: it can be booted again.
            shim.expect("PUT", "vm.power-button", 204)
            shim.wait_state("Shutdown")
            shim.alive()
            self.assertEqual(shim.terminate(), 0)
        finally:
            shim.kill()

    def test_serial_tty_goes_to_stdout(self):
        argv = [SHIM, "--kernel", GUEST, "--cmdline", "vsnap.halt_after_ready=1",
                "--memory", "size=32M", "--serial", "tty", "--console", "off"]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn(BOOTED, res.stdout)

    def test_vsock_option_reaches_the_config(self):
        workdir = tempfile.mkdtemp(prefix="vsnap-direct-")
        shim = ApiShim(SHIM, workdir=workdir)
        shim.argv = (self.argv(workdir, SPIN) + ["--vsock", f"cid=7,socket={workdir}/v.sock"]
                     + shim.argv[1:])
        shim.start()
        try:
            info = shim.expect("GET", "vm.info", 200)
            self.assertEqual(info["state"], "Running")
            self.assertEqual(info["config"]["vsock"],
                             {"cid": 7, "socket": f"{workdir}/v.sock", "readiness_port": 1024,
                              "notify_port": 1025})
        finally:
            shim.kill()

    def test_boot_failure_exits_1(self):
        workdir = tempfile.mkdtemp(prefix="vsnap-direct-")
        fake = os.path.join(workdir, "fake-kernel")
        with open(fake, "wb") as f:
            f.write(b"\0" * 8192)
        res = subprocess.run([SHIM, "--kernel", fake], capture_output=True, text=True,
                             timeout=30)
        self.assertEqual(res.returncode, 1)
        self.assertIn(fake, res.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
