/* Test-only crash points, compiled in only with meson's -Dtest_hooks=true
 * (the test suite's build trees); otherwise test_hook() is an empty inline.
 * With VSNAPD_TEST_HOOK unset test_hook() does nothing. Set, it lists named steps and what to do
 * on reaching them:
 *
 *   VSNAPD_TEST_HOOK=snapshot-paused:kill,start-spawned:stop
 *
 * kill: the daemon sends itself SIGKILL (kill -9 at exactly that point);
 * stop: it sends itself SIGSTOP, so the test can act at that point (kill the
 * shim, kill -9 the daemon) and then SIGCONT it; slow: the thread that
 * reached it sleeps 50 ms (a step reached often, as push-progress is once a
 * frame, then takes long enough to be watched). The steps are where the
 * daemon's state on disk or in a shim is half-way through a change; see
 * plugin/README.md for the list. */
#pragma once

#if VSNAP_TEST_HOOKS
/* Reached the named step. */
void test_hook(const char *step);
#else
static inline void test_hook(const char *step)
{
    (void)step;
}
#endif
