#!/usr/bin/python3
"""The shim's import structure, checked: every `#include "..."` in shim/ goes
down the layer order below (or stays inside its own group), private headers
stay inside their group, includes sit at the top of a file, and no folder's
meson.build compiles another folder's files.

Usage: test-shim-layers.py SHIM_SOURCE_DIR
Exits 1 and prints every violation found; 0 when there is none.
"""
import os
import re
import sys

# Highest first. A file may include files of its own group and of any group
# on a lower line; groups on one line are peers and do not include each other.
LAYERS = [
    ["main"],                 # main.c: the program
    ["api"],                  # api/: REST API and command line
    ["vmm"],                  # vmm/: the VM lifecycle, event monitor, readiness
    ["persist"],              # persist/: snapshot and restore of a whole VM
    ["core"],                 # the KVM core: vm*.c, vcpu.c, cpuid.c
    ["devices"],              # devices/: one file per device
    ["block"],                # block/: disk images behind struct blk_backend
    ["boot"],                 # boot/: the Linux boot protocol and tables
    ["ram-snapshot"],         # ram-snapshot/: guest RAM to and from layers, restore modes, uffd
    ["platform", "config", "state"],  # memory.c, bus.c; config/; state/
    ["sandbox"],              # sandbox/: seccomp allow-lists, --confine
]

# Top-level files by group; a folder is its own group.
TOP_LEVEL = {
    "main.c": "main",
    "vm.c": "core", "vm.h": "core", "vm-internal.h": "core", "vm-run.c": "core",
    "vcpu.c": "core", "cpuid.c": "core", "cpuid.h": "core",
    "memory.c": "platform", "memory.h": "platform", "bus.c": "platform", "bus.h": "platform",
}

PRIVATE = re.compile(r"(-internal|-priv)\.h$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ANY_INCLUDE = re.compile(r"^\s*#\s*include\b")
# Lines that may come before or between the includes of a file.
PREAMBLE = re.compile(r"^\s*(#\s*(pragma|define|include|if|ifdef|ifndef|endif|else|undef)\b|$)")

RANK = {group: rank for rank, groups in enumerate(reversed(LAYERS)) for group in groups}


def group_of(shim, path):
    rel = os.path.relpath(path, shim)
    parts = rel.split(os.sep)
    if len(parts) == 1:
        return TOP_LEVEL.get(parts[0])
    return parts[0] if parts[0] in RANK else None


def resolve(shim, including, name):
    """Where the compiler finds "name": beside the including file, then in
    shim/ (the shim's include directory). None: outside the shim."""
    for base in (os.path.dirname(including), shim):
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(candidate) and candidate.startswith(shim + os.sep):
            return candidate
    return None


def strip_comments(text):
    """The text with comments blanked, line breaks kept (string literals in
    include lines hold no comment markers)."""
    return re.sub(r"/\*.*?\*/|//[^\n]*",
                  lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def check_source(shim, path, problems):
    rel = os.path.relpath(path, shim)
    group = group_of(shim, path)
    if group is None:
        problems.append(f"{rel}: not in any layer (add it to test-shim-layers.py)")
        return
    with open(path, encoding="utf-8") as f:
        lines = strip_comments(f.read()).split("\n")
    in_code = False
    for number, line in enumerate(lines, 1):
        if ANY_INCLUDE.match(line) and in_code:
            problems.append(f"{rel}:{number}: include after code (includes sit at the top)")
        if not PREAMBLE.match(line):
            in_code = True
        m = INCLUDE.match(line)
        if not m:
            continue
        target = resolve(shim, path, m.group(1))
        if target is None:
            continue
        trel = os.path.relpath(target, shim)
        tgroup = group_of(shim, target)
        if tgroup is None:
            problems.append(f"{trel}: not in any layer (add it to test-shim-layers.py)")
            continue
        if tgroup == group:
            continue
        if PRIVATE.search(target):
            problems.append(f"{rel}:{number}: includes {trel}, private to {tgroup}")
        elif RANK[tgroup] >= RANK[group]:
            how = "a higher" if RANK[tgroup] > RANK[group] else "a peer"
            problems.append(f"{rel}:{number}: {group} includes {trel} of {how} layer ({tgroup})")


def check_meson(shim, path, problems):
    rel = os.path.relpath(path, shim)
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"#[^\n]*", "", f.read())
    for m in re.finditer(r"'(\.\./[^']*)'", text):
        problems.append(f"{rel}: compiles {m.group(1)}, a file of another folder")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    shim = os.path.realpath(sys.argv[1])
    problems = []
    for root, dirs, files in os.walk(shim):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if name.endswith((".c", ".h")):
                check_source(shim, path, problems)
            elif name == "meson.build":
                check_meson(shim, path, problems)
    for p in dict.fromkeys(problems):
        print(p)
    if problems:
        order = " -> ".join(" / ".join(groups) for groups in LAYERS)
        print(f"\n{len(set(problems))} layering problems; the order is {order}")
        return 1
    print("shim layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
