#!/bin/bash
# Build and run every benchmark (meson benchmark() targets, one at a time: they
# measure time), then show the JSON lines they appended to
# <build>/bench/results.jsonl. BUILD=<dir> picks the build directory (default build).
# Ends with one table of every target (met / missed / cannot / not judged, with
# the numbers and the same-run reference) and exits non-zero naming each
# benchmark that failed and each target missed.
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
# One table of every target the run's summaries carry (tests/bench/targets.py):
# met, missed, cannot (this host cannot meet it, with why) or not judged.
echo "--- targets (load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)):"
trc=0
if [ -f "$RESULTS" ]; then
  /usr/bin/python3 tests/bench/targets.py table "$RESULTS" "$((before + 1))" || trc=$?
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
if [ "$trc" -ne 0 ]; then
  echo "bench: every benchmark ran, but targets were missed (named above)" >&2
  exit "$trc"
fi
echo "bench: all benchmarks passed, no target missed"
