/* The push job of store-push-job.h: a thread runs api_store_push; its end
 * goes back to the owner's main context through an idle source. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "store-push-job.h"

#include "config/shim-error.h"
#include "json/vjson.h"

struct api_push_job {
    struct api_store *store;
    char *dir, *url;
    api_push_done_func done;
    void *data;
    GMainContext *owner;
    GThread *thread;
    gint cancel;           /* store_options.cancel */
    gint64 started_us;
    GMutex lock;           /* guards the progress: the transfer's threads write it */
    guint64 bytes_done, bytes_total;
    GSource *idle;         /* the end's way back to owner, once the thread ended */
    bool ok;               /* the thread's result, read after it ended */
    struct store_push_result result;
    GError *error;
    gint abandoned;        /* api_push_job_end_now: nobody wants done */
};

static void job_free(struct api_push_job *job)
{
    if (job->idle)
        g_source_unref(job->idle);
    g_mutex_clear(&job->lock);
    store_push_result_clear(&job->result);
    g_clear_error(&job->error);
    g_main_context_unref(job->owner);
    g_free(job->dir);
    g_free(job->url);
    g_free(job);
}

/* store_options.on_progress, from the transfer's threads. */
static void on_progress(void *data, guint64 done, guint64 total)
{
    struct api_push_job *job = data;
    g_mutex_lock(&job->lock);
    job->bytes_done = done;
    job->bytes_total = total;
    g_mutex_unlock(&job->lock);
}

static gboolean finish_on_owner(gpointer data)
{
    struct api_push_job *job = data;
    g_thread_join(job->thread);
    if (job->store->push == job)
        job->store->push = NULL;
    job->done(job->ok, &job->result, job->error, job->data);
    job_free(job);
    return G_SOURCE_REMOVE;
}

static gpointer push_thread(gpointer data)
{
    struct api_push_job *job = data;
    struct api_push_args a = { .dir = job->dir, .url = job->url, .cancel = &job->cancel,
                               .on_progress = on_progress, .progress_data = job };
    g_autofree char *id = NULL;
    job->ok = api_store_push(job->store, &a, &id, &job->result, &job->error);
    if (!g_atomic_int_get(&job->abandoned)) {
        job->idle = g_idle_source_new();
        g_source_set_callback(job->idle, finish_on_owner, job, NULL);
        g_source_attach(job->idle, job->owner);
    }
    return NULL;
}

struct api_push_job *api_push_job_start(struct api_store *s, const char *dir, const char *url,
                                        api_push_done_func done, void *data)
{
    struct api_push_job *job = g_new0(struct api_push_job, 1);
    job->store = s;
    job->dir = g_strdup(dir);
    job->url = g_strdup(url);
    job->done = done;
    job->data = data;
    job->owner = g_main_context_ref_thread_default();
    job->started_us = g_get_monotonic_time();
    g_mutex_init(&job->lock);
    s->push = job;
    job->thread = g_thread_new("store-push", push_thread, job);
    return job;
}

void api_push_job_cancel(struct api_push_job *job)
{
    g_message("vm.snapshot: cancelling the push of %s to %s", job->dir, job->url);
    g_atomic_int_set(&job->cancel, 1);
}

void api_push_job_end_now(struct api_push_job *job)
{
    g_atomic_int_set(&job->abandoned, 1);
    g_atomic_int_set(&job->cancel, 1);
    g_thread_join(job->thread);
    if (job->idle) /* it ended before it saw abandoned: its end is not run */
        g_source_destroy(job->idle);
    if (job->store->push == job)
        job->store->push = NULL;
    job_free(job);
}

void api_push_job_add_info(struct api_push_job *job, JsonBuilder *b)
{
    g_mutex_lock(&job->lock);
    guint64 done = job->bytes_done, total = job->bytes_total;
    g_mutex_unlock(&job->lock);
    vjson_object_begin(b, NULL);
    vjson_str(b, "phase", "push");
    vjson_bool(b, "cancelling", g_atomic_int_get(&job->cancel));
    vjson_str(b, "url", job->url);
    vjson_int(b, "bytes_done", (gint64)done);
    vjson_int(b, "bytes_total", (gint64)total);
    vjson_int(b, "elapsed_ms", (g_get_monotonic_time() - job->started_us) / 1000);
    vjson_object_end(b);
}
