"""Helpers for the snapshot/restore tests: shims driven through the API only
(a source VM created with vm.create + vm.boot, restore targets with no VM),
vsock command connections to the test guest, and snapshot calls.
Python 3 stdlib only; curl talks to the API as libvirt's ch driver would."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import (CMD_PORT, CommandConn, CurlError, Fail, check,  # noqa: E402,F401 (check: for the tests)
                       curl_api, read_text)

MIB = 1 << 20
FILL_BASE = 16 * MIB
TICK_LINE = re.compile(r"vsnap-testguest: tick (\d+)")


RAM_NAMES = (".memory-image-", "vsnap-guest-ram")  # a shared clone's RAM mapping, an on-demand one's memfd


def ram_smaps(pid):
    """Rss, Pss and Anonymous (MiB) of the guest RAM mappings of a shim: the
    VMM's own memory (its binary, libraries, heap) is left out. Anonymous is
    what a shared clone wrote (its copies); Rss counts whole page-cache folios
    mapped, which may be more than the pages the guest touched."""
    out = {"Rss": 0.0, "Pss": 0.0, "Anonymous": 0.0}
    in_ram = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5:  # a mapping's first line
                in_ram = any(n in line for n in RAM_NAMES)
            elif in_ram and head and head[0].rstrip(":") in out:
                out[head[0].rstrip(":")] += int(head[1]) / 1024
    return out


def run_case(cases, case, prefix):
    """Run cases[case](workdir) in a fresh work directory, removed after:
    the exit status of a test script (0 ok, 1 failed)."""
    workdir = tempfile.mkdtemp(prefix=f"{prefix}-{case}-")
    try:
        cases[case](workdir)
    except Fail as e:
        print(f"FAIL {case}: {e}")
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"ok {case}")
    return 0


class ApiShim:
    """vsnap-shim with an API socket and an event monitor file, no VM yet.
    Killed (by its pid) and its directory removed on close(). wrapper: a
    command line the shim's is appended to (vsnap-deny-syscall ...)."""

    def __init__(self, shim_path, workdir=None, name="shim", args=(), env=None, wrapper=()):
        self.own_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix="vsnap-persist-")
        self.name = name
        self.sock = os.path.join(self.dir, f"{name}.api")
        self.events_path = os.path.join(self.dir, f"{name}.events")
        self.log_path = os.path.join(self.dir, f"{name}.log")
        self.serial_path = os.path.join(self.dir, f"{name}.serial")
        self.vsock_path = os.path.join(self.dir, f"{name}.vsock")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(list(wrapper) + [shim_path, "-v", "--api-socket", f"path={self.sock}",
                                      "--event-monitor", f"path={self.events_path}"] + list(args),
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env)
        deadline = time.monotonic() + 10
        while not self._listening():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise Fail(f"{name}: no API socket" + self.describe())
            time.sleep(0.01)

    def _listening(self):
        """The socket file appears at bind(), before listen(): try to connect."""
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(self.sock)
            return True
        except OSError:
            return False
        finally:
            probe.close()

    def close(self):
        """vmm.shutdown, so a sanitizer build reports leaks; killed (by pid)
        if it does not exit. A sanitizer report in the log fails the test."""
        if self.proc.poll() is None:
            try:
                self.api("PUT", "vmm.shutdown", timeout=10)
                self.proc.wait(timeout=10)
            except (Fail, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()
        log = self.read(self.log_path)
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            if marker in log:
                raise Fail(f"{self.name}: sanitizer report:\n{log[log.index(marker) - 200:][:6000]}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def read(self, path):
        return read_text(path)

    def serial(self):
        return self.read(self.serial_path)

    def events(self):
        return [json.loads(line) for line in self.read(self.events_path).splitlines() if line.strip()]

    def describe(self):
        return (f"\n--- {self.name} exit code: {self.proc.poll()}\n--- log:\n{self.read(self.log_path)[-4000:]}"
                f"\n--- serial (tail):\n{self.serial()[-2000:]}")

    def api(self, method, endpoint, body=None, timeout=60):
        try:
            return curl_api(self.sock, method, endpoint, body, timeout)
        except CurlError as e:
            raise Fail(f"curl {method} {endpoint}: {e}" + self.describe()) from None

    def ok(self, method, endpoint, body=None, timeout=60):
        status, reply = self.api(method, endpoint, body, timeout)
        if status not in (200, 204):
            raise Fail(f"{self.name}: {endpoint} -> {status} {reply}" + self.describe())
        return reply

    # --- VM ---------------------------------------------------------------

    def boot(self, guest, cmdline, memory_mib=256, vsock=True, cpus=1, disks=None, hugepages=False):
        """vm.create + vm.boot; disks: a list of DiskConfig objects;
        hugepages: RAM on 2 MiB huge pages."""
        memory = {"size": memory_mib * MIB}
        if hugepages:
            memory.update(hugepages=True, hugepage_size=2 * MIB)
        config = {"payload": {"kernel": guest, "cmdline": cmdline},
                  "memory": memory, "cpus": {"boot_vcpus": cpus, "max_vcpus": cpus},
                  "serial": {"mode": "File", "file": self.serial_path}, "console": {"mode": "Off"}}
        if vsock:
            config["vsock"] = {"cid": 3, "socket": self.vsock_path}
        if disks:
            config["disks"] = disks
        self.ok("PUT", "vm.create", config)
        self.ok("PUT", "vm.boot")

    def wait_ready(self, timeout_s=30):
        return self.ok("GET", f"vm.wait-ready?timeout_ms={int(timeout_s * 1000)}", timeout=timeout_s + 5)

    def state(self):
        return self.ok("GET", "vm.info")["state"]

    def snapshot(self, dest, parent=None):
        body = {"destination_url": "file://" + dest}
        if parent:
            body.update(mode="diff", parent_url="file://" + parent)
        return self.api("PUT", "vm.snapshot", body)

    def snapshot_paused(self, dest, parent=None):
        """Pause, snapshot, resume (what libvirt's snapshot-create does)."""
        self.ok("PUT", "vm.pause")
        status, reply = self.snapshot(dest, parent)
        self.ok("PUT", "vm.resume")
        if status != 204:
            raise Fail(f"{self.name}: vm.snapshot -> {status} {reply}" + self.describe())

    def restore(self, source, mode="copy", resume=True, kernel=None, **extra):
        """kernel: config_overrides.payload.kernel (a snapshot that came from a
        store names no host path the shim takes: it must be given)."""
        body = {"source_url": "file://" + source, "memory_restore_mode": mode, "resume": resume,
                "config_overrides": {"serial": {"mode": "File", "file": self.serial_path}}}
        config_path = os.path.join(source, "config.json")
        if os.path.exists(config_path) and json.load(open(config_path)).get("vsock"):
            body["config_overrides"]["vsock"] = {"socket": self.vsock_path}
        if kernel:
            body["config_overrides"]["payload"] = {"kernel": kernel}
        body.update(extra)
        return self.api("PUT", "vm.restore", body)

    def ticks(self):
        """Heartbeat counts of the complete serial lines. The shim writes the
        serial file a byte at a time, so the last line may still be half
        written ("vsnap-testguest: tick " or "tick 1" of "tick 12"): it is left
        out until its newline arrives."""
        complete = self.serial().split("\n")[:-1]
        return [int(m.group(1)) for m in map(TICK_LINE.fullmatch, complete) if m]

    def wait_tick_above(self, value, timeout_s=10):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ticks = self.ticks()
            if ticks and ticks[-1] > value:
                return ticks[-1]
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise Fail(f"{self.name}: no heartbeat tick above {value} within {timeout_s}s" + self.describe())


class Conn(CommandConn):
    """A command connection that the guest must accept."""

    def __init__(self, vsock_path, port=CMD_PORT, timeout=30):
        super().__init__(vsock_path, port, timeout)
        if not self.connect_reply.startswith("OK "):
            self.close()
            raise Fail(f"CONNECT {port}: {self.connect_reply!r}")

    def ok(self, text):
        reply = self.cmd(text)
        if reply != "OK":
            raise Fail(f"{text!r} -> {reply!r}")

    def sum(self, gpa, length):
        reply = self.cmd(f"SUM {gpa:#x} {length:#x}")
        if not reply.startswith("SUM "):
            raise Fail(f"SUM -> {reply!r}")
        return reply[4:]


def connect(shim, timeout_s=30):
    """A command connection once the guest is ready (it listens only then)."""
    shim.wait_ready(timeout_s)
    return Conn(shim.vsock_path)
