#!/bin/bash
# The demo: set everything up, then tell the libvirt story with unmodified
# virsh: start virtvsnapd, define a microVM, start it, wait for the guest's
# pushed readiness, write guest memory, snapshot, write more, diff snapshot,
# revert to each (on-demand restore), managedsave and start, printing each
# step's time and the guest's memory checksums; then clean up.
# ./scripts/demo.sh --linux tells it with a real Linux guest instead
# (scripts/demo-linux.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = --linux ] && exec ./scripts/demo-linux.sh
./scripts/setup.sh
BUILD=${BUILD:-build}
ROOT=$PWD
DAEMON=$ROOT/$BUILD/plugin/virtvsnapd
GUEST=$ROOT/$BUILD/guest/testguest/vsnap-testguest
URI=vsnap:///system
NAME=vsnap-demo
VSOCK=/run/vsnap/$NAME/vsock.sock
MIB=$((1 << 20))
REGION_A="0x1000000 $((16 * MIB))"   # 16 MiB at guest-physical 16 MiB
REGION_B="0x2000000 $((8 * MIB))"    # 8 MiB at 32 MiB

work=$(mktemp -d /tmp/vsnap-demo.XXXXXX)
daemon_pid=
. "$ROOT/scripts/demo-lib.sh"
trap cleanup EXIT

step() { printf '  %-50s %7s ms\n' "$1" "$2"; }
guest() { "$ROOT/scripts/guest-cmd.py" "$VSOCK" "$@"; }
sums() { guest "SUM $REGION_A" "SUM $REGION_B" | awk '{print $2}' | paste -sd' '; }

echo "== vsnap demo: a microVM driven by unmodified virsh ($URI) =="
start_daemon

cat > "$work/$NAME.xml" <<XML
<domain type='kvm'>
  <name>$NAME</name>
  <memory unit='MiB'>1024</memory>
  <vcpu>2</vcpu>
  <os>
    <type arch='x86_64'>hvm</type>
    <kernel>$GUEST</kernel>
    <cmdline>vsnap.fill_mib=64 vsnap.seed=7 vsnap.delay_ms=100</cmdline>
  </os>
  <devices>
    <serial type='pty'><target port='0'/></serial>
    <vsock model='virtio'><cid auto='yes'/></vsock>
  </devices>
  <metadata>
    <vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'><vsnap:restore mode='ondemand'/></vsnap:vsnap>
  </metadata>
</domain>
XML

t=$(now_ms); virsh_ define "$work/$NAME.xml" >/dev/null; step "virsh define (1 GiB, 2 vCPUs, test guest)" $(( $(now_ms) - t ))
listen_ready 60
t=$(now_ms); virsh_ start "$NAME" >/dev/null; step "virsh start" $(( $(now_ms) - t ))
await_ready; step "  ... guest ready (agent-lifecycle event)" $(( $(now_ms) - t ))

guest "FILL $REGION_A 1" "FILL $REGION_B 2" >/dev/null
s1=$(sums); echo "  guest memory A,B = $s1"
t=$(now_ms); virsh_ snapshot-create-as "$NAME" s1 "first state" >/dev/null; step "virsh snapshot-create-as s1 (full layer)" $(( $(now_ms) - t ))
guest "FILL $REGION_B 3" >/dev/null
s2=$(sums); echo "  guest memory A,B = $s2"
t=$(now_ms); virsh_ snapshot-create-as "$NAME" s2 "B rewritten" >/dev/null; step "virsh snapshot-create-as s2 (diff layer)" $(( $(now_ms) - t ))
guest "FILL $REGION_A 4" "FILL $REGION_B 5" >/dev/null
echo "  guest memory A,B = $(sums)  (after s2: both rewritten)"
virsh_ snapshot-list "$NAME" --tree | sed 's/^/  /'

for snap in s1 s2; do
  listen_ready 60
  t=$(now_ms); virsh_ snapshot-revert "$NAME" "$snap" >/dev/null; step "virsh snapshot-revert $snap (on demand)" $(( $(now_ms) - t ))
  await_ready; step "  ... guest ready again" $(( $(now_ms) - t ))
  got=$(sums); want=$s1; [ "$snap" = s2 ] && want=$s2
  echo "  guest memory A,B = $got  $([ "$got" = "$want" ] && echo "(matches $snap)" || echo "(MISMATCH: $snap had $want)")"
  [ "$got" = "$want" ] || exit 1
done

before=$(sums)
t=$(now_ms); virsh_ managedsave "$NAME" >/dev/null; step "virsh managedsave" $(( $(now_ms) - t ))
echo "  state: $(virsh_ domstate "$NAME" --reason)"
listen_ready 60
t=$(now_ms); virsh_ start "$NAME" >/dev/null; step "virsh start (from the managed save image)" $(( $(now_ms) - t ))
await_ready; step "  ... guest ready again" $(( $(now_ms) - t ))
after=$(sums)
echo "  guest memory A,B = $after  $([ "$after" = "$before" ] && echo "(as saved)" || echo "(MISMATCH: saved $before)")"
[ "$after" = "$before" ]

virsh_ destroy "$NAME" >/dev/null
virsh_ undefine "$NAME" --snapshots-metadata >/dev/null
echo "== demo done: domain destroyed and undefined =="
