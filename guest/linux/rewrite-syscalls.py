#!/usr/bin/python3
"""Rewrite every `syscall` instruction (0f 05) of a static x86-64 program to
`ud2` (0f 0b), for Linux guests on kvm_pvm hosts, where a SYSCALL from guest
user mode never reaches the guest kernel and the kernel built with
guest/linux/patches/0002-user-ud2-is-a-syscall.patch runs a user-mode ud2 as
the system call instead (docs/host-limits.md).

    rewrite-syscalls.py IN OUT

The sites come from disassembling the executable sections (objdump), not from
a byte search, which would also hit 0f 05 inside other instructions and data.
Prints how many sites it rewrote. A program with an interpreter (dynamic) is
refused: its libraries would need the same treatment.
"""

import re
import struct
import subprocess
import sys

SYSCALL = b"\x0f\x05"
UD2 = b"\x0f\x0b"
SHF_EXECINSTR = 0x4


def fail(message):
    sys.exit(f"rewrite-syscalls: {message}")


def exec_sections(elf):
    """(name index, address, file offset, size) of every executable section."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or struct.unpack_from("<H", elf, 18)[0] != 62:
        fail("not an ELF64 x86-64 file")
    phoff, shoff = struct.unpack_from("<QQ", elf, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", elf, 54)
    for i in range(phnum):
        if struct.unpack_from("<I", elf, phoff + i * phentsize)[0] == 3:  # PT_INTERP
            fail("a dynamically linked program (it has PT_INTERP)")
    sections = []
    for i in range(shnum):
        base = shoff + i * shentsize
        _, kind, flags, addr, offset, size = struct.unpack_from("<IIQQQQ", elf, base)
        if flags & SHF_EXECINSTR and kind == 1:  # SHT_PROGBITS
            sections.append((addr, offset, size))
    if not sections:
        fail("no executable sections (section headers stripped?)")
    return sections


def syscall_addresses(path):
    out = subprocess.run(["objdump", "-d", "-w", "--no-show-raw-insn", path],
                         capture_output=True, text=True, check=True).stdout
    line = re.compile(r"^\s*([0-9a-f]+):\s+syscall\s*$")
    return [int(m.group(1), 16) for m in map(line.match, out.splitlines()) if m]


def file_offset(sections, addr):
    for start, offset, size in sections:
        if start <= addr and addr + 2 <= start + size:
            return offset + addr - start
    fail(f"syscall at {addr:#x} is in no executable section")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1:]
    elf = bytearray(open(src, "rb").read())
    sections = exec_sections(elf)
    sites = syscall_addresses(src)
    for addr in sites:
        at = file_offset(sections, addr)
        if elf[at:at + 2] != SYSCALL:
            fail(f"the disassembler's syscall at {addr:#x} is not 0f 05 in the file")
        elf[at:at + 2] = UD2
    with open(dst, "wb") as f:
        f.write(elf)
    print(f"rewrite-syscalls: {src}: {len(sites)} syscall sites -> ud2")


if __name__ == "__main__":
    main()
