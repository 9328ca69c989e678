#!/usr/bin/python3
"""A real Linux guest (Debian's linux-source-6.1 with guest/linux/microvm.config,
scripts/build-linux-guest.sh) on the real shim: Linux's own drivers against
every device, vsnap-agent on Linux, snapshots of a booted Linux.

    test_linux.py <vsnap-shim> <source root> <build root> <case>

The guest boots once per build (linuxguest.LinuxGuest.base_snapshot: the
first case of a run boots and snapshots it, the others wait and reuse it);
every case then restores that snapshot into a shim of its own, in a network
namespace of its own. Every fact is checked against the host's own view: the
disk's bytes, the shim's DMI product name and MAC, the host's clock.
"""

import hashlib
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from linuxguest import (GUEST_IP, GUEST_MAC, MIB, PREFIX, PRODUCT, VIRTIO_DRIVERS,  # noqa: E402
                        LinuxGuest, Netns, pattern, sha256_range)
from vsnaptest import Fail, check  # noqa: E402

SHIM, SOURCE_ROOT, BUILD_ROOT, CASE = sys.argv[1:5]
GUEST = LinuxGuest(SHIM, SOURCE_ROOT, BUILD_ROOT)
LINE = re.compile(r"vsnap-linux: (\w+) (.*)")


def report_lines(text):
    """The init's report lines (name -> rest), the last of each name."""
    return {m.group(1): m.group(2).strip() for m in map(LINE.search, text.splitlines()) if m}


def restored(base, wd, name, netns, tap, mode="ondemand"):
    """A restore of the booted snapshot, READY again (generation 1)."""
    vm = GUEST.restore(os.path.join(base, "snap"), wd, name, netns, tap, mode)
    ready = vm.wait_generation(1, timeout=60)
    first = GUEST.boot_record(base)["ready"]
    check(ready["boot_id"] == first["boot_id"], f"{name}: a restore is the same boot: {ready} vs {first}")
    print(f"{name}: vm.restore ({mode}) answered in {vm.restore_s * 1000:.0f} ms, READY generation 1")
    return vm


# --- cases -----------------------------------------------------------------------

def case_boot(base, wd):
    """What the init reported at boot, on ttyS0 and on hvc0, against the host:
    the virtio drivers bound, the first MiB of vda, VMGenID bound, hwrng
    bytes, the SMBIOS product name, eth0's address; READY generation 0."""
    record = GUEST.boot_record(base)
    print(f"boot to READY: {record['boot_to_ready_s']} s; first ping answered after {record['ping_s']} s")
    check(record["ready"].get("generation") == 0, f"READY at boot: {record['ready']}")
    check(record["ready"]["guest"].get("agent") == "vsnap-agent", f"READY from {record['ready']}")
    check(record["ping_s"] is not None, "the booted guest answered no ping")
    serial = open(os.path.join(base, "boot.serial"), errors="replace").read()
    console = open(os.path.join(base, "boot.console"), errors="replace").read()
    check("Run /init as init process" in serial, "the kernel ran no /init")
    for where, text in (("ttyS0", serial), ("hvc0", console)):
        lines = report_lines(text)
        print(f"{where}: {lines}")
        drivers = set(lines.get("virtio", "").split())
        check(drivers == VIRTIO_DRIVERS, f"{where}: virtio drivers bound {drivers}, expected {VIRTIO_DRIVERS}")
        check(lines.get("vda") == "sha256 " + record["disk_first_mib_sha256"],
              f"{where}: vda {lines.get('vda')}, the host's image has {record['disk_first_mib_sha256']}")
        check(lines.get("vmgenid") == "bound", f"{where}: vmgenid {lines.get('vmgenid')}")
        check(lines.get("hwrng") == "64", f"{where}: hwrng {lines.get('hwrng')}")
        check(lines.get("dmi") == PRODUCT, f"{where}: dmi {lines.get('dmi')}, the shim's is {PRODUCT}")
        check(lines.get("net") == f"eth0 {GUEST_IP}/{PREFIX} {GUEST_MAC}", f"{where}: net {lines.get('net')}")


def case_restore(base, wd):
    """Restores on demand and by copy announce READY with generation 1 and
    serve; a snapshot of a restored guest restores to generation 2."""
    with Netns("r") as netns:
        for i, mode in enumerate(("ondemand", "copy")):
            with restored(base, wd, f"r{i}", netns, f"lr{i}", mode) as vm:
                check(vm.service("PING") == "PONG", f"{mode}: the service after the restore")
                if mode == "copy":
                    vm.pause_snapshot(os.path.join(wd, "again"), resume=False)
        vm = GUEST.restore(os.path.join(wd, "again"), wd, "r2", netns, "lr2")
        with vm:
            vm.wait_generation(2)
            check(vm.service("PING") == "PONG", "the service after the second restore")
            print("a restored guest's own snapshot restores to READY generation 2")


def case_disk(base, wd):
    """virtio-blk: the guest's sums equal the host's image; a guest write is in
    the next snapshot's disk layer, and restores of the two snapshots read
    exactly what each held."""
    disk = os.path.join(base, "disk.img")
    ranges = [(0, MIB), (5 * MIB + 512, 3 * MIB - 1024), (15 * MIB, MIB)]
    offset, length = 4 * MIB + 4096, MIB
    data = pattern("guest-write", length)
    with Netns("d") as netns:
        with restored(base, wd, "d0", netns, "ld0") as vm:
            for off, size in ranges:
                got = vm.service(f"SHA {off} {size}")
                check(got == "OK " + sha256_range(disk, off, size), f"SHA {off} {size}: {got}")
            got = vm.service(f"WRITE {offset} {length} guest-write")
            check(got == "OK " + hashlib.sha256(data).hexdigest(), f"WRITE: {got}")
            check(vm.service(f"SHA {offset} {length}") == got, "the guest reads back what it wrote")
            vm.pause_snapshot(os.path.join(wd, "written"), resume=False)
        layers = [os.path.join(dp, f) for dp, _, fs in os.walk(wd) for f in fs if f.endswith(".layer")]
        holding = [p for p in layers if data in open(p, "rb").read()]
        print(f"disk layers after the write: {[os.path.relpath(p, wd) for p in layers]}, holding it: "
              f"{[os.path.relpath(p, wd) for p in holding]}")
        check(holding, "no disk layer holds the guest's write")
        check(open(disk, "rb").read() == pattern("disk", os.path.getsize(disk)),
              "the snapshot's base image changed")
        with restored(base, wd, "d1", netns, "ld1") as vm:
            check(vm.service(f"SHA {offset} {length}") == "OK " + sha256_range(disk, offset, length),
                  "a restore of the first snapshot reads the image's bytes, not the write")
        vm = GUEST.restore(os.path.join(wd, "written"), wd, "d2", netns, "ld2")
        with vm:
            vm.wait_generation(2)
            check(vm.service(f"SHA {offset} {length}") == "OK " + hashlib.sha256(data).hexdigest(),
                  "a restore of the second snapshot reads the write")
            before = sha256_range(disk, offset - 4096, 4096)
            check(vm.service(f"SHA {offset - 4096} 4096") == "OK " + before, "the bytes around the write")


def case_net(base, wd):
    """virtio-net: ping from the case's own namespace before and after a
    restore on a new tap (a new shim, a new namespace)."""
    with Netns("n") as first:
        with restored(base, wd, "n0", first, "ln0") as vm:
            rtt = first.ping()
            check(rtt is not None, "no ping answer from the restored guest")
            print(f"ping after the first restore: {rtt * 1000:.1f} ms")
            got = vm.service("NET")
            check(got == f"OK eth0 {GUEST_IP}/{PREFIX} {GUEST_MAC}", f"NET: {got}")
            vm.pause_snapshot(os.path.join(wd, "net"), resume=False)
    with Netns("m") as second:
        vm = GUEST.restore(os.path.join(wd, "net"), wd, "n1", second, "lnew")
        with vm:
            vm.wait_generation(2)
            rtt = second.ping()
            check(rtt is not None, "no ping answer after the restore on a new tap")
            print(f"ping after the restore on a new tap: {rtt * 1000:.1f} ms")


def case_devices(base, wd):
    """virtio-rng, virtio-console, SMBIOS, VMGenID and the clock after a restore."""
    with Netns("v") as netns:
        with restored(base, wd, "v0", netns, "lv0") as vm:
            host_now = time.time_ns()
            got = vm.service("TIME").split()
            check(got[0] == "OK", f"TIME: {got}")
            skew = (int(got[1]) - host_now) / 1e9
            print(f"guest clock after the restore: {skew:+.3f} s from the host's")
            check(abs(skew) < 5, f"the guest's clock is {skew:.1f} s off the host's after the restore")
            a, b = vm.service("RNG 32").split(), vm.service("RNG 32").split()
            check(a[:2] == ["OK", "32"] and b[:2] == ["OK", "32"] and a[2] != b[2], f"RNG: {a} {b}")
            check(vm.service("CONSOLE after-restore") == "OK", "CONSOLE")
            deadline = time.monotonic() + 10
            while "vsnap-linux: after-restore" not in vm.console() and time.monotonic() < deadline:
                time.sleep(0.1)
            check("vsnap-linux: after-restore" in vm.console(), "hvc0 after the restore: " + vm.console()[-500:])
            check(vm.service("DMI") == "OK " + PRODUCT, "DMI")
            check(vm.service("VMGENID") == "OK bound", "VMGENID")
            drivers = set(vm.service("DRIVERS").split()[1:])
            check(drivers == VIRTIO_DRIVERS, f"DRIVERS after the restore: {drivers}")


def case_power_button(base, wd):
    """The ACPI power button: busybox acpid sees Linux's button input event,
    the init powers off, the shim reports a poweroff."""
    with Netns("p") as netns:
        with restored(base, wd, "p0", netns, "lp0") as vm:
            vm.service("PING")
            time.sleep(1)  # acpid runs again after the restore
            vm.ok("PUT", "vm.power-button")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                stops = [e for e in vm.events() if e.get("source") == "vm" and e.get("event") == "shutdown"]
                if stops:
                    break
                time.sleep(0.2)
            check(stops, "no shutdown event within 60 s of the power button" + vm.describe())
            print(f"shutdown event: {stops[0]}")
            check((stops[0].get("properties") or {}).get("reason") == "poweroff", f"stopped by {stops[0]}")
            check("vsnap-linux: poweroff" in vm.serial(), "the init did not say poweroff")


CASES = {"boot": case_boot, "restore": case_restore, "disk": case_disk, "net": case_net,
         "devices": case_devices, "power_button": case_power_button}


def main():
    wd = tempfile.mkdtemp(prefix=f"vsnap-linux-{CASE}-")
    try:
        base = GUEST.base_snapshot()
        CASES[CASE](base, wd)
        print("PASS")
    except Fail as e:
        print(f"FAIL: {e}")
        sys.exit(1)
    finally:
        shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
