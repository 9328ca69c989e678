/* Progress of a push or pull on a terminal (progress.h). */
#include "store/progress.h"

#include <stdio.h>
#include <unistd.h>

void progress_begin(struct progress *p, const char *verb, guint64 total, bool wanted)
{
    p->verb = verb;
    p->total = total;
    p->done = 0;
    p->start_us = p->last_us = g_get_monotonic_time();
    p->on = wanted && isatty(STDERR_FILENO);
    p->cb = NULL;
    p->cb_data = NULL;
    g_mutex_init(&p->lock);
}

void progress_watch(struct progress *p, void (*cb)(void *, guint64, guint64), void *data)
{
    p->cb = cb;
    p->cb_data = data;
    if (cb)
        cb(data, 0, p->total);
}

static void progress_print(struct progress *p, gint64 now, const char *end)
{
    double secs = (now - p->start_us) / 1e6;
    double rate = secs > 0 ? p->done / secs : 0;
    double eta = rate > 0 && p->total > p->done ? (p->total - p->done) / rate : 0;
    fprintf(stderr, "\r%s: %.1f / %.1f MiB  %.1f MiB/s  ETA %.0f s   %s", p->verb,
            p->done / 1048576.0, p->total / 1048576.0, rate / 1048576.0, eta, end);
    fflush(stderr);
}

void progress_add(struct progress *p, guint64 bytes)
{
    if (p->cb)
        p->cb(p->cb_data, bytes, 0);
    if (!p->on)
        return;
    g_mutex_lock(&p->lock);
    p->done += bytes;
    gint64 now = g_get_monotonic_time();
    if (now - p->last_us >= 200000) {
        p->last_us = now;
        progress_print(p, now, "");
    }
    g_mutex_unlock(&p->lock);
}

void progress_end(struct progress *p)
{
    if (p->on)
        progress_print(p, g_get_monotonic_time(), "\n");
    g_mutex_clear(&p->lock);
}
