#!/usr/bin/python3
"""The Linux guest through virtvsnapd, real virsh and python3-libvirt, from
xml/examples/linux-microvm.xml (its paths and boot line replaced by the
build's): start -> agent-lifecycle 'connected' (vsnap-agent's READY on
Linux) -> snapshot-create-as -> snapshot-revert (restored on demand) ->
connected again; save + restore; managedsave + start; then virsh shutdown
presses the ACPI power button and Linux powers off (shut off, reason
shutdown). Each step checks the guest's test service answers.

    test_linux_virsh.py <source root> <build root>
(VIRTVSNAPD, VSNAP_SHIM and VSNAP_SCHEMA_DIR in the environment, as in tests/plugin.)
"""

import os
import re
import sys
import threading
import time

import libvirt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "plugin"))
from linuxguest import DISK_SIZE, TEST_PORT, LinuxGuest, pattern  # noqa: E402
from vsnapd import AgentReadiness, Daemon, SHIM, wait_for  # noqa: E402
from vsnaptest import CommandConn, Fail, check  # noqa: E402

SOURCE_ROOT, BUILD_ROOT = sys.argv[1:3]
NAME = "linux-microvm"
BOOT_TIMEOUT = 240


def event_loop():
    libvirt.virEventRegisterDefaultImpl()

    def run():
        while True:
            libvirt.virEventRunDefaultImpl()
    threading.Thread(target=run, daemon=True).start()


def domain_xml(guest, daemon):
    """The example with the build's kernel, initramfs and boot line and a data
    disk of the daemon's own."""
    with open(os.path.join(SOURCE_ROOT, "xml", "examples", "linux-microvm.xml")) as f:
        xml = f.read()
    disk = os.path.join(daemon.dir, "data.img")
    with open(disk, "wb") as f:
        f.write(pattern("disk", DISK_SIZE))
    cmdline = guest.cmdline()
    xml = xml.replace("/var/lib/vsnap/images/linux/vmlinux", guest.path("vmlinux"))
    xml = xml.replace("/var/lib/vsnap/images/linux/initramfs.cpio", guest.path("initramfs.cpio"))
    xml = xml.replace("/var/lib/vsnap/images/linux/data.img", disk)
    return re.sub(r"<cmdline>.*</cmdline>", f"<cmdline>{cmdline}</cmdline>", xml)


def service(daemon, command):
    path = os.path.join(daemon.state, "run", NAME, "vsock.sock")
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = CommandConn(path, TEST_PORT, timeout=10)
            if conn.connect_reply.startswith("OK "):
                try:
                    return conn.cmd(command)
                finally:
                    conn.close()
            conn.close()
        except (OSError, Fail):
            pass
        check(time.monotonic() < deadline, f"the test service on {path} never answered")
        time.sleep(0.1)


def step(what, readiness, action, timeout=60):
    """Run action; wait for the agent's next 'connected' event; seconds taken."""
    started = time.monotonic()
    action()
    arrived = readiness.wait_after(started, timeout)
    print(f"{what}: agent connected after {arrived - started:.2f} s")
    return arrived - started


def main():
    guest = LinuxGuest(SHIM, SOURCE_ROOT, BUILD_ROOT)
    guest.build()
    event_loop()
    daemon = Daemon().start()
    try:
        path = os.path.join(daemon.dir, NAME + ".xml")
        with open(path, "w") as f:
            f.write(domain_xml(guest, daemon))
        daemon.virsh("define", path)
        conn = daemon.connect()
        readiness = AgentReadiness(conn)
        v = daemon.virsh
        step("start (boot)", readiness, lambda: v("start", NAME), BOOT_TIMEOUT)
        check(service(daemon, "PING") == "PONG", "the service after boot")
        v("snapshot-create-as", NAME, "booted")
        check(service(daemon, "WRITE 0 4096 after-snapshot").startswith("OK "), "WRITE")
        step("snapshot-revert (on demand)", readiness, lambda: v("snapshot-revert", NAME, "booted"))
        check(service(daemon, "SHA 0 4096").split()[1] == __import__("hashlib").sha256(
            pattern("disk", 4096)).hexdigest(), "the revert did not bring the disk back")
        image = os.path.join(daemon.dir, "linux.save")
        v("save", NAME, image)
        step("restore of a save image", readiness, lambda: v("restore", image))
        v("managedsave", NAME)
        check("saved" in v("domstate", NAME, "--reason").stdout, "managedsave left the domain saved")
        step("start from managedsave", readiness, lambda: v("start", NAME))
        check(service(daemon, "PING") == "PONG", "the service after managedsave + start")
        time.sleep(1)  # acpid reopens its input device after the restore
        v("shutdown", NAME)
        state = wait_for(lambda: (lambda s: s if s.startswith("shut off") else None)(
            v("domstate", NAME, "--reason").stdout.strip()), timeout=60, what="shut off after virsh shutdown")
        print(f"after virsh shutdown: {state}")
        check(state == "shut off (shutdown)", f"virsh shutdown ended the domain as {state!r}")
        conn.close()
        print("PASS")
    except (Fail, AssertionError, RuntimeError) as e:
        print(f"FAIL: {e}\n--- daemon log (tail):\n{daemon.log()[-3000:]}")
        sys.exit(1)
    finally:
        daemon.cleanup()


if __name__ == "__main__":
    main()
