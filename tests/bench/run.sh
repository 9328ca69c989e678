#!/bin/bash
# Build and run every benchmark (meson benchmark() targets, one at a time: they
# measure time), then show the JSON lines they appended to
# <build>/bench/results.jsonl. BUILD=<dir> picks the build directory (default build).
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${BUILD:-build}
BUILD="$BUILD" ./scripts/setup.sh   # packages, configure, build
mkdir -p "$BUILD/bench"
before=$(wc -l < "$BUILD/bench/results.jsonl" 2>/dev/null || echo 0)

meson test -C "$BUILD" --benchmark --num-processes 1 --verbose --print-errorlogs "$@"

echo "--- new lines in $BUILD/bench/results.jsonl:"
tail -n +"$((before + 1))" "$BUILD/bench/results.jsonl"
