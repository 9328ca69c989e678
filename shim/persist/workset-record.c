/* The recorded working set, the VM's side: workset-record.h. */
#include "workset-record.h"

#include "json/vjson.h"

static const char *record_name(enum persist_record r)
{
    switch (r) {
    case PERSIST_RECORD_RECORDED:
        return "recorded";
    case PERSIST_RECORD_USED:
        return "used";
    case PERSIST_RECORD_REFRESHED:
        return "refreshed";
    case PERSIST_RECORD_NONE:
        break;
    }
    return "none";
}

void persist_workset_prepare(struct persist_workset *w, const char *dir, const snap_id *layer_id,
                             struct snap_uffd_config *cfg)
{
    w->dir = g_strdup(dir);
    w->layer_id = *layer_id;
    g_autofree char *why = NULL;
    switch (snap_workset_read(dir, layer_id, cfg->size / SNAP_PAGE_SIZE, &w->loaded, &why)) {
    case SNAP_WORKSET_OK:
        w->using_record = w->loaded->runs->len > 0;
        cfg->workset = w->loaded;
        break;
    case SNAP_WORKSET_STALE:
    case SNAP_WORKSET_CORRUPT:
        g_message("snapshot %s: its working-set record is ignored (%s); this restore records it anew", dir, why);
        break;
    case SNAP_WORKSET_NONE:
        break;
    }
    cfg->record = true;
}

struct grace_end {
    struct persist_workset *w;
    struct snap_uffd *u;
};

/* No READY in time: a guest without the agent. The record ends unkept, so
 * that readahead starts. */
static gboolean no_ready(gpointer data)
{
    struct grace_end *g = data;
    g->w->grace_source = 0;
    snap_workset_free(snap_uffd_end_record(g->u, &g->w->layer_id));
    g_message("snapshot %s: no READY within %u ms of an on-demand restore: no working set recorded", g->w->dir,
              PERSIST_WORKSET_READY_WITHIN_MS);
    return G_SOURCE_REMOVE;
}

static void arm(struct persist_workset *w, struct snap_uffd *u, guint ms, GSourceFunc fn)
{
    if (w->grace_source)
        g_source_remove(w->grace_source);
    struct grace_end *g = g_new(struct grace_end, 1);
    *g = (struct grace_end){ w, u };
    w->grace_source = g_timeout_add_full(G_PRIORITY_DEFAULT, ms, fn, g, g_free);
}

void persist_workset_hand_over(struct persist_workset *w, void (*on_held)(void *opaque), void *opaque)
{
    w->hand_over = true;
    w->on_held = on_held;
    w->held_opaque = opaque;
}

const char *persist_workset_held(const struct persist_workset *w)
{
    return w->held;
}

void persist_workset_started(struct persist_workset *w, struct snap_uffd *u)
{
    g_clear_pointer(&w->loaded, snap_workset_free);
    w->started_us = g_get_monotonic_time();
    if (w->using_record)
        w->record = PERSIST_RECORD_USED;
    arm(w, u, PERSIST_WORKSET_READY_WITHIN_MS, no_ready);
}

/* Keep the first touches, unless the record served is still good. */
static void keep_record(struct persist_workset *w, struct snap_uffd *u)
{
    g_autoptr(snap_workset) touched = snap_uffd_end_record(u, &w->layer_id);
    struct snap_uffd_stats st;
    snap_uffd_get_stats(u, &st);
    if (!touched || touched->pages == 0)
        return;
    if (w->using_record && st.prefetch_misses <= st.workset_blocks)
        return;
    g_autoptr(GError) error = NULL;
    if (w->hand_over) {
        g_free(w->held);
        w->held = snap_workset_format(touched);
        w->record = w->using_record ? PERSIST_RECORD_REFRESHED : PERSIST_RECORD_RECORDED;
        if (w->on_held)
            w->on_held(w->held_opaque);
        return;
    }
    if (!snap_workset_write(w->dir, touched, &error)) {
        g_message("snapshot %s: its working-set record was not kept: %s", w->dir, error->message);
        g_free(w->error);
        w->error = g_strdup(error->message);
        return;
    }
    w->record = w->using_record ? PERSIST_RECORD_REFRESHED : PERSIST_RECORD_RECORDED;
}

static gboolean grace_ended(gpointer data)
{
    struct grace_end *g = data;
    g->w->grace_source = 0;
    keep_record(g->w, g->u);
    return G_SOURCE_REMOVE;
}

void persist_workset_ready(struct persist_workset *w, struct snap_uffd *u)
{
    if (!w->dir || !u || w->ready_us)
        return; /* the first READY after the restore ends the recording */
    if (!w->grace_source)
        return; /* the wait for READY is over: nothing is recorded any more */
    w->ready_us = g_get_monotonic_time();
    arm(w, u, PERSIST_WORKSET_GRACE_MS, grace_ended);
}

void persist_workset_add_info(const struct persist_workset *w, const struct snap_uffd_stats *st, JsonBuilder *b)
{
    vjson_uint(b, "prefetch_hits", st->prefetch_hits);
    vjson_uint(b, "prefetch_misses", st->prefetch_misses);
    vjson_uint(b, "workset_blocks", st->workset_blocks);
    if (w->ready_us)
        vjson_uint(b, "workset_ms", (uint64_t)(w->ready_us - w->started_us) / 1000);
    else
        vjson_null(b, "workset_ms");
    vjson_str(b, "record", record_name(w->record));
    if (w->error)
        vjson_str(b, "record_error", w->error);
}

void persist_workset_clear(struct persist_workset *w)
{
    if (w->grace_source)
        g_source_remove(w->grace_source);
    g_clear_pointer(&w->loaded, snap_workset_free);
    g_clear_pointer(&w->dir, g_free);
    g_clear_pointer(&w->error, g_free);
    g_clear_pointer(&w->held, g_free);
    *w = (struct persist_workset){ 0 };
}
