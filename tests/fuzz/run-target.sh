#!/bin/bash
# Run one fuzz target: run-target.sh EXE SEEDS WORK [libFuzzer flags...]
# for FUZZ_SECONDS seconds (default 20), or until FUZZ_RUNS inputs ran when
# that is set (FUZZ_SECONDS still bounds the time). New inputs go to WORK/corpus (the
# seeds in the repository are only read), crashes to WORK/artifacts/; the
# last line says how many inputs ran. Exits non-zero when the target found
# a crash, a leak, a hang or undefined behaviour.
set -uo pipefail
# Absolute: a target may change its working directory.
exe=$(realpath "$1") seeds=$(realpath "$2") work=$(realpath -m "$3")
shift 3
seconds=${FUZZ_SECONDS:-20}
name=$(basename "$exe")
name=${name#fuzz-}
here=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$work/corpus" "$work/artifacts" "$work/cwd"
# An empty working directory: no relative path an input names exists.
cd "$work/cwd"
args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2560
      -artifact_prefix="$work/artifacts/" "$@")
[ -n "${FUZZ_RUNS:-}" ] && args+=(-runs="$FUZZ_RUNS")
[ -f "$here/dict/$name.dict" ] && args+=(-dict="$here/dict/$name.dict")
log=$work/fuzz.log

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_stack_use_after_return=1}
# A target without leak checks per input goes without the one at exit too.
case " $* " in *" -detect_leaks=0 "*) ASAN_OPTIONS+=:detect_leaks=0 ;; esac
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
start=$SECONDS
"$exe" "${args[@]}" "$work/corpus" "$seeds" >"$log" 2>&1
rc=$?
elapsed=$(( SECONDS - start ))

stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
runs=$(stat number_of_executed_units)
rate=$(stat average_exec_per_sec)
corpus=$(ls "$work/corpus" | wc -l)
printf '%s: %s executions in %ss (%s exec/s), %s new inputs, corpus %s, peak RSS %s MB\n' \
  "$name" "${runs:-?}" "$elapsed" "${rate:-?}" "$(stat new_units_added)" "$corpus" \
  "$(stat peak_rss_mb)"
if [ "$rc" -ne 0 ]; then
  echo "$name: FAILED (exit $rc); the end of $log:"
  tail -n 80 "$log"
  ls -l "$work/artifacts"
fi
exit "$rc"
