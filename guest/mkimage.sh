#!/bin/bash
# Build a Debian root file system disk image for vsnap guests: a stock
# systemd system with nothing of vsnap inside (no agent). systemd reports
# readiness itself on the notify port, which virtvsnapd hands it as the
# vmm.notify_socket credential (systemd 256 or later: Debian 13 "trixie",
# the default here; bookworm's systemd 252 does not send it).
#
#   guest/mkimage.sh -o OUT.img [-r SUITE] [-m MIRROR] [-s SIZE] [-c CACHE]
#                    [-a PACKAGES] [-k KERNEL_DIR] [-n HOSTNAME]
#
#   -o OUT.img     the image: a raw ext4 file system (no partition table), the
#                  guest's /dev/vda as a virtio-blk <disk>, root=/dev/vda
#   -r SUITE       Debian suite (default trixie)
#   -m MIRROR      Debian mirror (default: the first deb.debian.org-style URI
#                  of this machine's apt sources, else http://deb.debian.org/debian)
#   -s SIZE        image size for truncate (default 2G)
#   -c CACHE       keep downloaded packages here for the next run
#   -a PACKAGES    more packages, comma-separated (cloud-init, openssh-server, ...)
#   -k KERNEL_DIR  also install Debian's cloud kernel and copy vmlinuz and
#                  initrd.img to KERNEL_DIR, for <os><kernel>/<initrd>
#   -n HOSTNAME    /etc/hostname (default vsnap-guest)
#
# Needs root (debootstrap chroots) and the packages debootstrap and
# e2fsprogs; the file system is filled with mke2fs -d, so nothing is
# mounted. cloud-init, when added with -a, finds its NoCloud seed through
# the SMBIOS serial number (<sysinfo><system><entry name='serial'>
# ds=nocloud;s=http://.../</entry>, see xml/README.md).
set -euo pipefail

out= suite=trixie mirror= size=2G cache= extra= kernel_dir= hostname=vsnap-guest
usage() { sed -n '2,26s/^# \{0,1\}//p' "$0" >&2; exit 2; }
while getopts "o:r:m:s:c:a:k:n:h" opt; do
  case $opt in
    o) out=$OPTARG ;;
    r) suite=$OPTARG ;;
    m) mirror=$OPTARG ;;
    s) size=$OPTARG ;;
    c) cache=$OPTARG ;;
    a) extra=$OPTARG ;;
    k) kernel_dir=$OPTARG ;;
    n) hostname=$OPTARG ;;
    *) usage ;;
  esac
done
[ -n "$out" ] || usage
[ "$(id -u)" = 0 ] || { echo "mkimage: needs root (debootstrap chroots into the new system)" >&2; exit 1; }
for tool in debootstrap mke2fs; do
  command -v "$tool" >/dev/null || { echo "mkimage: $tool is missing (apt-get install debootstrap e2fsprogs)" >&2; exit 1; }
done

# The mirror this machine's apt uses, so the image comes from the same place.
machine_mirror() {
  local uri
  uri=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
          /etc/apt/sources.list.d/*.sources 2>/dev/null |
        grep -oE 'https?://[^ ]+/debian/?' | grep -v security | head -n1 || true)
  echo "${uri:-http://deb.debian.org/debian}"
}
[ -n "$mirror" ] || mirror=$(machine_mirror)

work=$(mktemp -d "${TMPDIR:-/tmp}/vsnap-mkimage.XXXXXX")
trap 'rm -rf "$work"' EXIT
root="$work/root"

packages=systemd,systemd-sysv,udev,dbus,iproute2,ifupdown,netbase
[ -z "$extra" ] || packages="$packages,$extra"
[ -z "$kernel_dir" ] || packages="$packages,linux-image-cloud-amd64,initramfs-tools"
cache_args=()
if [ -n "$cache" ]; then
  mkdir -p "$cache"
  cache_args=(--cache-dir="$(cd "$cache" && pwd)")
fi

echo "mkimage: debootstrap $suite from $mirror (packages: $packages)"
debootstrap --variant=minbase --include="$packages" "${cache_args[@]}" "$suite" "$root" "$mirror" \
  > "$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

# What a guest booted from the image needs: its root, its name, a console
# and DHCP on the first interface; the root account stays locked (seed one
# with cloud-init, or add it after building).
echo "$hostname" > "$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$hostname" > "$root/etc/hosts"
printf '/dev/vda / ext4 defaults,errors=remount-ro 0 1\n' > "$root/etc/fstab"
mkdir -p "$root/etc/network/interfaces.d"
printf 'auto eth0\nallow-hotplug eth0\niface eth0 inet dhcp\n' > "$root/etc/network/interfaces.d/eth0"
: > "$root/etc/machine-id"   # a new id on first boot, not one shared by every clone
rm -f "$root/var/lib/dbus/machine-id"
# serial-getty@ttyS0 starts by itself for console=ttyS0 (systemd's getty generator).

if [ -n "$kernel_dir" ]; then
  mkdir -p "$kernel_dir"
  cp "$(ls "$root"/boot/vmlinuz-* | sort -V | tail -n1)" "$kernel_dir/vmlinuz"
  cp "$(ls "$root"/boot/initrd.img-* | sort -V | tail -n1)" "$kernel_dir/initrd.img"
fi
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/log/*.log "$root"/tmp/*

rm -f "$out"
truncate -s "$size" "$out"
mke2fs -q -t ext4 -L vsnap-root -d "$root" "$out"
echo "mkimage: $out ($(du -h --apparent-size "$out" | cut -f1), $(du -sh "$root" | cut -f1) of files)"
