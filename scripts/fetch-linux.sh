#!/bin/bash
# Fetch Debian's amd64 kernel and make both forms the shim boots:
#   <cache>/vmlinuz-<version>   the bzImage, as Debian ships it
#   <cache>/vmlinux-<version>   the ELF vmlinux, decompressed from the bzImage's payload
# Prints the two paths (bzImage first). Idempotent: a second run only prints.
#
# usage: scripts/fetch-linux.sh [cache dir]   (default /var/cache/vsnap/linux,
#        or $VSNAP_LINUX_CACHE)
set -euo pipefail

CACHE=${1:-${VSNAP_LINUX_CACHE:-/var/cache/vsnap/linux}}
mkdir -p "$CACHE"
# Tests may run this concurrently: one fetch at a time.
exec 9>"$CACHE/.lock"
flock 9

# Reuse what an earlier run left, if both files are there.
existing=$(ls "$CACHE"/vmlinuz-* 2>/dev/null | sort -V | tail -n1 || true)
if [ -n "$existing" ]; then
  version=${existing##*/vmlinuz-}
  if [ -s "$CACHE/vmlinux-$version" ]; then
    echo "$existing"
    echo "$CACHE/vmlinux-$version"
    exit 0
  fi
fi

package_name() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}'
}

pkg=$(package_name)
if [ -z "$pkg" ]; then
  echo "fetch-linux: apt knows no linux-image-amd64 yet; running apt-get update" >&2
  apt-get update -qq >&2
  pkg=$(package_name)
fi
if [ -z "$pkg" ]; then
  echo "fetch-linux: cannot find the kernel package linux-image-amd64 depends on" >&2
  exit 1
fi

work=$(mktemp -d "$CACHE/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
# As root into a root-only directory: apt's _apt sandbox user could not write there.
(cd "$work" && apt-get -o APT::Sandbox::User=root download -q "$pkg" >&2)
dpkg-deb -x "$work"/"$pkg"_*.deb "$work/root"

bz=$(ls "$work"/root/boot/vmlinuz-* | head -n1)
version=${bz##*/vmlinuz-}

# Extract the ELF vmlinux from the bzImage's payload (payload_offset at 0x248
# and payload_length at 0x24c of the setup header, relative to the start of
# the protected-mode code), whatever compressor the kernel was built with.
/usr/bin/python3 - "$bz" "$work/vmlinux" <<'PY'
import bz2, gzip, lzma, struct, subprocess, sys

src, dst = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
if len(data) < 0x250 or data[0x202:0x206] != b"HdrS":
    sys.exit(f"fetch-linux: {src} is not a bzImage")
version = struct.unpack_from("<H", data, 0x206)[0]
if version < 0x208:
    sys.exit(f"fetch-linux: {src}: boot protocol {version:#x} has no payload fields")
setup_sects = data[0x1F1] or 4
offset, length = struct.unpack_from("<II", data, 0x248)
start = (setup_sects + 1) * 512 + offset
payload = data[start:start + length]
if len(payload) != length:
    sys.exit(f"fetch-linux: {src}: payload runs past the end of the file")


def run_tool(argv):
    return subprocess.run(argv, input=payload, stdout=subprocess.PIPE, check=True).stdout


def xz(p):
    # The kernel's xz payload may carry trailing padding: read one stream.
    return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(p)


def lzma_alone(p):
    return lzma.LZMADecompressor(format=lzma.FORMAT_ALONE).decompress(p)


def gz(p):
    return gzip.GzipFile(fileobj=__import__("io").BytesIO(p)).read()


formats = [
    (b"\xfd7zXZ\x00", "xz", xz),
    (b"\x1f\x8b", "gzip", gz),
    (b"\x28\xb5\x2f\xfd", "zstd", lambda p: run_tool(["zstd", "-dc"])),
    (b"\x02\x21\x4c\x18", "lz4", lambda p: run_tool(["lz4", "-dc"])),
    (b"BZh", "bzip2", bz2.decompress),
    (b"\x89LZO", "lzo", lambda p: run_tool(["lzop", "-dc"])),
    (b"\x5d\x00\x00", "lzma", lzma_alone),
    (b"\x7fELF", "none", lambda p: p),
]
for magic, name, decompress in formats:
    if payload.startswith(magic):
        break
else:
    sys.exit(f"fetch-linux: {src}: unknown payload compression (magic {payload[:6].hex()})")
try:
    elf = decompress(payload)
except Exception as e:
    sys.exit(f"fetch-linux: {src}: cannot decompress the {name} payload: {e}")
if elf[:4] != b"\x7fELF" or elf[4] != 2 or struct.unpack_from("<H", elf, 18)[0] != 62:
    sys.exit(f"fetch-linux: {src}: the {name} payload is not an ELF64 x86-64 vmlinux")
open(dst, "wb").write(elf)
print(f"fetch-linux: {name} payload of {length} bytes -> {len(elf)} byte vmlinux", file=sys.stderr)
PY

# Publish atomically: the vmlinux last, since its presence marks a complete cache.
cp "$bz" "$CACHE/.vmlinuz-$version.tmp" && mv "$CACHE/.vmlinuz-$version.tmp" "$CACHE/vmlinuz-$version"
mv "$work/vmlinux" "$CACHE/vmlinux-$version"
echo "$CACHE/vmlinuz-$version"
echo "$CACHE/vmlinux-$version"
