#include "persist/push.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <libvirt/libvirt.h>

#include "util/atomic-file.h"
#include "snapshot-tree.h"
#include "util/test-hook.h"
#include "util/virt-error.h"

#define PENDING_FILE ".push-pending"

/* One domain's pushes. */
struct push_domain {
    GQueue waiting;               /* struct push_request * */
    struct push_request *running;
    guint holds;
    bool thread;                  /* a worker runs for this domain */
    gint64 started_us;            /* of the running push */
    gint cancel;                  /* its store_options.cancel (push_cancel) */
    guint64 total, processed;
    bool have_last;
    struct push_info last;
};

struct push_queue {
    const struct driver_store *store;
    GMutex lock;
    GCond changed;
    GHashTable *domains;          /* uuid -> struct push_domain * */
};

struct worker {
    struct push_queue *q;
    char *uuid;
};

void push_request_free(struct push_request *r)
{
    if (!r)
        return;
    g_free(r->domain_uuid);
    g_free(r->domain_name);
    g_free(r->snapshot);
    g_free(r->dir);
    g_free(r->url);
    g_free(r->domain_xml);
    g_free(r->snapshot_xml);
    g_free(r);
}

void push_info_clear(struct push_info *info)
{
    g_clear_pointer(&info->error, g_free);
}

struct push_queue *push_queue_new(const struct driver_store *store)
{
    struct push_queue *q = g_new0(struct push_queue, 1);
    q->store = store;
    g_mutex_init(&q->lock);
    g_cond_init(&q->changed);
    q->domains = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    return q;
}

/* ---- the mark ---- */

bool push_mark_pending(const char *dir, const char *url, GError **error)
{
    g_autofree char *path = g_build_filename(dir, PENDING_FILE, NULL);
    g_autofree char *text = g_strdup_printf("%s\n", url);
    if (!atomic_file_write(path, text, error)) {
        g_prefix_error(error, "cannot record the push of %s: ", dir);
        return false;
    }
    return true;
}

char *push_pending_url(const char *dir)
{
    g_autofree char *path = g_build_filename(dir, PENDING_FILE, NULL);
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    g_strstrip(text);
    if (!*text)
        g_clear_pointer(&text, g_free);
    return text;
}

static void clear_mark(const struct push_request *r)
{
    g_autofree char *path = g_build_filename(r->dir, PENDING_FILE, NULL);
    if (g_unlink(path) < 0 && errno != ENOENT)
        g_warning("domain %s: snapshot '%s' is pushed, but %s stays (it will be pushed again, "
                  "which sends nothing): %s", r->domain_name, r->snapshot, path, g_strerror(errno));
}

/* ---- the workers ---- */

static struct push_domain *domain_locked(struct push_queue *q, const char *uuid)
{
    struct push_domain *d = g_hash_table_lookup(q->domains, uuid);
    if (!d) {
        d = g_new0(struct push_domain, 1);
        g_queue_init(&d->waiting);
        g_hash_table_insert(q->domains, g_strdup(uuid), d);
    }
    return d;
}

static void on_progress(void *data, guint64 done, guint64 total)
{
    struct push_domain *d = ((void **)data)[1];
    struct push_queue *q = ((void **)data)[0];
    g_mutex_lock(&q->lock);
    d->processed += done;
    d->total += total;
    g_mutex_unlock(&q->lock);
    if (done)
        test_hook("push-progress");
}

static bool run_push(struct push_queue *q, struct push_domain *d, const struct push_request *r,
                     GError **error)
{
    void *ctx[2] = {q, d};
    struct store_options o = q->store->options;   /* shared strings, read only */
    o.progress = false;
    o.on_progress = on_progress;
    o.progress_data = ctx;
    o.cancel = &d->cancel;   /* d lives as long as the queue */
    struct store_push_args a = {
        .dir = r->dir, .url = r->url, .domain_xml = r->domain_xml, .snapshot_xml = r->snapshot_xml,
        .skip = snapshot_entry_own_files,
    };
    struct store_push_result res;
    bool ok = store_push(&a, &o, &res, error);
    if (ok)
        g_message("domain %s: snapshot '%s' pushed to %s as %s (%u objects sent, %u the store had)",
                  r->domain_name, r->snapshot, r->url, res.id, res.objects_sent,
                  res.objects_skipped);
    store_push_result_clear(&res);
    return ok;
}

static bool cancelled(const GError *error)
{
    return g_error_matches(error, STORE_ERROR, STORE_ERROR_CANCELLED);
}

static void finish_locked(struct push_domain *d, bool ok, const GError *error)
{
    push_info_clear(&d->last);
    d->have_last = true;
    d->last = (struct push_info){
        .type = ok ? VIR_DOMAIN_JOB_COMPLETED
                : cancelled(error) ? VIR_DOMAIN_JOB_CANCELLED : VIR_DOMAIN_JOB_FAILED,
        .elapsed_ms = (guint64)(g_get_monotonic_time() - d->started_us) / 1000,
        .total = d->total, .processed = d->processed,
        .error = ok ? NULL : g_strdup(error->message), .ended_us = g_get_monotonic_time(),
    };
}

static gpointer worker_main(gpointer data)
{
    struct worker *w = data;
    struct push_queue *q = w->q;
    g_mutex_lock(&q->lock);
    struct push_domain *d = domain_locked(q, w->uuid);
    for (;;) {
        while (d->holds > 0)
            g_cond_wait(&q->changed, &q->lock);
        struct push_request *r = g_queue_pop_head(&d->waiting);
        if (!r)
            break;
        d->running = r;
        g_atomic_int_set(&d->cancel, 0);
        d->started_us = g_get_monotonic_time();
        d->total = d->processed = 0;
        g_mutex_unlock(&q->lock);

        g_autoptr(GError) error = NULL;
        bool ok = run_push(q, d, r, &error);
        if (ok)
            clear_mark(r);
        else if (cancelled(error))
            g_message("domain %s: push of snapshot '%s' to %s canceled by client (it stays "
                      "pending: pushed again at the domain's next snapshot or the daemon's next "
                      "start; the store lists it only then)", r->domain_name, r->snapshot, r->url);
        else
            g_warning("domain %s: push of snapshot '%s' to %s failed (the snapshot is intact; "
                      "the push is tried again at the next snapshot or daemon start): %s",
                      r->domain_name, r->snapshot, r->url, error->message);

        g_mutex_lock(&q->lock);
        finish_locked(d, ok, error);
        d->running = NULL;
        push_request_free(r);
        g_cond_broadcast(&q->changed);
    }
    d->thread = false;
    g_cond_broadcast(&q->changed);
    g_mutex_unlock(&q->lock);
    g_free(w->uuid);
    g_free(w);
    return NULL;
}

static bool queued_locked(struct push_domain *d, const char *dir)
{
    if (d->running && g_str_equal(d->running->dir, dir))
        return true;
    for (GList *l = d->waiting.head; l; l = l->next)
        if (g_str_equal(((struct push_request *)l->data)->dir, dir))
            return true;
    return false;
}

void push_enqueue(struct push_queue *q, struct push_request *r)
{
    g_mutex_lock(&q->lock);
    struct push_domain *d = domain_locked(q, r->domain_uuid);
    if (queued_locked(d, r->dir)) {
        g_mutex_unlock(&q->lock);
        push_request_free(r);
        return;
    }
    g_queue_push_tail(&d->waiting, r);
    if (!d->thread) {
        d->thread = true;
        struct worker *w = g_new0(struct worker, 1);
        w->q = q;
        w->uuid = g_strdup(r->domain_uuid);
        g_thread_unref(g_thread_new("push", worker_main, w));
    }
    g_mutex_unlock(&q->lock);
}

/* ---- deletes ---- */

void push_hold(struct push_queue *q, const char *uuid)
{
    g_mutex_lock(&q->lock);
    struct push_domain *d = domain_locked(q, uuid);
    d->holds++;
    while (d->running)
        g_cond_wait(&q->changed, &q->lock);
    g_mutex_unlock(&q->lock);
}

void push_release(struct push_queue *q, const char *uuid)
{
    g_mutex_lock(&q->lock);
    struct push_domain *d = domain_locked(q, uuid);
    if (d->holds > 0)
        d->holds--;
    g_cond_broadcast(&q->changed);
    g_mutex_unlock(&q->lock);
}

void push_drop(struct push_queue *q, const char *uuid, const char *dir)
{
    g_mutex_lock(&q->lock);
    struct push_domain *d = domain_locked(q, uuid);
    for (GList *l = d->waiting.head; l;) {
        GList *next = l->next;
        struct push_request *r = l->data;
        if (!dir || g_str_equal(r->dir, dir)) {
            g_message("domain %s: the push of snapshot '%s' is dropped with it", r->domain_name,
                      r->snapshot);
            g_queue_delete_link(&d->waiting, l);
            push_request_free(r);
        }
        l = next;
    }
    g_mutex_unlock(&q->lock);
}

/* ---- domjobabort ---- */

bool push_cancel(struct push_queue *q, const char *uuid)
{
    g_mutex_lock(&q->lock);
    struct push_domain *d = g_hash_table_lookup(q->domains, uuid);
    struct push_request *r = d ? d->running : NULL;
    if (r) {
        g_atomic_int_set(&d->cancel, 1);
        /* The job is the domain's pushes: the queued ones stop with it
         * (their marks stay, like the running one's). */
        for (struct push_request *w; (w = g_queue_pop_head(&d->waiting));) {
            g_message("domain %s: the queued push of snapshot '%s' is canceled with the push "
                      "under way (it stays pending)", w->domain_name, w->snapshot);
            push_request_free(w);
        }
        gint64 deadline = g_get_monotonic_time() + PUSH_CANCEL_WAIT_S * G_USEC_PER_SEC;
        while (d->running == r && g_cond_wait_until(&q->changed, &q->lock, deadline))
            ;
    }
    g_mutex_unlock(&q->lock);
    return r != NULL;
}

/* ---- job information ---- */

bool push_current(struct push_queue *q, const char *uuid, struct push_info *out)
{
    g_mutex_lock(&q->lock);
    struct push_domain *d = g_hash_table_lookup(q->domains, uuid);
    bool running = d && d->running;
    if (running)
        *out = (struct push_info){
            .type = VIR_DOMAIN_JOB_BOUNDED,
            .elapsed_ms = (guint64)(g_get_monotonic_time() - d->started_us) / 1000,
            .total = d->total, .processed = MIN(d->processed, d->total),
        };
    g_mutex_unlock(&q->lock);
    return running;
}

bool push_last(struct push_queue *q, const char *uuid, struct push_info *out)
{
    g_mutex_lock(&q->lock);
    struct push_domain *d = g_hash_table_lookup(q->domains, uuid);
    bool have = d && d->have_last;
    if (have) {
        *out = d->last;
        out->error = g_strdup(d->last.error);
    }
    g_mutex_unlock(&q->lock);
    return have;
}
