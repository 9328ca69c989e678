#!/bin/bash
# The demo: set up everything, then drive one microVM through the shim's
# Cloud Hypervisor API and print how long each step took.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD=${BUILD:-build}
SHIM=$BUILD/shim/vsnap-shim
GUEST=$BUILD/guest/testguest/vsnap-testguest

work=$(mktemp -d /tmp/vsnap-demo.XXXXXX)
shim_pid=
cleanup() {
  [ -n "$shim_pid" ] && kill "$shim_pid" 2>/dev/null && wait "$shim_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

now_ms() { date +%s%3N; }
api() { # method endpoint [json]
  local args=(-sS --fail-with-body --unix-socket "$work/api.sock" -X "$1")
  [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' -d "$3")
  curl "${args[@]}" "http://localhost/api/v1/$2"
}
step() { printf '%-44s %6s ms\n' "$1" "$2"; }
wait_for_line() { # file pattern timeout_s
  local deadline=$(( $(date +%s) + $3 ))
  until grep -q "$2" "$1" 2>/dev/null; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "demo: timed out waiting for '$2'" >&2; exit 1; }
    sleep 0.005
  done
}

echo "== vsnap demo: one microVM through the Cloud Hypervisor API =="
t0=$(now_ms)
"$SHIM" --api-socket path="$work/api.sock" --event-monitor path="$work/events.jsonl" &
shim_pid=$!
until [ -S "$work/api.sock" ] && api GET vmm.ping >/dev/null 2>&1; do sleep 0.002; done
step "shim started, API answering" $(( $(now_ms) - t0 ))

t0=$(now_ms)
api PUT vm.create "{\"payload\":{\"kernel\":\"$PWD/$GUEST\",\"cmdline\":\"vsnap.fill_mib=64 vsnap.seed=7\"},
  \"cpus\":{\"boot_vcpus\":2,\"max_vcpus\":2},\"memory\":{\"size\":$((1024<<20))},
  \"serial\":{\"mode\":\"File\",\"file\":\"$work/serial.log\"},\"console\":{\"mode\":\"Off\"}}"
step "vm.create (1 GiB, 2 vCPUs)" $(( $(now_ms) - t0 ))

t0=$(now_ms)
api PUT vm.boot
wait_for_line "$work/serial.log" "vsnap-testguest: booted" 30
step "vm.boot -> guest 'booted'" $(( $(now_ms) - t0 ))
wait_for_line "$work/serial.log" "vsnap-testguest: ready" 60
step "vm.boot -> guest filled 64 MiB, 'ready'" $(( $(now_ms) - t0 ))
grep "vsnap-testguest: ready" "$work/serial.log"

t0=$(now_ms); api PUT vm.pause; step "vm.pause" $(( $(now_ms) - t0 ))
t0=$(now_ms); api PUT vm.resume; step "vm.resume" $(( $(now_ms) - t0 ))
api GET vm.info | /usr/bin/python3 -c 'import json,sys; i=json.load(sys.stdin); print("vm.info: state=%s, RAM %d MiB, resident %d MiB" % (i["state"], i["memory_actual_size"] >> 20, i["vsnap"]["ram_resident_bytes"] >> 20))'

t0=$(now_ms); api PUT vm.power-button
until api GET vm.info 2>/dev/null | grep -q '"Shutdown"'; do sleep 0.005; done
step "vm.power-button -> guest powered off" $(( $(now_ms) - t0 ))
echo "events seen:"; /usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    line = line.strip()
    if line:
        e = json.loads(line); print("   %s/%s" % (e["source"], e["event"]))' "$work/events.jsonl" || true
api PUT vmm.shutdown
wait "$shim_pid" || true; shim_pid=
echo "== demo done =="
