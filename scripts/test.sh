#!/bin/bash
# The test command: installs, builds and runs the whole suite (meson test) in
# build-test/ (with the test triggers, -Dtest_hooks=true), then the fast
# suites again in build-sanitize/ (AddressSanitizer + UBSan; store-san: the store test on nginx and file:// only, no Ceph), then
# every fuzz target for FUZZ_SECONDS (20) seconds in build-fuzz/
# (scripts/fuzz.sh; VSNAP_NO_FUZZ=1 skips it), and prints the plain summary
# line "N passed, N failed" counted from meson's own logs of all three runs,
# plus one failure per process a stage's tests left running.
set -uo pipefail
cd "$(dirname "$0")/.."

# The suite's own build trees have the test triggers compiled in
# (-Dtest_hooks=true); build/, the README's set-up, has none.
BUILD=${BUILD:-build-test}
BUILD=$BUILD VSNAP_TEST_HOOKS=1 ./scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
SAN=${SAN_BUILD:-build-sanitize}

# Processes a stage's tests left running: their program or working directory
# is in the build tree $1 (shims, daemons, servers the tests started). Seen
# twice 2 s apart (so not one that is just ending), each is named, killed
# and counts as a failure: a test must release every process it starts.
leaks=0
pids_in() {   # " pid pid ... " of the processes whose program or directory is in $1
  local pid
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    case "$(readlink "/proc/$pid/exe" 2>/dev/null)/ $(readlink "/proc/$pid/cwd" 2>/dev/null)/" in
      *"$1/"*) printf ' %s ' "$pid" ;;
    esac
  done
}
leftovers() {
  local dir seen pid
  dir=$(realpath "$1")
  seen=$(pids_in "$dir")
  sleep 2
  for pid in $(pids_in "$dir"); do
    case "$seen" in *" $pid "*) ;; *) continue ;; esac
    echo "LEFT RUNNING after the tests in $1: pid $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"
    kill -9 "$pid" 2>/dev/null
    leaks=$((leaks + 1))
  done
}

meson test -C "$BUILD" --print-errorlogs --num-processes 2 "$@"
rc=$?
leftovers "$BUILD"

san_rc=0
if [ $# -eq 0 ] && [ "${VSNAP_NO_SANITIZE:-0}" != 1 ]; then
  echo "== sanitizer build (address, undefined) =="
  if [ ! -f "$SAN/build.ninja" ]; then
    meson setup "$SAN" -Db_sanitize=address,undefined -Db_lundef=false -Dtest_hooks=true >/dev/null
  fi
  if ninja -C "$SAN" >/dev/null; then
    VSNAP_SANITIZED=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    meson test -C "$SAN" --print-errorlogs --num-processes 2 \
      --suite unit --suite lib --suite snapshot --suite conf --suite api --suite vsock --suite persist \
      --suite store-san
    san_rc=$?
    leftovers "$SAN"
  else
    echo "sanitizer build failed"; san_rc=1
  fi
else
  rm -f "$SAN/meson-logs/testlog.json"
fi

# Each fuzz target for a bounded time (12 targets x 20 s: about 4 minutes).
FUZZ=${FUZZ_BUILD:-build-fuzz}
fuzz_rc=0
if [ $# -eq 0 ] && [ "${VSNAP_NO_FUZZ:-0}" != 1 ]; then
  echo "== fuzz targets (libFuzzer, ${FUZZ_SECONDS:-20} s each) =="
  rm -f "$FUZZ/meson-logs/testlog.json"
  FUZZ_BUILD=$FUZZ ./scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
  fuzz_rc=$?
else
  rm -f "$FUZZ/meson-logs/testlog.json"
fi

# Counts from meson's own logs (one JSON object per test).
read -r passed failed < <(/usr/bin/python3 - "$BUILD/meson-logs/testlog.json" "$san_rc" \
    "$SAN/meson-logs/testlog.json" "$fuzz_rc" "$FUZZ/meson-logs/testlog.json" <<'PY'
import json, os, sys
p = f = 0
logs = [(sys.argv[1], True), (sys.argv[3], sys.argv[2] != "0"), (sys.argv[5], sys.argv[4] != "0")]
for path, required in logs:
    if not os.path.exists(path):
        if required:
            f += 1   # no log where one was expected: count as a failure
        continue
    for line in open(path):
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            p += 1
        elif r != "SKIP":
            f += 1
print(p, f)
PY
)
failed=$((failed + leaks))
echo "${passed} passed, ${failed} failed"
[ "$rc" -eq 0 ] && [ "$san_rc" -eq 0 ] && [ "$fuzz_rc" -eq 0 ] && [ "$failed" -eq 0 ]
