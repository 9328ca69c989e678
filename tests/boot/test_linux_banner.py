#!/usr/bin/python3
"""Debian's real kernel on the real shim, as far as this machine can take it.
The shim boots in direct mode (create + boot from the command line):
- the ELF vmlinux: the kernel's first console lines must reach the serial
  file: the "Linux version" banner, the command line we passed, and the e820
  map the shim built; then (seconds later) the lines saying Linux found the
  shim's MP table and every ACPI table, and what it read from the MADT and FADT;
- the bzImage: its decompressor, entered at the 64-bit entry, must print that
  it read "nokaslr" from our command line (decompressing the whole kernel in
  emulated kernel mode takes far too long here).
After each, SIGTERM must stop the shim cleanly (exit status 0).

A stock kernel cannot reach userspace here (guest kernel mode is emulated, see
docs/host-limits.md), so the banner is the goal. The kernel
is fetched with scripts/fetch-linux.sh when it is not cached yet.

usage: test_linux_banner.py <vsnap-shim> <source root>
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import read_text  # noqa: E402

BANNER_TIMEOUT = 90  # s; the banner takes 5-45 s here, depending on load
STUB_TIMEOUT = 20    # s; the bzImage decompressor speaks after about 2 s
TABLES_TIMEOUT = 20  # s more after the banner for the MP/ACPI table lines (~1 s)
MADT_TIMEOUT = 40    # s more for the lines from the MADT and FADT (6-15 s)
EXIT_TIMEOUT = 15    # s for the shim to stop after SIGTERM
CMDLINE = "console=ttyS0 earlyprintk=serial,ttyS0 nokaslr"
# What the e820 of a 512 MiB guest must look like in the kernel's own words.
VMLINUX_LINES = [
    "Linux version ",
    "Command line: " + CMDLINE,
    "BIOS-e820: [mem 0x0000000000000000-0x000000000009fbff] usable",
    "BIOS-e820: [mem 0x000000000009fc00-0x00000000000fffff] reserved",
    "BIOS-e820: [mem 0x0000000000100000-0x000000001fffffff] usable",
    # The shim's SMBIOS tables, read by the kernel's DMI scan (shim/boot/smbios.c).
    "SMBIOS 3.0.0 present.",
    "DMI: vsnap vsnap microVM, BIOS ",
]
TABLE_LINES = [
    "found SMP MP-table at [mem 0x0009fc00-0x0009fc0f]",
    "ACPI: RSDP 0x00000000000E0000 000024 (v02 VSNAP )",
    "ACPI: XSDT 0x",
    "ACPI: FACP 0x",
    "ACPI: DSDT 0x",
    "ACPI: FACS 0x",
    "ACPI: APIC 0x",
]
MADT_LINES = [
    "ACPI: PM-Timer IO Port: 0x608",
    "ACPI: LAPIC_NMI (acpi_id[0xff] dfl dfl lint[0x1])",
    "IOAPIC[0]: apic_id 1, version 17, address 0xfec00000, GSI 0-23",
    "ACPI: INT_SRC_OVR (bus 0 bus_irq 0 global_irq 2 dfl dfl)",
    "ACPI: INT_SRC_OVR (bus 0 bus_irq 9 global_irq 9 high level)",
    "ACPI: Using ACPI (MADT) for SMP configuration information",
]
BZIMAGE_LINES = ["KASLR disabled: 'nokaslr' on cmdline."]


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
    found = {}
    for kind in ("vmlinuz-", "vmlinux-"):
        match = [p for p in paths if os.path.basename(p).startswith(kind)]
        if not match or not os.path.isfile(match[0]):
            fail(f"scripts/fetch-linux.sh printed no {kind}* path: {result.stdout!r}")
        found[kind] = match[0]
    print(f"kernels: {found['vmlinuz-']}, {found['vmlinux-']} "
          f"(fetch step {time.monotonic() - started:.1f} s)")
    return found["vmlinuz-"], found["vmlinux-"]


read = read_text


def wait_for_lines(shim, serial, log, expected, timeout):
    """Seconds until every expected line is in the serial file."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        text = read(serial)
        if all(line in text for line in expected):
            return time.monotonic() - started
        if shim.poll() is not None:
            fail(f"the shim exited ({shim.returncode}) before the banner:\n{read(log)}\n"
                 f"serial:\n{text[-2000:]}")
        time.sleep(0.25)
    text = read(serial)
    missing = [line for line in expected if line not in text]
    fail(f"after {timeout} s the serial output lacks {missing}\nserial:\n{text[-3000:]}\n"
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


def boot_until(shim_path, kernel, stages):
    """Boot kernel, wait for each stage's serial lines (a list of (lines,
    timeout) pairs, each timeout counted from the previous stage), stop with
    SIGTERM."""
    with tempfile.TemporaryDirectory(prefix="vsnap-banner-") as tmp:
        serial = os.path.join(tmp, "serial.txt")
        log = os.path.join(tmp, "shim.log")
        with open(log, "w") as log_file:
            shim = subprocess.Popen(
                [shim_path, "--kernel", kernel, "--cmdline", CMDLINE, "--memory", "size=512M",
                 "--cpus", "boot=1", "--serial", "file=" + serial, "--console", "off"],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            seconds = 0
            for expected, timeout in stages:
                seconds += wait_for_lines(shim, serial, log, expected, timeout)
                print(f"{os.path.basename(kernel)}: {len(expected)} expected lines on the serial port "
                      f"after {seconds:.1f} s")
            text = read(serial).splitlines()
            for line in text:
                if any(e in line for lines, _ in stages for e in lines):
                    print("  " + line)
            stop_shim(shim, log)
        finally:
            if shim.poll() is None:
                shim.kill()
                shim.wait()


def main():
    if len(sys.argv) != 3:
        fail("usage: test_linux_banner.py <vsnap-shim> <source root>")
    shim_path, source_root = sys.argv[1], sys.argv[2]
    if not os.access(shim_path, os.X_OK):
        fail(f"no shim at {shim_path}")
    bzimage, vmlinux = fetch_kernel(source_root)
    boot_until(shim_path, bzimage, [(BZIMAGE_LINES, STUB_TIMEOUT)])
    boot_until(shim_path, vmlinux, [(VMLINUX_LINES, BANNER_TIMEOUT), (TABLE_LINES, TABLES_TIMEOUT),
                                          (MADT_LINES, MADT_TIMEOUT)])
    print("ok: bzImage decompressor, vmlinux banner, e820, MP and ACPI tables; "
          "shim stopped cleanly on SIGTERM each time")


if __name__ == "__main__":
    main()
