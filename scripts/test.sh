#!/bin/bash
# The test command: installs, builds and runs the whole suite (meson test),
# then prints the plain summary line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
BUILD=${BUILD:-build}

meson test -C "$BUILD" --print-errorlogs --num-processes 2 "$@"
rc=$?

# Counts from meson's own log (one JSON object per test).
read -r passed failed < <(/usr/bin/python3 - "$BUILD/meson-logs/testlog.json" <<'PY'
import json, sys
p = f = 0
try:
    for line in open(sys.argv[1]):
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            p += 1
        elif r in ("SKIP",):
            pass
        else:
            f += 1
except FileNotFoundError:
    f = 1
print(p, f)
PY
)
echo "${passed} passed, ${failed} failed"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ]
