# Sourced by demo.sh and demo-linux.sh: what both demos do around their story.
# Needs URI, NAME, DAEMON and work set; sets daemon_pid.
virsh_() { virsh -q -c "$URI" "$@"; }
cleanup() {
  set +e
  virsh_ destroy "$NAME" >/dev/null 2>&1
  virsh_ undefine "$NAME" --snapshots-metadata --managed-save >/dev/null 2>&1
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
now_ms() { date +%s%3N; }

# Readiness is pushed: `virsh event` blocks until the agent-lifecycle event
# arrives (no polling). Start it first (listen_ready TIMEOUT_S), then act,
# then wait for it.
listen_ready() { virsh -c "$URI" event "$NAME" --event agent-lifecycle --timeout "$1" > "$work/event" & ev=$!; sleep 0.2; }
await_ready() { wait "$ev"; grep -q "'connected'" "$work/event" || { echo "demo: no readiness event" >&2; cat "$work/event" >&2; exit 1; }; }

# A virtvsnapd of this build unless one already listens; a leftover demo
# domain of an interrupted run goes first.
start_daemon() {
  if ! virsh_ version >/dev/null 2>&1; then
    "$DAEMON" >"$work/daemon.log" 2>&1 &
    daemon_pid=$!
    until virsh_ version >/dev/null 2>&1; do
      kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log"; exit 1; }
      sleep 0.02
    done
    echo "  started virtvsnapd (pid $daemon_pid) on /run/libvirt/virtvsnapd-sock"
  else
    echo "  using the virtvsnapd already listening on /run/libvirt/virtvsnapd-sock"
  fi
  virsh_ destroy "$NAME" >/dev/null 2>&1 || true
  virsh_ undefine "$NAME" --snapshots-metadata --managed-save >/dev/null 2>&1 || true
}
