#!/bin/bash
# Fuzz every parser: ./scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Builds the libFuzzer targets of tests/fuzz/ into build-fuzz/ (clang,
# AddressSanitizer + UBSan, -Dfuzz=true; the normal build/ is not touched)
# and runs each for SECONDS (default 60; scripts/test.sh runs 20), one after
# the other (with FUZZ_RUNS=N in the environment, each stops after N inputs
# or SECONDS, whichever comes first), from its seeds in tests/fuzz/corpus/<target>/ and what earlier
# runs found (build-fuzz/tests/fuzz/work/<target>/corpus/). Each target
# prints one line: executions, executions per second, corpus. A crash, leak,
# hang or undefined behaviour fails the target; the input that did it is in
# build-fuzz/tests/fuzz/work/<target>/artifacts/ (see tests/fuzz/README.md
# for replaying it and adding it to the seeds as a regression).
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift $(( $# > 0 ? 1 : 0 ))
case "$seconds" in ''|*[!0-9]*) echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2 ;; esac
BUILD=${FUZZ_BUILD:-build-fuzz}

if ! command -v clang >/dev/null; then
  echo "fuzz: clang is missing (scripts/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang meson setup "$BUILD" -Dfuzz=true -Dtests=false -Dman=disabled \
    -Db_sanitize=address,undefined -Db_lundef=false >/dev/null || exit 1
fi
ninja -C "$BUILD" >/dev/null || { echo "fuzz: the build in $BUILD failed" >&2; exit 1; }

names=()
for t in "$@"; do names+=("fuzz-${t#fuzz-}"); done
# meson's timeout is 300 s a target; longer runs scale it.
multiplier=$(( (seconds + 120) / 300 + 1 ))
FUZZ_SECONDS=$seconds meson test -C "$BUILD" --suite fuzz --num-processes 1 --verbose \
  --timeout-multiplier "$multiplier" "${names[@]}" 2>&1 |
  grep -v -E '^(>>> |ninja: |Expected Fail:|Unexpected Pass:|Skipped:|$)|――'
exit "${PIPESTATUS[0]}"
