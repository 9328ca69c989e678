#!/usr/bin/python3
"""Debian's real kernel on the real shim, as far as this machine can take it:
the shim boots the ELF vmlinux in direct mode (create + boot from the command
line) and the kernel's first console lines must reach the serial file: the
"Linux version" banner, the command line we passed, and the e820 map the shim
built. Then SIGTERM must stop the shim cleanly (exit status 0).

A stock kernel cannot reach userspace here (guest kernel mode is emulated, see
shared/reference/kvm-probe/FINDINGS.md), so the banner is the goal. The kernel
is fetched with scripts/fetch-linux.sh when it is not cached yet.

usage: test-linux-banner.py <vsnap-shim> <source root>
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

BANNER_TIMEOUT = 90  # s; the banner takes 5-30 s here
EXIT_TIMEOUT = 15    # s for the shim to stop after SIGTERM
CMDLINE = "console=ttyS0 earlyprintk=serial,ttyS0 nokaslr"
# What the e820 of a 512 MiB guest must look like in the kernel's own words.
EXPECTED_LINES = [
    "Linux version ",
    "Command line: " + CMDLINE,
    "BIOS-e820: [mem 0x0000000000000000-0x000000000009fbff] usable",
    "BIOS-e820: [mem 0x000000000009fc00-0x00000000000fffff] reserved",
    "BIOS-e820: [mem 0x0000000000100000-0x000000001fffffff] usable",
]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def fetch_kernel(source_root):
    script = os.path.join(source_root, "scripts", "fetch-linux.sh")
    started = time.monotonic()
    result = subprocess.run([script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        fail(f"scripts/fetch-linux.sh failed ({result.returncode}):\n{result.stderr}")
    paths = result.stdout.split()
    vmlinux = [p for p in paths if os.path.basename(p).startswith("vmlinux-")]
    if not vmlinux or not os.path.isfile(vmlinux[0]):
        fail(f"scripts/fetch-linux.sh printed no vmlinux path: {result.stdout!r}")
    print(f"kernel: {vmlinux[0]} (fetch step {time.monotonic() - started:.1f} s)")
    return vmlinux[0]


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def wait_for_lines(shim, serial, log):
    """Seconds until every expected line is in the serial file."""
    started = time.monotonic()
    while time.monotonic() - started < BANNER_TIMEOUT:
        text = read(serial)
        if all(line in text for line in EXPECTED_LINES):
            return time.monotonic() - started
        if shim.poll() is not None:
            fail(f"the shim exited ({shim.returncode}) before the banner:\n{read(log)}\n"
                 f"serial:\n{text[-2000:]}")
        time.sleep(0.25)
    text = read(serial)
    missing = [line for line in EXPECTED_LINES if line not in text]
    fail(f"after {BANNER_TIMEOUT} s the serial output lacks {missing}\nserial:\n{text[-3000:]}\n"
         f"shim log:\n{read(log)}")


def stop_shim(shim, log):
    shim.send_signal(signal.SIGTERM)
    try:
        status = shim.wait(EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        shim.kill()
        shim.wait()
        fail(f"the shim did not exit within {EXIT_TIMEOUT} s of SIGTERM:\n{read(log)}")
    if status != 0:
        fail(f"the shim exited with status {status} after SIGTERM:\n{read(log)}")


def main():
    if len(sys.argv) != 3:
        fail("usage: test-linux-banner.py <vsnap-shim> <source root>")
    shim_path, source_root = sys.argv[1], sys.argv[2]
    if not os.access(shim_path, os.X_OK):
        fail(f"no shim at {shim_path}")
    vmlinux = fetch_kernel(source_root)
    with tempfile.TemporaryDirectory(prefix="vsnap-banner-") as tmp:
        serial = os.path.join(tmp, "serial.txt")
        log = os.path.join(tmp, "shim.log")
        with open(log, "w") as log_file:
            shim = subprocess.Popen(
                [shim_path, "--kernel", vmlinux, "--cmdline", CMDLINE, "--memory", "size=512M",
                 "--cpus", "boot=1", "--serial", "file=" + serial, "--console", "off"],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            seconds = wait_for_lines(shim, serial, log)
            print(f"banner, command line and e820 on the serial port after {seconds:.1f} s:")
            for line in read(serial).splitlines()[:12]:
                print("  " + line)
            stop_shim(shim, log)
        finally:
            if shim.poll() is None:
                shim.kill()
                shim.wait()
    print("ok: Linux banner reached; shim stopped cleanly on SIGTERM")


if __name__ == "__main__":
    main()
