#!/bin/bash
# Build an initramfs (cpio "newc", optionally gzip-compressed) whose /init is
# vsnap-agent, for Linux guests on a real KVM host:
#
#   guest/mkinitramfs.sh -o OUT.cpio [-a AGENT] [-b BUSYBOX] [-i INIT] [-r] [-z]
#
#   -a AGENT    the static vsnap-agent (default: build/guest/agent/vsnap-agent
#               in a checkout, <prefix>/lib/vsnap/vsnap-agent when installed)
#   -b BUSYBOX  also add a static busybox as /bin/busybox with /bin/sh; "auto"
#               takes /bin/busybox if it is there (package busybox-static)
#   -i INIT     a static program as /init instead, the agent as
#               /bin/vsnap-agent, and /etc/acpi/PWRF/00000080 for busybox
#               acpid (the power button signals init to power off): the
#               Linux test guest (build/guest/linux/vsnap-linux-init)
#   -r          rewrite syscall to ud2 in every program, for a kernel with
#               guest/linux/patches on a kvm_pvm host (checkout only)
#   -z          gzip the archive
#
# The archive is written directly (no staging directory, no root needed for
# the /dev/console node the kernel opens before it runs /init).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# Run from a checkout (guest/) or installed as <prefix>/bin/vsnap-mkinitramfs.
agent="$here/../build/guest/agent/vsnap-agent"
[ -f "$agent" ] || agent="$here/../lib/vsnap/vsnap-agent"
out= busybox= init= rewrite=0 gzip=0
usage() { sed -n '2,21s/^# \{0,1\}//p' "$0" >&2; exit 2; }
while getopts "o:a:b:i:rzh" opt; do
  case $opt in
    o) out=$OPTARG ;;
    a) agent=$OPTARG ;;
    b) busybox=$OPTARG ;;
    i) init=$OPTARG ;;
    r) rewrite=1 ;;
    z) gzip=1 ;;
    *) usage ;;
  esac
done
[ -n "$out" ] || usage
[ -f "$agent" ] || { echo "mkinitramfs: agent '$agent' not found (build it first)" >&2; exit 1; }
if [ "$busybox" = auto ]; then
  busybox=; [ -x /bin/busybox ] && busybox=/bin/busybox
fi
# A dynamic program (one with a PT_INTERP loader) would not run in the initramfs.
is_static() { readelf -lW "$1" 2>/dev/null | grep -q "LOAD" && ! readelf -lW "$1" | grep -q "INTERP"; }
if [ -n "$busybox" ] && ! is_static "$busybox"; then
  echo "mkinitramfs: '$busybox' is not a static program (install busybox-static)" >&2
  exit 1
fi
if ! is_static "$agent"; then
  echo "mkinitramfs: '$agent' is not a static program" >&2
  exit 1
fi

if [ -n "$init" ] && ! is_static "$init"; then
  echo "mkinitramfs: init '$init' is not a static program" >&2
  exit 1
fi

tmp=$(mktemp "${out}.XXXXXX")
work=$(mktemp -d "${out}.d.XXXXXX")
trap 'rm -rf "$tmp" "$work"' EXIT
# -r: the programs as the archive holds them, with syscall rewritten.
if [ "$rewrite" = 1 ]; then
  rewriter="$here/linux/rewrite-syscalls.py"
  [ -x "$rewriter" ] || { echo "mkinitramfs: -r needs $rewriter (a checkout)" >&2; exit 1; }
  for name in agent busybox init; do
    [ -n "${!name}" ] || continue
    "$rewriter" "${!name}" "$work/$name" >&2
    printf -v "$name" %s "$work/$name"
  done
fi
/usr/bin/python3 - "$tmp" "$agent" "$busybox" "$init" <<'PY'
# Entries of a newc archive: a 110-byte ASCII header, the NUL-terminated name,
# padding to 4 bytes, the data, padding to 4 bytes; "TRAILER!!!" ends it.
import os, stat, sys

out_path, agent, busybox, init = sys.argv[1:5]
entries = [
    ("dev", stat.S_IFDIR | 0o755, b"", 0, 0),
    ("dev/console", stat.S_IFCHR | 0o600, b"", 5, 1),
    ("dev/null", stat.S_IFCHR | 0o666, b"", 1, 3),
    ("proc", stat.S_IFDIR | 0o755, b"", 0, 0),
    ("sys", stat.S_IFDIR | 0o755, b"", 0, 0),
    ("tmp", stat.S_IFDIR | 0o1777, b"", 0, 0),
]
if init:
    # busybox acpid runs ./PWRF/00000080 in its directory on the power
    # button; busybox sh's own kill asks init for a poweroff (SIGUSR2).
    entries += [
        ("init", stat.S_IFREG | 0o755, open(init, "rb").read(), 0, 0),
        ("bin", stat.S_IFDIR | 0o755, b"", 0, 0),
        ("bin/vsnap-agent", stat.S_IFREG | 0o755, open(agent, "rb").read(), 0, 0),
        ("etc", stat.S_IFDIR | 0o755, b"", 0, 0),
        ("etc/acpi", stat.S_IFDIR | 0o755, b"", 0, 0),
        ("etc/acpi/PWRF", stat.S_IFDIR | 0o755, b"", 0, 0),
        ("etc/acpi/PWRF/00000080", stat.S_IFREG | 0o755, b"#!/bin/sh\nkill -USR2 1\n", 0, 0),
    ]
else:
    entries.append(("init", stat.S_IFREG | 0o755, open(agent, "rb").read(), 0, 0))
if busybox:
    if not init:
        entries.append(("bin", stat.S_IFDIR | 0o755, b"", 0, 0))
    entries += [
        ("bin/busybox", stat.S_IFREG | 0o755, open(busybox, "rb").read(), 0, 0),
        ("bin/sh", stat.S_IFLNK | 0o777, b"busybox", 0, 0),
    ]

def pad(n):
    return b"\0" * (-n % 4)

with open(out_path, "wb") as out:
    for ino, (name, mode, data, rmaj, rmin) in enumerate(entries + [("TRAILER!!!", 0, b"", 0, 0)], 1):
        nlink = 2 if stat.S_ISDIR(mode) else 1
        fields = (ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rmaj, rmin, len(name) + 1, 0)
        header = b"070701" + b"".join(b"%08X" % f for f in fields) + name.encode() + b"\0"
        out.write(header + pad(len(header)) + data + pad(len(data)))
    out.write(b"\0" * (-out.tell() % 512))
PY
if [ "$gzip" = 1 ]; then
  gzip -9 -n -c "$tmp" > "$out"
else
  cp "$tmp" "$out"
fi
echo "mkinitramfs: wrote $out (/init = $(basename "${init:-$agent}")${init:+, /bin/vsnap-agent}${busybox:+, busybox}$([ "$rewrite" = 1 ] && echo ", syscall rewritten"))"
