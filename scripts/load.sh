#!/bin/bash
# The long load runs: ./scripts/load.sh [SECONDS]
#
# 20 VMs restored at once from one snapshot chain, each checked and then
# snapshotted (persist-load-20), and 10 libvirt clients driving lifecycle and
# snapshot calls for SECONDS (default 120; the test suite runs 20) with the
# daemon's fds, threads and RSS compared before and after (plugin-load).
# Needs the build of scripts/test.sh (or `meson setup build`).
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
case "$seconds" in ''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
if [ ! -f build/build.ninja ]; then
  meson setup build >/dev/null || exit 1
fi
ninja -C build >/dev/null || { echo "load: the build failed" >&2; exit 1; }
multiplier=$(( seconds / 200 + 2 ))
VSNAP_LOAD_SECONDS=$seconds meson test -C build persist-load-20 plugin-load --verbose \
  --timeout-multiplier "$multiplier" 2>&1 |
  grep -E 'clones restored|clients x|^(FAIL|ERROR)|Error|^ *[0-9]+/[0-9]+ '
exit "${PIPESTATUS[0]}"
