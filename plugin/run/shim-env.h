/* The environment a launched shim gets: a short allow-list of the daemon's
 * own, nothing else. The daemon may hold credentials in its environment (the
 * AWS_* variables its store transfers read); a shim never needs them and runs
 * the guest's device emulation, so none of that reaches its environ (or its
 * argv: the daemon's transfers and the files it hands over carry them). */
#pragma once

#include <glib.h>
#include <stdbool.h>

/* Whether the variable called name passes: PATH, LANG, LC_*, TZ, G_DEBUG,
 * G_MESSAGES_DEBUG, the sanitizers' *SAN_OPTIONS and, in a build with test
 * hooks (-Dtest_hooks=true), the shim's test-only triggers (VSNAP_SHIM_TEST_*) and
 * the crash walk's LD_PRELOAD, VSNAP_CRASH_CONTROL and VSNAP_CRASH_UNDER. */
bool shim_env_allows(const char *name);

/* The entries of envp ("NAME=value", NULL-terminated) that pass, as a new
 * NULL-terminated array (g_strfreev). */
char **shim_env_filter(char *const *envp);
