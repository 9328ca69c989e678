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
virsh_() { virsh -q -c "$URI" "$@"; }
cleanup() {
  set +e
  virsh_ destroy "$NAME" >/dev/null 2>&1
  virsh_ undefine "$NAME" --snapshots-metadata --managed-save >/dev/null 2>&1
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

now_ms() { date +%s%3N; }
step() { printf '  %-52s %8s ms\n' "$1" "$2"; }
service() { "$ROOT/scripts/guest-cmd.py" --port 5001 "$VSOCK" "$@"; }
sha() { service "SHA 0 1048576" | awk '{print substr($2, 1, 16)}'; }
listen_ready() { virsh -c "$URI" event "$NAME" --event agent-lifecycle --timeout 600 > "$work/event" & ev=$!; sleep 0.2; }
await_ready() { wait "$ev"; grep -q "'connected'" "$work/event" || { echo "demo: no readiness event" >&2; cat "$work/event" >&2; exit 1; }; }

echo "== vsnap demo: a Linux microVM driven by unmodified virsh ($URI) =="
if ! virsh_ version >/dev/null 2>&1; then
  "$DAEMON" >"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  until virsh_ version >/dev/null 2>&1; do
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log"; exit 1; }
    sleep 0.02
  done
  echo "  started virtvsnapd (pid $daemon_pid)"
fi
virsh_ destroy "$NAME" >/dev/null 2>&1 || true
virsh_ undefine "$NAME" --snapshots-metadata --managed-save >/dev/null 2>&1 || true

# The example domain with this build's kernel, initramfs and boot line.
head -c $((16 << 20)) /dev/urandom > "$work/data.img"
sed -e "s|<name>linux-microvm</name>|<name>$NAME</name>|" \
    -e "s|/var/lib/vsnap/images/linux/vmlinux|$GUEST_DIR/vmlinux|" \
    -e "s|/var/lib/vsnap/images/linux/initramfs.cpio|$GUEST_DIR/initramfs.cpio|" \
    -e "s|/var/lib/vsnap/images/linux/data.img|$work/data.img|" \
    -e "s|<cmdline>.*</cmdline>|<cmdline>$(cat "$GUEST_DIR/cmdline")</cmdline>|" \
    xml/examples/linux-microvm.xml > "$work/$NAME.xml"

virsh_ define "$work/$NAME.xml" >/dev/null
listen_ready
t=$(now_ms); virsh_ start "$NAME" >/dev/null
await_ready; step "virsh start: Linux boots to READY (once)" $(( $(now_ms) - t ))
s1=$(sha); echo "  vda first MiB, sha256 $s1... (the host's: $(head -c 1048576 "$work/data.img" | sha256sum | cut -c1-16)...)"
t=$(now_ms); virsh_ snapshot-create-as "$NAME" booted >/dev/null; step "virsh snapshot-create-as booted" $(( $(now_ms) - t ))
service "WRITE 0 1048576 demo" >/dev/null
echo "  Linux wrote vda's first MiB: sha256 $(sha)..."

listen_ready
t=$(now_ms); virsh_ snapshot-revert "$NAME" booted >/dev/null; step "virsh snapshot-revert booted (on demand)" $(( $(now_ms) - t ))
await_ready; step "  ... READY again" $(( $(now_ms) - t ))
got=$(sha)
echo "  vda first MiB, sha256 $got...  $([ "$got" = "$s1" ] && echo "(as at the snapshot)" || echo "(MISMATCH)")"
[ "$got" = "$s1" ]

t=$(now_ms); virsh_ managedsave "$NAME" >/dev/null; step "virsh managedsave" $(( $(now_ms) - t ))
listen_ready
t=$(now_ms); virsh_ start "$NAME" >/dev/null; step "virsh start (from the managed save image)" $(( $(now_ms) - t ))
await_ready; step "  ... READY again" $(( $(now_ms) - t ))

t=$(now_ms); virsh_ shutdown "$NAME" >/dev/null
until virsh_ domstate "$NAME" | grep -q "shut off"; do sleep 0.1; done
step "virsh shutdown: ACPI power button, Linux powers off" $(( $(now_ms) - t ))
echo "  state: $(virsh_ domstate "$NAME" --reason)"
virsh_ undefine "$NAME" --snapshots-metadata >/dev/null
echo "== demo done: domain undefined =="
