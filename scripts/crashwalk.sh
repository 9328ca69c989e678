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
# machine). Runs in the test suite's build tree (build-test/, with the test triggers).
set -uo pipefail
cd "$(dirname "$0")/.."
# The test suite's build tree (scripts/test.sh's): the walk needs its triggers.
BUILD=${BUILD:-build-test}
BUILD=$BUILD VSNAP_TEST_HOOKS=1 ./scripts/setup.sh >/dev/null || { echo "crashwalk: the build failed" >&2; exit 1; }
VSNAP_CRASHWALK_FULL=1 meson test -C "$BUILD" plugin-crashwalk --verbose --timeout-multiplier 4 2>&1 |
  grep -E 'crash points|crash-point walk|^(FAIL|ERROR)|Error|^ *[0-9]+/[0-9]+ '
exit "${PIPESTATUS[0]}"
