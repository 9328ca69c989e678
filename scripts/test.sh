#!/bin/bash
# The test command: installs, builds and runs the whole suite (meson test) in
# build/, then the fast suites again in build-sanitize/ (AddressSanitizer +
# UBSan; store-san: the store test on nginx and file:// only, no Ceph), then
# every fuzz target for FUZZ_SECONDS (20) seconds in build-fuzz/
# (scripts/fuzz.sh; VSNAP_NO_FUZZ=1 skips it), and prints the plain summary
# line "N passed, N failed" counted from meson's own logs of all three runs.
set -uo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
BUILD=${BUILD:-build}
SAN=${SAN_BUILD:-build-sanitize}

meson test -C "$BUILD" --print-errorlogs --num-processes 2 "$@"
rc=$?

san_rc=0
if [ $# -eq 0 ] && [ "${VSNAP_NO_SANITIZE:-0}" != 1 ]; then
  echo "== sanitizer build (address, undefined) =="
  if [ ! -f "$SAN/build.ninja" ]; then
    meson setup "$SAN" -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
  fi
  if ninja -C "$SAN" >/dev/null; then
    VSNAP_SANITIZED=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    meson test -C "$SAN" --print-errorlogs --num-processes 2 \
      --suite unit --suite lib --suite snapshot --suite conf --suite api --suite vsock --suite persist \
      --suite store-san
    san_rc=$?
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
echo "${passed} passed, ${failed} failed"
[ "$rc" -eq 0 ] && [ "$san_rc" -eq 0 ] && [ "$fuzz_rc" -eq 0 ] && [ "$failed" -eq 0 ]
