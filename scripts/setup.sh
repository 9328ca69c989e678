#!/bin/bash
# Install every Debian package vsnap needs, then configure and build into
# build/ (or $BUILD). Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential meson ninja-build pkg-config
  libglib2.0-dev libjson-glib-dev libsoup-3.0-dev libcurl4-openssl-dev libssl-dev
  libxml2-dev libxml2-utils libzstd-dev zstd xz-utils libtirpc-dev libseccomp-dev
  libvirt-dev libvirt-clients python3-libvirt
  # <driver io='io_uring'/>: a disk's io_uring (shim/block/blk-uring.c)
  liburing-dev
  curl socat cpio busybox-static
  # the Linux test guest (scripts/build-linux-guest.sh, tests/linux): Debian's
  # kernel source and what building it needs
  linux-source-6.1 flex bison bc libelf-dev
  # the disk benchmark's host side (tests/bench/bench-blk.py)
  fio
  # tests/plugin/test_disk_modes.py counts a shim's fdatasync calls (strace -c)
  strace
  # guest/mkimage.sh: a Debian root file system for stock guests (tests/boot)
  debootstrap e2fsprogs
  # man pages; the Debian package and its test (tests/package: build, lintian,
  # systemd-analyze verify)
  scdoc dpkg-dev debhelper lintian systemd git
  # tests/netd: namespaces, bridges and veth pairs (ip), and libvirt's network
  # driver (in Debian 12's libvirt-daemon, run by the test in namespaces of its
  # own; iptables for its isolated network's rules)
  iproute2 libvirt-daemon iptables
  # tests/clients: clients vsnap did not write: virt-install (virtinst) and
  # Ansible's community.libvirt modules (ansible; its virt_pool needs
  # python3-lxml)
  virtinst ansible python3-lxml
  # the fuzz targets (scripts/fuzz.sh): clang with libFuzzer and the sanitizers
  clang libclang-rt-14-dev
  # the snapshot store's tests (tests/store): nginx with WebDAV, and Ceph's RADOS
  # Gateway on a one-node cluster as the S3 server; openssl makes the
  # throwaway CA and certificate of nginx's TLS server
  nginx ceph-mon ceph-osd radosgw ceph-common openssl
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages ${missing[*]}; installing them needs root: run this as root (sudo $0 when you are not)" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -e /dev/kvm ]; then
  echo "setup: /dev/kvm is missing: vsnap needs KVM" >&2
  exit 1
fi

BUILD=${BUILD:-build}
# VSNAP_TEST_HOOKS=1 (scripts/test.sh): a build tree with the test suite's
# triggers compiled in (meson_options.txt, test_hooks); the default is a
# product build without them.
hooks=false
[ "${VSNAP_TEST_HOOKS:-0}" = 1 ] && hooks=true
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" -Dtest_hooks=$hooks >/dev/null
elif ! meson introspect --buildoptions "$BUILD" | grep -q "\"name\": \"test_hooks\", \"value\": $hooks"; then
  meson configure "$BUILD" -Dtest_hooks=$hooks >/dev/null
fi
ninja -C "$BUILD" >/dev/null
echo "setup: built into $BUILD/"
