#!/bin/bash
# Build the Linux microVM guest the tests boot (suite `linux`):
#   <build>/guest/linux/vmlinux         the ELF kernel (Debian's linux-source-6.1,
#                                       guest/linux/microvm.config over tinyconfig)
#   <build>/guest/linux/initramfs.cpio  busybox, vsnap-agent, vsnap-linux-init
#   <build>/guest/linux/cmdline         the boot line (docs/host-limits.md says why
#                                       each parameter is there)
#
# usage: scripts/build-linux-guest.sh [--native] [--build DIR] [--cache DIR]
#
#   --native  for a VMX/SVM host: no kernel patches, no rewritten binaries,
#             into <build>/guest/linux-native/
#   --build   the meson build directory holding vsnap-agent and
#             vsnap-linux-init (default: build, or $BUILD)
#   --cache   where kernels are kept (default /var/cache/vsnap/linux, or
#             $VSNAP_LINUX_CACHE)
#
# On a kvm_pvm host (/sys/module/kvm_pvm exists) the kernel gets the patches in
# guest/linux/patches/ and every binary of the initramfs has its syscall
# instructions rewritten (guest/linux/rewrite-syscalls.py). The kernel is built
# once per source version, gcc, config and patch set (~5 min on 2 cores, under
# nice) and kept in the cache; later runs only assemble the initramfs.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-build}
cache=${VSNAP_LINUX_CACHE:-/var/cache/vsnap/linux}
native=0
while [ $# -gt 0 ]; do
  case $1 in
    --native) native=1 ;;
    --build) build=$2; shift ;;
    --cache) cache=$2; shift ;;
    *) sed -n '2,20s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
  esac
  shift
done
case $build in /*) ;; *) build=$root/$build ;; esac

say() { echo "build-linux-guest: $*" >&2; }

PACKAGES=(linux-source-6.1 busybox-static build-essential flex bison bc libelf-dev cpio xz-utils binutils)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || { say "missing packages ${missing[*]} (install them as root)"; exit 1; }
  say "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

pvm=0
if [ "$native" = 0 ] && [ -d /sys/module/kvm_pvm ]; then
  pvm=1
fi
variant=native
out=$build/guest/linux-native
if [ "$native" = 0 ]; then
  out=$build/guest/linux
  [ "$pvm" = 1 ] && variant=pvm
fi
if [ "$pvm" = 1 ]; then
  say "kvm_pvm host: patched kernel (guest/linux/patches), syscall rewritten to ud2 in the initramfs"
fi

config=$root/guest/linux/microvm.config
patches=()
[ "$pvm" = 1 ] && patches=("$root"/guest/linux/patches/*.patch)
source_version=$(dpkg-query -W -f='${Version}' linux-source-6.1)
tarball=/usr/src/linux-source-6.1.tar.xz
key=$( { echo "source $source_version"; gcc --version | head -n1; echo "variant $variant"
         cat "$config" "${patches[@]}"; } | sha256sum | cut -c1-16)
kernel_dir=$cache/guest-$key

mkdir -p "$cache"
exec 9>"$cache/.build-lock"
flock 9

# The source tree of this variant, kept between builds so that a changed patch
# or option rebuilds in seconds: the patches applied to it are kept in it.
prepare_tree() {
  local tree=$1 applied=$1/.vsnap-patches
  if [ "$(cat "$tree/.vsnap-source" 2>/dev/null)" != "$source_version" ]; then
    say "unpacking linux-source-6.1 $source_version"
    rm -rf "$tree"; mkdir -p "$tree"
    tar -xJf "$tarball" -C "$tree" --strip-components=1
    echo "$source_version" > "$tree/.vsnap-source"
  fi
  mkdir -p "$applied"
  local want have
  want=$(cd "$root/guest/linux/patches" && [ ${#patches[@]} -gt 0 ] && sha256sum "${patches[@]##*/}" || true)
  have=$(cd "$applied" && ls ./*.patch >/dev/null 2>&1 && sha256sum -- *.patch || true)
  [ "$want" = "$have" ] && return
  local p
  for p in $(ls "$applied"/*.patch 2>/dev/null | sort -r); do
    patch -d "$tree" -p1 -R -s < "$p" && rm "$p"
  done
  for p in "${patches[@]}"; do
    say "applying ${p#"$root"/}"
    patch -d "$tree" -p1 -s < "$p" && cp "$p" "$applied/"
  done
}

build_kernel() {
  local tree=$cache/tree-$variant
  prepare_tree "$tree"
  make -C "$tree" -s ARCH=x86_64 tinyconfig >/dev/null
  (cd "$tree" && ./scripts/kconfig/merge_config.sh -m .config "$config" >/dev/null)
  make -C "$tree" -s ARCH=x86_64 olddefconfig >/dev/null
  # An option of the fragment that Kconfig dropped (a dependency missing) is a
  # build error, not a silent difference.
  local line name dropped=0
  while read -r line; do
    case $line in
      CONFIG_*=*) name=${line%%=*} ;;
      "# CONFIG_"*" is not set") name=${line#\# }; name=${name%% *}; line="# $name is not set" ;;
      *) continue ;;
    esac
    if ! grep -qx -- "$line" "$tree/.config"; then
      if [[ $line == "# "* ]] && ! grep -q "^$name=" "$tree/.config"; then continue; fi
      say "config: $line did not hold (now: $(grep -E "^$name=|^# $name is" "$tree/.config" || echo absent))"
      dropped=1
    fi
  done < "$config"
  [ "$dropped" = 0 ] || exit 1
  say "building the kernel ($variant, key $key; ~5 min on 2 cores the first time)"
  local started=$SECONDS
  nice make -C "$tree" -s ARCH=x86_64 -j"$(nproc)" vmlinux
  say "kernel built in $((SECONDS - started)) s"
  local tmp=$cache/.guest-$key.tmp
  rm -rf "$tmp"; mkdir -p "$tmp"
  cp "$tree/vmlinux" "$tree/System.map" "$tree/.config" "$tmp/"
  rm -rf "$kernel_dir"; mv "$tmp" "$kernel_dir"
}

if [ -s "$kernel_dir/vmlinux" ]; then
  say "kernel from the cache ($kernel_dir)"
else
  build_kernel
fi
flock -u 9

# Tests run this concurrently and boot what it writes: one writer at a time,
# and each file replaced whole (a shim may be reading the old one).
mkdir -p "$out"
exec 8>"$out/.lock"
flock 8
publish() { cp "$1" "$2.tmp" && chmod 0644 "$2.tmp" && mv "$2.tmp" "$2"; }
publish "$kernel_dir/vmlinux" "$out/vmlinux"
publish "$kernel_dir/System.map" "$out/System.map"

rewrite=()
[ "$pvm" = 1 ] && rewrite=(-r)
"$root/guest/mkinitramfs.sh" -o "$out/initramfs.cpio.new" "${rewrite[@]}" -b /bin/busybox \
  -a "$build/guest/agent/vsnap-agent" -i "$build/guest/linux/vsnap-linux-init" >&2
chmod 0644 "$out/initramfs.cpio.new"
mv "$out/initramfs.cpio.new" "$out/initramfs.cpio"

# The boot line; the shim appends its virtio_mmio.device= declarations.
cmdline="console=ttyS0 earlyprintk=ttyS0 panic=-1 nokaslr lpj=5000000 tsc=reliable no_timer_check"
if [ "$pvm" = 1 ]; then
  cmdline+=" noxsave mitigations=off nopti nopcid nofsgsbase nopku vdso=0"
  cmdline+=" clearcpuid=erms,fsrm,popcnt,rdrand,rdseed,smap,smep,cx16,invpcid,avx,avx2,avx512f,sse4_1,sse4_2"
  cmdline+=" GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX,-AVX2,-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-ERMS,-FSRM"
fi
echo "$cmdline" > "$out/cmdline.new" && mv "$out/cmdline.new" "$out/cmdline"
say "wrote $out/{vmlinux,initramfs.cpio,cmdline}"
echo "$out"
