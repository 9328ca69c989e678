/* The shim's environment, an allow-list of the daemon's (shim-env.h). */
#include "shim-env.h"

#include <string.h>

bool shim_env_allows(const char *name)
{
    static const char *const exact[] = { "PATH", "LANG", "TZ", "G_DEBUG", "G_MESSAGES_DEBUG", NULL };
    if (g_strv_contains(exact, name))
        return true;
#if VSNAP_TEST_HOOKS
    /* The test triggers, and the crash walk's preloaded library and its
     * control (tests/lib/crashpoint.c), which must reach the shim too. */
    static const char *const walk[] = { "LD_PRELOAD", "VSNAP_CRASH_CONTROL", "VSNAP_CRASH_UNDER", NULL };
    if ((g_str_has_prefix(name, "VSNAP_SHIM_TEST_") && name[strlen("VSNAP_SHIM_TEST_")]) ||
        g_strv_contains(walk, name))
        return true;
#endif
    /* LC_ALL, LC_CTYPE, ...; ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS, ... */
    return (g_str_has_prefix(name, "LC_") && name[3]) ||
           (g_str_has_suffix(name, "SAN_OPTIONS") && strlen(name) > strlen("SAN_OPTIONS"));
}

char **shim_env_filter(char *const *envp)
{
    GPtrArray *out = g_ptr_array_new();
    for (char *const *e = envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        g_autofree char *name = g_strndup(*e, (gsize)(eq - *e));
        if (shim_env_allows(name))
            g_ptr_array_add(out, g_strdup(*e));
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}
