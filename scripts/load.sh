#!/bin/bash
# The long load runs: ./scripts/load.sh [SECONDS]
#
# 20 VMs restored at once from one snapshot chain, each checked and then
# snapshotted (persist-load-20), and 10 libvirt clients driving lifecycle and
# snapshot calls for SECONDS (default 120; the test suite runs 20) with the
# daemon's fds, threads and RSS compared before and after (plugin-load).
# Runs in the test suite's build tree (build-test/, with the test triggers).
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
case "$seconds" in ''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
# The test suite's build tree (scripts/test.sh's): the walk needs its triggers.
BUILD=${BUILD:-build-test}
BUILD=$BUILD VSNAP_TEST_HOOKS=1 ./scripts/setup.sh >/dev/null || { echo "load: the build failed" >&2; exit 1; }
multiplier=$(( seconds / 200 + 2 ))
VSNAP_LOAD_SECONDS=$seconds meson test -C "$BUILD" persist-load-20 plugin-load --verbose \
  --timeout-multiplier "$multiplier" 2>&1 |
  grep -E 'clones restored|clients x|^(FAIL|ERROR)|Error|^ *[0-9]+/[0-9]+ '
exit "${PIPESTATUS[0]}"
