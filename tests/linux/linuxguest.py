"""The Linux guest of the suite `linux`: built by scripts/build-linux-guest.sh,
booted once per build, snapshotted, and restored by every case.

    guest = LinuxGuest(shim, source_root, build_root)
    base = guest.base_snapshot()       # boots and snapshots, or reuses it
    with guest.restore(base, net) as vm:
        vm.service("PING")

The booted snapshot is kept in <build>/linux-snapshot/<key>/ with the boot's
own serial and console output and timings; key is a hash of the kernel, the
initramfs, the boot line and the shim binary, so a new build boots again. One
process makes it (a lock file), the others wait for it and reuse it.
Restores run in the case's own network namespace (Netns), on a tap the shim
makes there with the host side's address.
"""

import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "persist"))
sys.path.insert(0, os.path.join(HERE, "..", "net"))
from persisttest import ApiShim  # noqa: E402
from vsnaptest import Fail, check, read_text, wait_command_port  # noqa: E402
from nettest import in_netns, ping_until, run  # noqa: E402

MIB = 1 << 20
DISK_SIZE = 16 * MIB
MEMORY_MIB = 256
GUEST_IP, HOST_IP, PREFIX = "10.0.2.15", "10.0.2.2", 24
GUEST_MAC = "52:54:00:12:34:56"
PRODUCT = "vsnap-linux-test"
TEST_PORT = 5001
BOOT_TIMEOUT = 240     # s to READY; ~20 s alone here, several times that under load
BUILD_TIMEOUT = 1500   # s for scripts/build-linux-guest.sh (a fresh machine builds the kernel)
VIRTIO_DRIVERS = {"virtio_blk", "virtio_net", "virtio_rng", "virtio_console",
                  "vmw_vsock_virtio_transport"}


def pattern(seed, length):
    """What the test service's WRITE puts on the disk: 32-byte block k is
    sha256("<seed>:<k>") (guest/linux/service.h)."""
    blocks = (hashlib.sha256(f"{seed}:{k}".encode()).digest() for k in range((length + 31) // 32))
    return b"".join(blocks)[:length]


def sha256_range(path, offset, length):
    with open(path, "rb") as f:
        f.seek(offset)
        return hashlib.sha256(f.read(length)).hexdigest()


class Netns:
    """A network namespace of the case's own; shims run in it and make their
    taps there (with HOST_IP), and pings go from it."""

    def __init__(self, label):
        self.name = f"vsl{os.getpid() % 100000}{label}"
        run("ip", "netns", "add", self.name)
        run("ip", "-n", self.name, "link", "set", "lo", "up")

    def wrapper(self):
        return ["ip", "netns", "exec", self.name]

    def ping(self, timeout=20.0):
        """Seconds of the first answered ICMP echo to the guest, or None."""
        def body():
            sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
            try:
                return ping_until(sock, GUEST_IP, timeout)
            finally:
                sock.close()
        return in_netns(self.name, body)

    def close(self):
        run("ip", "netns", "del", self.name, check_rc=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class LinuxVM(ApiShim):
    """A shim holding the Linux guest, booted or restored, with its consoles
    in files and the test service reachable."""

    def __init__(self, shim_path, workdir, name, netns=None):
        super().__init__(shim_path, workdir=workdir, name=name,
                         wrapper=netns.wrapper() if netns else ())
        self.console_path = os.path.join(self.dir, f"{name}.console")

    def console(self):
        return read_text(self.console_path)

    def service(self, command, timeout=30):
        """One command to the test service (its answer line)."""
        conn = self.service_conn(timeout)
        try:
            return conn.cmd(command)
        except (OSError, Fail) as e:
            raise Fail(f"{self.name}: {command}: {e}" + self.describe()) from None
        finally:
            conn.close()

    def service_conn(self, timeout=30):
        try:
            return wait_command_port(self.vsock_path, timeout, timeout, port=TEST_PORT, interval=0.1)
        except Fail:
            raise Fail(f"{self.name}: the test service never accepted on port {TEST_PORT}" + self.describe()) from None

    def ready_events(self):
        return [e["properties"] for e in self.events() if e.get("source") == "guest" and e.get("event") == "ready"]

    def wait_generation(self, generation, timeout=60):
        """The readiness announcement of that generation (vm.wait-ready answers
        with the latest; after a restore the guest needs a moment to announce)."""
        deadline = time.monotonic() + timeout
        while True:
            for props in self.ready_events():
                if props.get("generation") == generation:
                    return props
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise Fail(f"{self.name}: no READY of generation {generation} within {timeout} s "
                           f"(saw {self.ready_events()})" + self.describe())
            time.sleep(0.05)

    def pause_snapshot(self, dest, resume=True):
        self.ok("PUT", "vm.pause")
        status, reply = self.snapshot(dest)
        check(status in (200, 204), f"{self.name}: vm.snapshot {dest}: {status} {reply}" + self.describe())
        if resume:
            self.ok("PUT", "vm.resume")


class LinuxGuest:
    def __init__(self, shim_path, source_root, build_root):
        self.shim_path = shim_path
        self.source_root = source_root
        self.build_root = build_root
        self.dir = os.path.join(build_root, "guest", "linux")

    # --- the build -------------------------------------------------------------

    def build(self):
        """scripts/build-linux-guest.sh (the kernel from its cache, the initramfs
        again); its output is shown, it says whether it patched and rewrote."""
        started = time.monotonic()
        res = subprocess.run([os.path.join(self.source_root, "scripts", "build-linux-guest.sh"),
                              "--build", self.build_root], capture_output=True, text=True,
                             timeout=BUILD_TIMEOUT)
        print(res.stderr.strip())
        if res.returncode != 0:
            raise Fail(f"scripts/build-linux-guest.sh failed ({res.returncode})")
        print(f"guest build step: {time.monotonic() - started:.1f} s")
        for name in ("vmlinux", "initramfs.cpio", "cmdline"):
            check(os.path.getsize(os.path.join(self.dir, name)) > 0, f"the build wrote no {name}")

    def path(self, name):
        return os.path.join(self.dir, name)

    def cmdline(self):
        with open(self.path("cmdline")) as f:
            line = f.read().strip()
        return f"{line} vsnap.ip={GUEST_IP}/{PREFIX} vsnap.test_port={TEST_PORT}"

    def key(self):
        h = hashlib.sha256()
        for path in (self.path("vmlinux"), self.path("initramfs.cpio"), self.shim_path):
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
        h.update(self.cmdline().encode())
        return h.hexdigest()[:16]

    # --- the booted snapshot ----------------------------------------------------

    def config(self, vm, disk, work_dir):
        return {
            "payload": {"kernel": self.path("vmlinux"), "initramfs": self.path("initramfs.cpio"),
                        "cmdline": self.cmdline()},
            "memory": {"size": MEMORY_MIB * MIB}, "cpus": {"boot_vcpus": 1, "max_vcpus": 1},
            "serial": {"mode": "File", "file": vm.serial_path},
            "console": {"mode": "File", "file": vm.console_path},
            "vsock": {"cid": 3, "socket": vm.vsock_path},
            "rng": {"src": "/dev/urandom"},
            "disks": [{"path": disk, "id": "vda"}],
            "net": [{"id": "net0", "tap": "lnx0", "ip": HOST_IP, "mask": "255.255.255.0",
                     "mac": GUEST_MAC}],
            "platform": {"system": {"product_name": PRODUCT}},
            "vsnap_work_dir": work_dir,
        }

    def base_snapshot(self):
        """The directory of the booted guest's snapshot (snap/), its disk image
        (disk.img, the snapshot's read-only base) and the boot's record
        (boot.json, boot.serial, boot.console): made once per build."""
        self.build()
        root = os.path.join(self.build_root, "linux-snapshot")
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            base = os.path.join(root, self.key())
            if os.path.exists(os.path.join(base, "boot.json")):
                print(f"booted snapshot from this build: {base}")
                return base
            # Older builds' snapshots, and an unfinished one of this build (no
            # boot.json): the snapshot names its disk by path, so it is made
            # where it stays.
            for old in os.listdir(root):
                if not old.startswith("."):
                    shutil.rmtree(os.path.join(root, old), ignore_errors=True)
            os.mkdir(base)
            self.boot_and_snapshot(base)
            return base

    def boot_and_snapshot(self, base):
        disk = os.path.join(base, "disk.img")
        with open(disk, "wb") as f:
            f.write(pattern("disk", DISK_SIZE))
        record = {"disk_first_mib_sha256": sha256_range(disk, 0, MIB)}
        with Netns("b") as netns:
            vm = LinuxVM(self.shim_path, base, "boot", netns)
            try:
                started = time.monotonic()
                vm.ok("PUT", "vm.create", self.config(vm, disk, os.path.join(base, "work")))
                vm.ok("PUT", "vm.boot")
                ready = vm.wait_generation(0, BOOT_TIMEOUT)
                record["boot_to_ready_s"] = round(time.monotonic() - started, 2)
                record["ready"] = ready
                print(f"Linux booted to READY in {record['boot_to_ready_s']} s")
                check(vm.service("PING") == "PONG", "the test service answers PING")
                record["ping_s"] = netns.ping()
                vm.pause_snapshot(os.path.join(base, "snap"), resume=False)
            finally:
                vm.close()  # its serial and console stay: boot.serial, boot.console
        with open(os.path.join(base, "boot.json"), "w") as f:
            json.dump(record, f, indent=1)

    def boot_record(self, base):
        with open(os.path.join(base, "boot.json")) as f:
            return json.load(f)

    # --- restores --------------------------------------------------------------

    def restore(self, snap, workdir, name, netns, tap, mode="ondemand", resume=True):
        """A new shim in netns with snap restored onto a new tap (its own
        consoles, vsock socket and disk work directory)."""
        vm = LinuxVM(self.shim_path, workdir, name, netns)
        overrides = {"serial": {"mode": "File", "file": vm.serial_path},
                     "console": {"mode": "File", "file": vm.console_path},
                     "vsock": {"socket": vm.vsock_path},
                     "net": [{"id": "net0", "tap": tap, "ip": HOST_IP, "mask": "255.255.255.0"}],
                     "vsnap_work_dir": os.path.join(workdir, f"{name}-work")}
        started = time.monotonic()
        status, reply = vm.api("PUT", "vm.restore", {"source_url": "file://" + snap, "resume": resume,
                                                     "memory_restore_mode": mode,
                                                     "config_overrides": overrides})
        vm.restore_s = time.monotonic() - started
        if status not in (200, 204):
            vm.close()
            raise Fail(f"vm.restore of {snap} ({mode}): {status} {reply}")
        return vm
