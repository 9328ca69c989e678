#!/bin/bash
# The demo with a real Linux guest (./scripts/demo.sh --linux): build the
# Linux microVM guest (scripts/build-linux-guest.sh; the kernel once, ~5 min
# on 2 cores, cached after), define it from xml/examples/linux-microvm.xml,
# boot it once (vsnap-agent's READY is libvirt's agent-lifecycle event), then
# snapshot, write the disk from inside Linux, revert on demand, managedsave and
# start, each restore timed to READY again; virsh shutdown presses the ACPI
# power button and Linux powers off. Cleans up after itself.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD=${BUILD:-build}
ROOT=$PWD
DAEMON=$ROOT/$BUILD/plugin/virtvsnapd
GUEST_DIR=$(./scripts/build-linux-guest.sh --build "$BUILD")
URI=vsnap:///system
NAME=vsnap-demo-linux
VSOCK=/run/vsnap/$NAME/vsock.sock

work=$(mktemp -d /tmp/vsnap-demo-linux.XXXXXX)
daemon_pid=
. "$ROOT/scripts/demo-lib.sh"
trap cleanup EXIT

step() { printf '  %-52s %8s ms\n' "$1" "$2"; }
service() { "$ROOT/scripts/guest-cmd.py" --port 5001 "$VSOCK" "$@"; }
sha() { service "SHA 0 1048576" | awk '{print substr($2, 1, 16)}'; }

echo "== vsnap demo: a Linux microVM driven by unmodified virsh ($URI) =="
start_daemon

# The example domain with this build's kernel, initramfs and boot line.
head -c $((16 << 20)) /dev/urandom > "$work/data.img"
sed -e "s|<name>linux-microvm</name>|<name>$NAME</name>|" \
    -e "s|/var/lib/vsnap/images/linux/vmlinux|$GUEST_DIR/vmlinux|" \
    -e "s|/var/lib/vsnap/images/linux/initramfs.cpio|$GUEST_DIR/initramfs.cpio|" \
    -e "s|/var/lib/vsnap/images/linux/data.img|$work/data.img|" \
    -e "s|<cmdline>.*</cmdline>|<cmdline>$(cat "$GUEST_DIR/cmdline")</cmdline>|" \
    xml/examples/linux-microvm.xml > "$work/$NAME.xml"

virsh_ define "$work/$NAME.xml" >/dev/null
listen_ready 600
t=$(now_ms); virsh_ start "$NAME" >/dev/null
await_ready; step "virsh start: Linux boots to READY (once)" $(( $(now_ms) - t ))
s1=$(sha); echo "  vda first MiB, sha256 $s1... (the host's: $(head -c 1048576 "$work/data.img" | sha256sum | cut -c1-16)...)"
t=$(now_ms); virsh_ snapshot-create-as "$NAME" booted >/dev/null; step "virsh snapshot-create-as booted" $(( $(now_ms) - t ))
service "WRITE 0 1048576 demo" >/dev/null
echo "  Linux wrote vda's first MiB: sha256 $(sha)..."

listen_ready 600
t=$(now_ms); virsh_ snapshot-revert "$NAME" booted >/dev/null; step "virsh snapshot-revert booted (on demand)" $(( $(now_ms) - t ))
await_ready; step "  ... READY again" $(( $(now_ms) - t ))
got=$(sha)
echo "  vda first MiB, sha256 $got...  $([ "$got" = "$s1" ] && echo "(as at the snapshot)" || echo "(MISMATCH)")"
[ "$got" = "$s1" ]

t=$(now_ms); virsh_ managedsave "$NAME" >/dev/null; step "virsh managedsave" $(( $(now_ms) - t ))
listen_ready 600
t=$(now_ms); virsh_ start "$NAME" >/dev/null; step "virsh start (from the managed save image)" $(( $(now_ms) - t ))
await_ready; step "  ... READY again" $(( $(now_ms) - t ))

t=$(now_ms); virsh_ shutdown "$NAME" >/dev/null
until virsh_ domstate "$NAME" | grep -q "shut off"; do sleep 0.1; done
step "virsh shutdown: ACPI power button, Linux powers off" $(( $(now_ms) - t ))
echo "  state: $(virsh_ domstate "$NAME" --reason)"
virsh_ undefine "$NAME" --snapshots-metadata >/dev/null
echo "== demo done: domain undefined =="
