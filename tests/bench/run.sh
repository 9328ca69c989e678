#!/bin/bash
# Build and run every benchmark (meson benchmark() targets, one at a time: they
# measure time), then show the JSON lines they appended to
# <build>/bench/results.jsonl. BUILD=<dir> picks the build directory (default build).
# Exits non-zero, naming each benchmark that failed, when any of them fails.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${BUILD:-build}
BUILD="$BUILD" ./scripts/setup.sh   # packages, configure, build
RESULTS=$BUILD/bench/results.jsonl
mkdir -p "$BUILD/bench"
before=0
if [ -f "$RESULTS" ]; then
  before=$(wc -l < "$RESULTS")
fi

# Its own log name: a benchmark run does not overwrite the test suite's log.
rc=0
meson test -C "$BUILD" --benchmark --num-processes 1 --verbose --print-errorlogs \
  --logbase benchlog "$@" || rc=$?

echo "--- new lines in $RESULTS:"
if [ -f "$RESULTS" ]; then
  tail -n +"$((before + 1))" "$RESULTS"
fi
if [ "$rc" -ne 0 ]; then
  failed=$(/usr/bin/python3 - "$BUILD/meson-logs/benchlog.json" <<'PY' || true
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("result") not in ("OK", "EXPECTEDFAIL", "SKIP"):
        print(r["name"])
PY
)
  echo "bench: FAILED (meson exit $rc): ${failed:-see the output above}" | tr '\n' ' ' >&2
  echo >&2
  exit "$rc"
fi
echo "bench: all benchmarks passed"
