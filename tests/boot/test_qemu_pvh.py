#!/usr/bin/python3
"""The test guest under QEMU (real KVM) through its PVH entry (entry-pvh.S):
QEMU's -kernel boots it on q35 at 512 MiB and 8 GiB (the memory map then has a
range above 4 GiB), and the fill checksum matches the host reference. Also
checks the ELF keeps the shim's entry (e_entry, 64-bit) apart from the PVH one.
Skips (77) when qemu-system-x86_64 is not installed: it is a large package that
only the QEMU benchmark installs.

usage: test_qemu_pvh.py <vsnap-testguest> <vsnap-pattern>
"""

import os
import selectors
import shutil
import struct
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import pattern_checksum  # noqa: E402

MIB = 1 << 20
# SeaBIOS and the PVH option ROM run in KVM's emulator here: 5-10 s to "booted".
BOOT_TIMEOUT = 90
PREFIX = "vsnap-testguest: "
XEN_ELFNOTE_PHYS32_ENTRY = 18
PT_LOAD, PT_NOTE = 1, 4


def elf_entries(path):
    """(e_entry, PVH entry from the Xen note or None, [(vaddr, memsz, flags)] of PT_LOAD)."""
    with open(path, "rb") as f:
        data = f.read()
    e_entry, e_phoff = struct.unpack_from("<QQ", data, 24)
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 54)
    pvh, loads = None, []
    for i in range(e_phnum):
        p_type, p_flags, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = struct.unpack_from(
            "<IIQQQQQQ", data, e_phoff + i * e_phentsize)
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_memsz, p_flags))
        if p_type != PT_NOTE:
            continue
        off, end = p_offset, p_offset + p_filesz
        while off + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, off)
            name_off = off + 12
            desc_off = name_off + (namesz + 3) // 4 * 4
            if data[name_off:name_off + namesz] == b"Xen\0" and ntype == XEN_ELFNOTE_PHYS32_ENTRY:
                pvh = int.from_bytes(data[desc_off:desc_off + descsz], "little")
            off = desc_off + (descsz + 3) // 4 * 4
    return e_entry, pvh, loads


class Qemu:
    """qemu-system-x86_64 with the guest's serial port on a pipe."""

    def __init__(self, memory_mib, cmdline):
        self.lines = []
        self.proc = subprocess.Popen(
            [QEMU, "-enable-kvm", "-M", "q35", "-m", str(memory_mib), "-display", "none",
             "-nodefaults", "-no-user-config", "-monitor", "none", "-serial", "stdio",
             "-kernel", GUEST, "-append", cmdline],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.buffer = b""

    def wait_for(self, prefix, timeout=BOOT_TIMEOUT):
        """The first serial line starting with prefix; fails on an error line,
        QEMU's exit or the timeout."""
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            while True:
                while b"\n" in self.buffer:
                    raw, self.buffer = self.buffer.split(b"\n", 1)
                    line = raw.decode(errors="replace").rstrip("\r")
                    self.lines.append(line)
                    if line.startswith(prefix):
                        return line
                    if "exception" in line or PREFIX + "error" in line:
                        raise AssertionError("guest error: " + line + self.describe())
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no '{prefix}' within {timeout} s" + self.describe())
                if not sel.select(left):
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise AssertionError(f"QEMU exited ({self.proc.wait()}) before '{prefix}'"
                                         + self.describe())
                self.buffer += chunk
        finally:
            sel.close()

    def describe(self):
        return "\n--- QEMU output ---\n" + "\n".join(self.lines[-30:])

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


class PvhBoot(unittest.TestCase):
    def test_entries(self):
        e_entry, pvh, loads = elf_entries(GUEST)
        self.assertIsNotNone(pvh, "no XEN_ELFNOTE_PHYS32_ENTRY note")
        self.assertNotEqual(pvh, e_entry, "the shim's entry must stay the 64-bit _start")
        self.assertLess(pvh, 1 << 32, "the PVH entry runs in 32-bit mode")
        executable = [(v, s) for v, s, flags in loads if flags & 1]
        self.assertTrue(any(v <= pvh < v + s for v, s in executable), "PVH entry outside the code")

    def test_fill_checksum(self):
        expected = pattern_checksum(PATTERN, 11, 16 * MIB)
        for memory_mib in (512, 8192):
            with self.subTest(memory_mib=memory_mib):
                vm = Qemu(memory_mib, "console=ttyS0 vsnap.fill_mib=16 vsnap.seed=11")
                self.addCleanup(vm.close)
                vm.wait_for(PREFIX + "booted")
                line = vm.wait_for(PREFIX + "ready sum=")
                self.assertEqual(line, PREFIX + "ready sum=" + expected, vm.describe())
                vm.close()

    def test_fill_beyond_ram_is_refused(self):
        # 600 MiB from 16 MiB does not fit in 512 MiB: the e820 copied from the
        # PVH memory map must say so.
        vm = Qemu(512, "vsnap.fill_mib=600")
        self.addCleanup(vm.close)
        vm.wait_for(PREFIX + "booted")
        with self.assertRaisesRegex(AssertionError, "region from 16 MiB is not all RAM"):
            vm.wait_for(PREFIX + "ready")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    GUEST, PATTERN = sys.argv[1], sys.argv[2]
    QEMU = shutil.which("qemu-system-x86_64")
    if QEMU is None:
        print("SKIP: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)")
        sys.exit(77)
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        sys.exit("/dev/kvm is not usable")
    sys.argv[1:] = []
    unittest.main(verbosity=2)
