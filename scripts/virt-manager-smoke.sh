#!/bin/bash
# Headless virt-manager smoke test: can the unmodified virt-manager of the
# distribution connect to virtvsnapd and list a running vsnap domain?
#
# Installs virt-manager, Xvfb and ImageMagick if missing, builds the tree,
# starts a private virtvsnapd (its own socket and state directory; the
# system's /run/libvirt is never touched), defines and starts a domain that
# runs the test guest, then runs virt-manager under xvfb-run against it.
# Passes (exit 0) only if virt-manager's debug log shows the connection
# active and the domain added, no error dialog was raised, and the
# screenshot of the virtual screen is not blank. Also lists every RPC
# procedure virt-manager called that the daemon answered with an error
# (from libvirt's own client-side RPC log), for the plugin's developers.
#
# Everything started here is stopped and its temporary files removed; the
# evidence (screenshot, logs, RPC lists) stays in $OUT.
#
#   sudo ./scripts/virt-manager-smoke.sh
#   env: BUILD (build dir, default build), OUT (default $BUILD/virt-manager-smoke),
#        WAIT_S (how long virt-manager may take to list the domain, default 60),
#        SETTLE_S (time the window keeps running after that, default 5),
#        SHOW=details (open the domain's details window instead of
#        the manager window; exercises the domain XML and capabilities calls)
set -euo pipefail
cd "$(dirname "$0")/.."

REMOTE_PROGRAM=536903814   # 0x20008086, libvirt's REMOTE_PROGRAM

# ---------------------------------------------------------------------------
# Inside the virtual X server (xvfb-run calls this script again).
# ---------------------------------------------------------------------------
in_xvfb() {
  local vmm_log=$OUT/virt-manager.log shot=$OUT/screenshot.png
  local window=(--show-domain-editor "$NAME") shown="Showing VM details"
  [ "$SHOW" = details ] || { window=(); shown="Showing manager"; }
  # Private HOME, config and cache; GSettings in memory: the run leaves no
  # remembered connection or window state behind.
  : >"$vmm_log"
  HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config XDG_CACHE_HOME=$WORK/home/.cache \
  GSETTINGS_BACKEND=memory NO_AT_BRIDGE=1 \
  LIBVIRT_LOG_OUTPUTS="1:file:$OUT/libvirt-client.log" LIBVIRT_LOG_FILTERS="1:rpc.netclient 4:*" \
    virt-manager --debug --no-fork --connect "$URI" "${window[@]}" >"$vmm_log" 2>&1 &
  local vmm=$!
  local listed="domain=$NAME status=Running added"
  local deadline=$(( $(date +%s) + WAIT_S ))
  # virt-manager only reports progress in its log; read it until the domain
  # is listed in an active connection and the manager window is shown.
  while :; do
    if grep -q "changed to state=Active" "$vmm_log" && grep -qF "$listed" "$vmm_log" &&
       grep -q "$shown" "$vmm_log"; then
      break
    fi
    if ! kill -0 "$vmm" 2>/dev/null; then
      echo "smoke: virt-manager exited before listing $NAME" >&2
      break
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "smoke: virt-manager did not list $NAME within ${WAIT_S}s" >&2
      break
    fi
    sleep 0.2
  done
  # Let the window paint and a few stats-poll ticks run, so periodic calls
  # (and their errors) show up too.
  sleep "$SETTLE_S"
  import -window root "$shot" || echo "smoke: screenshot failed" >&2
  if kill -0 "$vmm" 2>/dev/null; then
    kill -TERM "$vmm"
    local _
    for _ in $(seq 50); do kill -0 "$vmm" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$vmm" 2>/dev/null && { echo "smoke: virt-manager ignored SIGTERM; killing it" >&2; kill -KILL "$vmm"; }
  fi
  wait "$vmm" 2>/dev/null || true
  return 0
}

if [ "${1:-}" = "--in-xvfb" ]; then
  in_xvfb
  exit 0
fi

# ---------------------------------------------------------------------------
# Outside: packages, build, daemon, domain, then the checks.
# ---------------------------------------------------------------------------
t_start=$(date +%s%3N)
ms_since() { echo $(( $(date +%s%3N) - $1 )); }

NEEDED=(virt-manager xvfb xauth imagemagick)
missing=()
for p in "${NEEDED[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "smoke: ${missing[*]} missing; run as root so they can be installed" >&2
    exit 1
  fi
  echo "smoke: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Recommends would pull in libvirt-daemon-system and a QEMU stack; not needed.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

export BUILD=${BUILD:-build}
./scripts/setup.sh
ROOT=$PWD
DAEMON=$ROOT/$BUILD/plugin/virtvsnapd
GUEST=$ROOT/$BUILD/guest/testguest/vsnap-testguest
OUT=${OUT:-$ROOT/$BUILD/virt-manager-smoke}
WAIT_S=${WAIT_S:-60}
SETTLE_S=${SETTLE_S:-5}
SHOW=${SHOW:-manager}
case $SHOW in manager | details) ;; *) echo "smoke: SHOW must be manager or details, not '$SHOW'" >&2; exit 2 ;; esac
NAME='vmm-smoke'
t_ready=$(date +%s%3N)

rm -rf "$OUT"
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/vsnap-vmm-smoke.XXXXXX)
mkdir -p "$WORK/home"
SOCK=$WORK/virtvsnapd-sock
URI="vsnap:///system?socket=$SOCK"
daemon_pid=

virsh_() { virsh -q -c "$URI" "$@"; }
cleanup() {
  set +e
  if [ -n "$daemon_pid" ]; then
    virsh_ destroy "$NAME" >/dev/null 2>&1
    virsh_ undefine "$NAME" >/dev/null 2>&1
    kill -TERM "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  fi
  # The daemon leaves running shims alive by design; stop any that remain
  # (by the pid the daemon recorded) so nothing outlives the test.
  local pidfile pid
  for pidfile in "$WORK"/state/run/*/pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  done
  [ -f "$WORK/daemon.log" ] && cp "$WORK/daemon.log" "$OUT/daemon.log"
  rm -rf "$WORK"
}
trap cleanup EXIT

"$DAEMON" --socket-dir "$WORK" --state-dir "$WORK/state" >"$WORK/daemon.log" 2>&1 &
daemon_pid=$!
until [ -S "$SOCK" ] && virsh_ version >/dev/null 2>&1; do
  kill -0 "$daemon_pid" 2>/dev/null || { echo "smoke: virtvsnapd exited:" >&2; cat "$WORK/daemon.log" >&2; exit 1; }
  sleep 0.02
done
echo "smoke: virtvsnapd (pid $daemon_pid) listening on $SOCK"

cat >"$WORK/$NAME.xml" <<XML
<domain type='kvm'>
  <name>$NAME</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os>
    <type>hvm</type>
    <kernel>$GUEST</kernel>
    <cmdline>vsnap.fill_mib=1 vsnap.seed=1</cmdline>
  </os>
  <devices>
    <vsock model='virtio'><cid auto='yes'/></vsock>
  </devices>
</domain>
XML
virsh_ define "$WORK/$NAME.xml" >/dev/null
virsh_ start "$NAME" >/dev/null
state=$(virsh_ domstate "$NAME")
[ "$state" = running ] || { echo "smoke: $NAME is '$state' after start, not running" >&2; exit 1; }
echo "smoke: domain $NAME defined and running (test guest)"

t_vmm=$(date +%s%3N)
export WORK OUT URI NAME WAIT_S SETTLE_S SHOW
xvfb-run -a -s "-screen 0 1280x800x24" -e "$OUT/xvfb.log" "$ROOT/scripts/virt-manager-smoke.sh" --in-xvfb
vmm_ms=$(ms_since "$t_vmm")

# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------
log=$OUT/virt-manager.log
failures=0
check() {  # check "description" command...
  local what=$1; shift
  if "$@"; then echo "  ok    $what"; else echo "  FAIL  $what"; failures=$((failures + 1)); fi
}
no_match() { ! grep -q "$@"; }
shot_has_content() {
  # A blank Xvfb screen has one colour; a drawn window has many.
  local colours
  colours=$(convert "$OUT/screenshot.png" -format '%k' info: 2>/dev/null) || return 1
  [ "${colours:-0}" -gt 16 ]
}

echo "smoke: checks (virt-manager log: $log)"
check "virt-manager opened $URI (state=Active)" grep -q "changed to state=Active" "$log"
check "virt-manager listed the domain ('domain=$NAME status=Running added')" \
  grep -qF "domain=$NAME status=Running added" "$log"
if [ "$SHOW" = details ]; then
  check "the domain's details window was shown" grep -q "Showing VM details" "$log"
else
  check "the manager window was shown" grep -q "Showing manager" "$log"
fi
check "no error dialog ('error dialog message' absent)" no_match "error dialog message" "$log"
check "the connection never dropped (no state=Disconnected)" no_match "changed to state=Disconnected" "$log"
check "screenshot $OUT/screenshot.png is not blank" shot_has_content
check "the domain still runs after virt-manager quit" test "$(virsh_ domstate "$NAME" 2>&1)" = running

# ---------------------------------------------------------------------------
# RPC report: which procedures virt-manager called, which ones failed.
# libvirt's client logs each call it queues (RPC_CLIENT_MSG_TX_QUEUE) and,
# in the same thread, the error of a failed reply; pair them per thread.
# Names come from the daemon's own procedure table; procedures it does not
# know at all are named from libvirt's remote_protocol.x (the ones
# virt-manager 4.1 is known to try).
# ---------------------------------------------------------------------------
names=$WORK/proc-names
{
  grep -rhoE '\bPROC_[A-Z0-9_]+ = [0-9]+,' plugin/rpc/*.h 2>/dev/null |
    awk '{sub(/,$/, "", $3); sub(/^PROC_/, "", $1); print $3, $1}' || true
  cat <<'NAMES'
52 CONNECT_NUM_OF_NETWORKS
64 DOMAIN_BLOCK_STATS
65 DOMAIN_INTERFACE_STATS
77 STORAGE_POOL_DEFINE_XML
111 NODE_NUM_OF_DEVICES
159 DOMAIN_MEMORY_STATS
283 CONNECT_LIST_ALL_NETWORKS
285 CONNECT_LIST_ALL_NODE_DEVICES
313 CONNECT_NETWORK_EVENT_REGISTER_ANY
368 CONNECT_STORAGE_POOL_EVENT_REGISTER_ANY
374 CONNECT_NODE_DEVICE_EVENT_REGISTER_ANY
NAMES
} >"$names"
clog=$OUT/libvirt-client.log
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
echo "smoke: virt-manager made $(awk '{n += $1} END {print n + 0}' "$OUT/rpc-calls.txt") calls to" \
  "$(wc -l <"$OUT/rpc-calls.txt") procedures ($OUT/rpc-calls.txt);" \
  "$failed_replies error replies, by procedure (count, number, name, message):"
sed 's/^/  /' "$OUT/rpc-errors.txt"

echo "smoke: screenshot $OUT/screenshot.png; logs in $OUT/"
echo "smoke: timing: setup ${t_ready:+$((t_ready - t_start))} ms, virt-manager run ${vmm_ms} ms" \
  "(includes ${SETTLE_S}s settle), total $(ms_since "$t_start") ms"
if [ "$failures" -gt 0 ]; then
  echo "smoke: FAILED ($failures checks)"
  exit 1
fi
echo "smoke: PASSED: virt-manager listed $NAME on $URI"
