/* Counted errors, logged only at first: see device-log.h. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "devices/device-log.h"

#include <stdarg.h>

void device_log_limited(GLogLevelFlags level, uint64_t n, const char *kind, const char *fmt, ...)
{
    if (n == 0 || n > DEVICE_LOG_LIMIT)
        return;
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (n == DEVICE_LOG_LIMIT)
        g_log(G_LOG_DOMAIN, level, "%s (further %s are only counted)", text, kind);
    else
        g_log(G_LOG_DOMAIN, level, "%s", text);
}
