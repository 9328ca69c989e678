#!/usr/bin/python3
"""guest/linux/rewrite-syscalls.py on a real static program (vsnap-agent):
afterwards the disassembly has no syscall left and a ud2 at each former
site, and every byte that differs is a 05 that became 0b right after a 0f;
a dynamically linked program is refused.

    test_rewrite.py <source root> <static program>
"""

import os
import re
import subprocess
import sys
import tempfile

SOURCE_ROOT, PROGRAM = sys.argv[1:3]
REWRITER = os.path.join(SOURCE_ROOT, "guest", "linux", "rewrite-syscalls.py")


def sites(path, mnemonic):
    out = subprocess.run(["objdump", "-d", "-w", "--no-show-raw-insn", path],
                         capture_output=True, text=True, check=True).stdout
    return {int(m.group(1), 16) for m in re.finditer(rf"^\s*([0-9a-f]+):\s+{mnemonic}\s*$", out, re.M)}


def main():
    with tempfile.TemporaryDirectory() as wd:
        out = os.path.join(wd, "rewritten")
        res = subprocess.run([REWRITER, PROGRAM, out], capture_output=True, text=True)
        print(res.stdout.strip(), res.stderr.strip())
        assert res.returncode == 0, res.stderr
        before, after = sites(PROGRAM, "syscall"), sites(out, "syscall")
        assert before, "the program has no syscall to rewrite"
        assert not after, f"syscall left at {sorted(after)[:5]}"
        assert before <= sites(out, "ud2"), "a former syscall site is not a ud2"
        a, b = open(PROGRAM, "rb").read(), open(out, "rb").read()
        assert len(a) == len(b), "the size changed"
        diffs = [i for i in range(len(a)) if a[i] != b[i]]
        assert len(diffs) == len(before), f"{len(diffs)} bytes differ for {len(before)} sites"
        assert all(a[i - 1] == 0x0F and a[i] == 0x05 and b[i] == 0x0B for i in diffs), "a byte other than 0f 05"
        print(f"{len(before)} sites rewritten, {len(diffs)} bytes changed")
        dyn = subprocess.run([REWRITER, "/bin/true", out], capture_output=True, text=True)
        assert dyn.returncode != 0 and "dynamically linked" in dyn.stderr, dyn.stderr
    print("PASS")


if __name__ == "__main__":
    main()
