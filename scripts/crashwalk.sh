#!/bin/bash
# The full crash-point walk: ./scripts/crashwalk.sh
#
# Every write, fsync, rename and unlink that the daemon or a shim makes under
# the daemon's state directory during snapshot-create (full and diff),
# snapshot-delete (inner fold), save, managedsave, restore and revert is a
# crash point; the walk kills (kill -9) whichever process reaches each point
# in turn, restarts the daemon and checks that the domain is as before or as
# after (tests/plugin/test_crashwalk.py). The test suite walks five points an
# operation; this walks all of them (about 240, 5 minutes on an idle 2-core
# machine). Needs the build of scripts/test.sh (or `meson setup build`).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build >/dev/null || exit 1
fi
ninja -C build >/dev/null || { echo "crashwalk: the build failed" >&2; exit 1; }
VSNAP_CRASHWALK_FULL=1 meson test -C build plugin-crashwalk --verbose --timeout-multiplier 4 2>&1 |
  grep -E 'crash points|crash-point walk|^(FAIL|ERROR)|Error|^ *[0-9]+/[0-9]+ '
exit "${PIPESTATUS[0]}"
