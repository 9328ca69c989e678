#!/bin/bash
# virt-manager as its users use it: Debian's unmodified virt-manager 4.1,
# driven through its accessibility tree (python3-dogtail) under Xvfb, against
# a private virtvsnapd. tests/desktop/virt_manager_ui.py does the clicking
# and the checks: the domain list (state, CPU graph), Pause / Resume / Shut
# Down / Run / Force Off from the toolbar (checked with virsh domstate), the
# details window (every hardware entry, no error dialog; the Overview's title and
# description applied, checked with virsh desc), the snapshots view
# (lists, creates, reverts: checked with the guest's memory checksum) and the
# serial console view.
#
# Installs virt-manager, python3-dogtail, Xvfb and ImageMagick if missing
# (as root; exits 77, "skipped", when it cannot), starts a private
# virtvsnapd (its own socket and state directory; the system's /run/libvirt
# is never touched), defines and starts a domain that runs the test guest,
# then runs the UI test in an X server and a D-Bus session of its own.
# Afterwards it lists every RPC procedure virt-manager called that the daemon
# answered with an error (from libvirt's own client-side RPC log).
#
# Everything started here is stopped and its temporary files removed; the
# evidence (one screenshot per step, logs, RPC lists) stays in $OUT.
#
# With the argument new-vm it runs tests/desktop/virt_manager_new_vm.py
# instead: virt-manager's New VM wizard importing a disk image, against a
# daemon of that script's own beside a libvirtd for the storage and network
# drivers (in namespaces of its own: root only).
#
#   sudo ./scripts/virt-manager-smoke.sh [new-vm]
#   env: BUILD (build dir, default build; built with scripts/setup.sh unless
#        VSNAP_BUILT=1 says it is built already, as meson test does),
#        OUT (default $BUILD/virt-manager-smoke, with new-vm $BUILD/virt-manager-new-vm)
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-manage}
case $MODE in manage | new-vm) ;; *) echo "usage: $0 [new-vm]" >&2; exit 2 ;; esac
REMOTE_PROGRAM=536903814   # 0x20008086, libvirt's REMOTE_PROGRAM
SKIP=77

t_start=$(date +%s%3N)
ms_since() { echo $(( $(date +%s%3N) - $1 )); }

NEEDED=(virt-manager python3-dogtail xvfb xauth imagemagick dbus)
missing=()
for p in "${NEEDED[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "virt-manager: ${missing[*]} missing; run as root so they can be installed (skipped)" >&2
    exit $SKIP
  fi
  echo "virt-manager: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Recommends would pull in libvirt-daemon-system and a QEMU stack; not needed.
  if ! { apt-get -o DPkg::Lock::Timeout=300 update -qq &&
         apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
           "${missing[@]}" >/dev/null; }; then
    echo "virt-manager: could not install ${missing[*]} (skipped)" >&2
    exit $SKIP
  fi
fi

export BUILD=${BUILD:-build}
[ "${VSNAP_BUILT:-0}" = 1 ] || ./scripts/setup.sh
ROOT=$PWD
case $BUILD in /*) BUILD_DIR=$BUILD ;; *) BUILD_DIR=$ROOT/$BUILD ;; esac
DAEMON=$BUILD_DIR/plugin/virtvsnapd
GUEST=$BUILD_DIR/guest/testguest/vsnap-testguest
case $MODE in manage) OUT=${OUT:-$BUILD_DIR/virt-manager-smoke} ;; new-vm) OUT=${OUT:-$BUILD_DIR/virt-manager-new-vm} ;; esac
NAME='vmm-smoke'
PRE_SNAPSHOT='from-virsh'
t_ready=$(date +%s%3N)

rm -rf "$OUT"
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/vsnap-vmm-smoke.XXXXXX)
mkdir -p "$WORK/home"
SOCK=$WORK/virtvsnapd-sock
URI="vsnap:///system?socket=$SOCK"
daemon_pid=

virsh_() { virsh -q -c "$URI" "$@"; }
# Fast, so that it also completes when a test runner's SIGTERM is followed
# by a SIGKILL half a second later: the daemon, then the shims (they run in
# sessions of their own and outlive it by design) by the pids it recorded.
cleanup() {
  set +e
  [ -n "$daemon_pid" ] && kill -TERM "$daemon_pid" 2>/dev/null
  local pidfile pid
  for pidfile in "$WORK"/state/run/*/pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  done
  [ -n "$daemon_pid" ] && wait "$daemon_pid" 2>/dev/null
  [ -f "$WORK/daemon.log" ] && cp "$WORK/daemon.log" "$OUT/daemon.log"
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' TERM INT

# In an X server and a D-Bus session of their own, with a private HOME,
# config and cache: the run leaves no remembered connection or window state
# behind (virt-manager's first-run test option keeps its settings in memory
# too). The D-Bus session starts inside the X server's environment, so
# the accessibility bus it starts knows the display (dogtail's clicks go
# through it).
run_ui() {
  HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config XDG_CACHE_HOME=$WORK/home/.cache OUT=$OUT \
    timeout -k 5 150 xvfb-run -a -s "-screen 0 1280x1024x24" -e "$OUT/xvfb.log" \
      dbus-run-session -- /usr/bin/python3 "$@" \
      2> >(grep -v "^dbus-daemon\|SpiRegistry daemon is running" >&2)
}

run_manage() {
  "$DAEMON" --socket-dir "$WORK" --state-dir "$WORK/state" >"$WORK/daemon.log" 2>&1 &
  daemon_pid=$!
  deadline=$(( $(date +%s) + 20 ))
  until [ -S "$SOCK" ] && virsh_ version >/dev/null 2>&1; do
    kill -0 "$daemon_pid" 2>/dev/null || { echo "virt-manager: virtvsnapd exited:" >&2; cat "$WORK/daemon.log" >&2; exit 1; }
    [ "$(date +%s)" -lt "$deadline" ] || { echo "virt-manager: virtvsnapd never listened" >&2; exit 1; }
    sleep 0.05
  done
  echo "virt-manager: virtvsnapd (pid $daemon_pid) listening on $SOCK"

  # The test guest with a pty serial console that prints a heartbeat, a vsock
  # device (its command port answers FILL / SUM), and an idle loop that spins
  # so that the CPU graph has a curve to draw.
  cat >"$WORK/$NAME.xml" <<XML
<domain type='kvm'>
  <name>$NAME</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os>
    <type>hvm</type>
    <kernel>$GUEST</kernel>
    <cmdline>vsnap.fill_mib=1 vsnap.seed=1 vsnap.idle_spin=1 vsnap.heartbeat_ms=300</cmdline>
  </os>
  <devices>
    <serial type='pty'><target port='0'/></serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <vsock model='virtio'><cid auto='yes'/></vsock>
  </devices>
</domain>
XML
  virsh_ define "$WORK/$NAME.xml" >/dev/null
  virsh_ start "$NAME" >/dev/null
  virsh_ snapshot-create-as "$NAME" "$PRE_SNAPSHOT" "made by virsh" >/dev/null
  state=$(virsh_ domstate "$NAME")
  [ "$state" = running ] || { echo "virt-manager: $NAME is '$state' after start, not running" >&2; exit 1; }
  echo "virt-manager: domain $NAME running (test guest), snapshot $PRE_SNAPSHOT made by virsh"

  t_vmm=$(date +%s%3N)
  ui_rc=0
  URI=$URI NAME=$NAME STATE=$WORK/state PRE_SNAPSHOT=$PRE_SNAPSHOT \
    run_ui "$ROOT/tests/desktop/virt_manager_ui.py" || ui_rc=$?
  vmm_ms=$(ms_since "$t_vmm")
  [ "$(virsh_ domstate "$NAME" 2>&1)" = running ] && echo "  ok    the domain still runs after virt-manager quit" ||
    { echo "  FAIL  the domain does not run after virt-manager quit"; ui_rc=1; }
}

# The wizard's script starts its own daemon and the host's drivers; it
# finds the programs as tests/plugin's helpers do.
run_new_vm() {
  t_vmm=$(date +%s%3N)
  ui_rc=0
  VIRTVSNAPD=$DAEMON VSNAP_SHIM=$BUILD_DIR/shim/vsnap-shim VSNAP_SCHEMA_DIR=$ROOT/xml \
  VSNAP_TESTGUEST=$GUEST VSNAP_PATTERN=$BUILD_DIR/tests/lib/vsnap-pattern \
    run_ui "$ROOT/tests/desktop/virt_manager_new_vm.py" || ui_rc=$?
  vmm_ms=$(ms_since "$t_vmm")
  if [ "$ui_rc" = $SKIP ]; then exit $SKIP; fi
}

case $MODE in manage) run_manage ;; new-vm) run_new_vm ;; esac

# ---------------------------------------------------------------------------
# RPC report: which procedures virt-manager called, which ones failed.
# libvirt's client logs each call it queues (RPC_CLIENT_MSG_TX_QUEUE) and,
# in the same thread, the error of a failed reply; pair them per thread.
# Names come from the daemon's table of every procedure of libvirt's
# protocol (plugin/rpc/api-names.c, whose comments hold the protocol's names).
# ---------------------------------------------------------------------------
names=$WORK/proc-names
sed -nE 's|^ *\[([0-9]+)\] = "[^"]*", /\* ([A-Z0-9_]+) \*/$|\1 \2|p' plugin/rpc/api-names.c >"$names"
clog=$OUT/libvirt-client.log
touch "$clog"
awk -v prog="prog=$REMOTE_PROGRAM " -v names="$names" '
  BEGIN { while ((getline line < names) > 0) { split(line, f, " "); if (!(f[1] in name)) name[f[1]] = f[2] } }
  function label(p) { return p " " ((p in name) ? name[p] : "?") }
  /RPC_CLIENT_MSG_TX_QUEUE/ && index($0, prog) {
    match($0, /proc=[0-9]+/); p = substr($0, RSTART + 5, RLENGTH - 5)
    last[$3] = p; calls[p]++; next
  }
  /virNetClientProgramDispatchError/ {
    msg = $0; sub(/.*virNetClientProgramDispatchError:[0-9]+ : /, "", msg)
    err[last[$3] "\t" msg]++; nerr++
  }
  END {
    for (p in calls) printf "%6d  %s\n", calls[p], label(p) > "/dev/stderr"
    for (k in err) { split(k, f, "\t"); printf "%6d  %-45s %s\n", err[k], label(f[1]), f[2] }
  }' "$clog" >"$OUT/rpc-errors.txt" 2>"$OUT/rpc-calls.txt"
sort -k2,2n -o "$OUT/rpc-calls.txt" "$OUT/rpc-calls.txt"
sort -k2,2n -o "$OUT/rpc-errors.txt" "$OUT/rpc-errors.txt"
failed_replies=$(grep -c "RPC_CLIENT_MSG_RX: .*$REMOTE_PROGRAM.* type=1 status=1 " "$clog" || true)
echo "virt-manager: it made $(awk '{n += $1} END {print n + 0}' "$OUT/rpc-calls.txt") calls to" \
  "$(wc -l <"$OUT/rpc-calls.txt") procedures ($OUT/rpc-calls.txt);" \
  "$failed_replies error replies, by procedure (count, number, name, message):"
sed 's/^/  /' "$OUT/rpc-errors.txt"

echo "virt-manager: screenshots and logs in $OUT/"
echo "virt-manager: timing: setup $((t_ready - t_start)) ms, virt-manager run ${vmm_ms} ms," \
  "total $(ms_since "$t_start") ms"
if [ "$ui_rc" -ne 0 ]; then
  echo "virt-manager: FAILED"
  exit 1
fi
echo "virt-manager: PASSED"
