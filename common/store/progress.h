/* Bytes, rate and ETA of a transfer on stderr (a terminal only), at most five
 * times a second. Library-internal. */
#pragma once

#include <glib.h>
#include <stdbool.h>

struct progress {
    const char *verb;      /* "push", "pull" */
    guint64 total;
    guint64 done;          /* atomic adds */
    gint64 start_us, last_us;
    bool on;
    GMutex lock;
    void (*cb)(void *data, guint64 done, guint64 total);   /* store_options.on_progress */
    void *cb_data;
};

void progress_begin(struct progress *p, const char *verb, guint64 total, bool wanted);
/* Also report to a caller's callback (store_options.on_progress), this
 * transfer's total first. */
void progress_watch(struct progress *p, void (*cb)(void *, guint64, guint64), void *data);
void progress_add(struct progress *p, guint64 bytes);
void progress_end(struct progress *p);
