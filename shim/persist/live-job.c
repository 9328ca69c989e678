/* A live snapshot as a job (persist.h): the passes and the layer's write
 * run on a worker thread, so the VM's owner (the main loop, which serves the
 * API) answers meanwhile; the stop and the end run back on the owner, which
 * alone changes the VM. A cancel is a flag the worker looks at between two
 * steps of a pass and between the steps after the stop; the owner waits for
 * nothing but the short hand-over of the stop, and holds no lock while the
 * vCPUs stop. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "live-internal.h"

#include "json/vjson.h"

enum stop_state { STOP_NONE, STOP_ASKED, STOP_RUNNING, STOP_DONE, STOP_ABANDONED };

struct persist_live_job {
    struct live l;
    GMainContext *owner;
    GThread *thread;
    gint cancel;                 /* atomic */
    gint64 started_us;
    gint64 cancelled_us;         /* the owner's: when the cancel came */
    persist_live_done_func done;
    void *done_data;

    GMutex lock;                 /* what follows; never held across a call that waits */
    GCond changed;
    enum stop_state stop;
    uint64_t *rest;              /* the pages left for the stop */
    JsonNode *state;             /* the stop's */
    GError *stop_error;
    struct live_progress shown;  /* vm.info's copy of l.progress */
    GSource *stop_source, *end_source;

    /* The worker's result, read by the owner after the join. */
    bool ok;
    GError *error;
};

bool live_go_on(struct live *l, GError **error)
{
    if (!g_atomic_int_get(&l->job->cancel))
        return true;
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_CANCELLED, "the live snapshot was cancelled");
    return false;
}

void live_report(struct live *l)
{
    g_mutex_lock(&l->job->lock);
    l->job->shown = l->progress;
    g_mutex_unlock(&l->job->lock);
}

static void set_phase(struct persist_live_job *job, enum live_phase phase)
{
    job->l.progress.phase = phase;
    live_report(&job->l);
}

static GSource *attach_to_owner(struct persist_live_job *job, GSourceFunc func)
{
    GSource *source = g_idle_source_new();
    g_source_set_priority(source, G_PRIORITY_HIGH);
    g_source_set_callback(source, func, job, NULL);
    g_source_attach(source, job->owner);
    return source;
}

/* ---- the stop, on the owner ---- */

static gboolean stop_on_owner(gpointer data)
{
    struct persist_live_job *job = data;
    g_mutex_lock(&job->lock);
    bool go = job->stop == STOP_ASKED && !g_atomic_int_get(&job->cancel);
    if (go)
        job->stop = STOP_RUNNING;
    g_mutex_unlock(&job->lock);
    if (!go)
        return G_SOURCE_REMOVE;
    GError *error = NULL;
    JsonNode *state = live_stop_and_take(&job->l, job->rest, &error);
    g_mutex_lock(&job->lock);
    job->state = state;
    job->stop_error = error;
    job->stop = STOP_DONE;
    g_cond_broadcast(&job->changed);
    g_mutex_unlock(&job->lock);
    return G_SOURCE_REMOVE;
}

/* The worker asks for the stop and waits for it; a cancel before the owner
 * began it abandons it. */
static JsonNode *ask_for_stop(struct persist_live_job *job, GError **error)
{
    set_phase(job, LIVE_PHASE_STOP);
    g_mutex_lock(&job->lock);
    job->stop = STOP_ASKED;
    job->stop_source = attach_to_owner(job, stop_on_owner);
    while (job->stop != STOP_DONE && !(job->stop == STOP_ASKED && g_atomic_int_get(&job->cancel)))
        g_cond_wait(&job->changed, &job->lock);
    if (job->stop != STOP_DONE)
        job->stop = STOP_ABANDONED;
    JsonNode *state = g_steal_pointer(&job->state);
    GError *stop_error = g_steal_pointer(&job->stop_error);
    g_mutex_unlock(&job->lock);
    if (!state && stop_error)
        g_propagate_error(error, stop_error);
    else if (!state)
        live_go_on(&job->l, error);
    return state;
}

/* ---- the worker ---- */

static gboolean end_on_owner(gpointer data);

static gpointer run_job(gpointer data)
{
    struct persist_live_job *job = data;
    g_autofree uint64_t *rest = NULL;
    g_autoptr(JsonNode) state = NULL;
    job->ok = job->l.paused || live_precopy(&job->l, &rest, &job->error);
    if (job->ok) {
        job->rest = rest;
        state = ask_for_stop(job, &job->error);
        job->ok = state != NULL;
    }
    if (job->ok) {
        set_phase(job, LIVE_PHASE_WRITING);
        job->ok = live_write(&job->l, state, &job->error);
    }
    g_mutex_lock(&job->lock);
    job->end_source = attach_to_owner(job, end_on_owner);
    g_mutex_unlock(&job->lock);
    return NULL;
}

/* ---- the end, on the owner ---- */

static void destroy_source(GSource **source)
{
    if (*source) {
        g_source_destroy(*source);
        g_clear_pointer(source, g_source_unref);
    }
}

static void finish(struct persist_live_job *job)
{
    g_thread_join(job->thread);
    destroy_source(&job->stop_source);
    destroy_source(&job->end_source);
    live_end(&job->l, job->ok);
    if (!job->ok && job->error && job->error->domain == PERSIST_ERROR &&
        job->error->code == PERSIST_ERROR_CANCELLED)
        g_message("%s snapshot cancelled %.1f ms after its start (pass %u), its end %.1f ms after the cancel: "
                  "the VM runs on, nothing was kept", job->l.paused ? "paused" : "live",
                  (g_get_monotonic_time() - job->started_us) / 1e3,
                  job->l.progress.pass, (g_get_monotonic_time() - job->cancelled_us) / 1e3);
    job->done(job->ok, &job->l.result, job->error, job->done_data);
    g_clear_error(&job->error);
    g_mutex_clear(&job->lock);
    g_cond_clear(&job->changed);
    g_main_context_unref(job->owner);
    g_free(job);
}

static gboolean end_on_owner(gpointer data)
{
    finish(data);
    return G_SOURCE_REMOVE;
}

/* ---- the owner's calls ---- */

struct persist_live_job *persist_live_start(struct vm *vm, struct vm_config *cfg,
                                            const struct persist_snapshot_request *req,
                                            persist_live_done_func done, void *data, GError **error)
{
    struct persist_live_job *job = g_new0(struct persist_live_job, 1);
    job->l.job = job;
    g_mutex_init(&job->lock);
    g_cond_init(&job->changed);
    if (!live_prepare(&job->l, vm, cfg, req, error)) {
        live_end(&job->l, false);
        g_mutex_clear(&job->lock);
        g_cond_clear(&job->changed);
        g_free(job);
        return NULL;
    }
    job->owner = g_main_context_ref_thread_default();
    job->done = done;
    job->done_data = data;
    job->started_us = g_get_monotonic_time();
    live_report(&job->l);
    job->thread = g_thread_new("live-snapshot", run_job, job);
    return job;
}

void persist_live_cancel(struct persist_live_job *job)
{
    if (!job->cancelled_us)
        job->cancelled_us = g_get_monotonic_time();
    g_atomic_int_set(&job->cancel, 1);
    g_mutex_lock(&job->lock);
    g_cond_broadcast(&job->changed);
    g_mutex_unlock(&job->lock);
}

void persist_live_end_now(struct persist_live_job *job)
{
    persist_live_cancel(job);
    finish(job);
}

static const char *phase_name(enum live_phase phase)
{
    switch (phase) {
    case LIVE_PHASE_PRECOPY:
        return "precopy";
    case LIVE_PHASE_STOP:
        return "stop";
    case LIVE_PHASE_WRITING:
        return "writing";
    }
    return "unknown";
}

void persist_live_add_info(struct persist_live_job *job, JsonBuilder *b)
{
    g_mutex_lock(&job->lock);
    struct live_progress p = job->shown;
    g_mutex_unlock(&job->lock);
    vjson_object_begin(b, NULL);
    vjson_str(b, "phase", phase_name(p.phase));
    vjson_bool(b, "cancelling", g_atomic_int_get(&job->cancel));
    vjson_bool(b, "diff", job->l.req.diff);
    vjson_bool(b, "live", !job->l.paused);
    vjson_int(b, "written_pages", (gint64)p.written_pages);
    vjson_int(b, "elapsed_ms", (g_get_monotonic_time() - job->started_us) / 1000);
    vjson_int(b, "pass", p.pass);
    vjson_int(b, "pass_pages_copied", (gint64)p.pass_copied);
    vjson_int(b, "pass_pages_total", (gint64)p.pass_total);
    vjson_int(b, "copied_pages", (gint64)p.copied);
    vjson_int(b, "ram_pages", (gint64)(job->l.ram.size / SNAP_PAGE_SIZE));
    vjson_int(b, "dirty_pages_per_s", (gint64)p.dirty_pages_per_s);
    vjson_object_end(b);
}
