#include "util/test-hook.h"

#if VSNAP_TEST_HOOKS

#include <signal.h>
#include <string.h>

#include <glib.h>

static char **hook_entries(void)
{
    static char **entries;
    static gsize once;
    if (g_once_init_enter(&once)) {
        const char *spec = g_getenv("VSNAPD_TEST_HOOK");
        entries = spec && *spec ? g_strsplit(spec, ",", -1) : NULL;
        g_once_init_leave(&once, 1);
    }
    return entries;
}

void test_hook(const char *step)
{
    char **entries = hook_entries();
    for (char **e = entries; e && *e; e++) {
        const char *colon = strchr(*e, ':');
        if (!colon || (size_t)(colon - *e) != strlen(step) || strncmp(*e, step, colon - *e) != 0)
            continue;
        const char *action = colon + 1;
        g_message("test hook: %s at %s", action, step);
        if (g_str_equal(action, "kill"))
            raise(SIGKILL);
        else if (g_str_equal(action, "stop"))
            raise(SIGSTOP);
        else if (g_str_equal(action, "slow"))
            g_usleep(50 * 1000);
    }
}

#endif
