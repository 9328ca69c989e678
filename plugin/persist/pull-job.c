#include "persist/pull-job.h"

#include <libvirt/libvirt.h>

struct pull_job {
    struct pull_jobs *owner;
    bool running;
    guint pulls;                 /* begun so far: which pull a cancel waits for */
    gint cancel;                 /* store_options.cancel of the pull under way */
    const char *cancel_reason;
    gint64 started_us;
    guint64 total, processed;
    bool have_last;
    struct push_info last;
};

struct pull_jobs {
    GMutex lock;
    GCond ended;           /* a pull ended (pull_job_cancel waits for it) */
    GHashTable *domains;   /* uuid -> struct pull_job * (kept for the daemon's life, like pushes) */
};

struct pull_jobs *pull_jobs_new(void)
{
    struct pull_jobs *p = g_new0(struct pull_jobs, 1);
    g_mutex_init(&p->lock);
    g_cond_init(&p->ended);
    p->domains = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    return p;
}

static struct pull_job *job_locked(struct pull_jobs *p, const char *uuid)
{
    struct pull_job *j = g_hash_table_lookup(p->domains, uuid);
    if (!j) {
        j = g_new0(struct pull_job, 1);
        j->owner = p;
        g_hash_table_insert(p->domains, g_strdup(uuid), j);
    }
    return j;
}

static void on_progress(void *data, guint64 done, guint64 total);

void pull_job_begin(struct pull_jobs *p, const char *uuid, struct store_options *o)
{
    g_mutex_lock(&p->lock);
    struct pull_job *j = job_locked(p, uuid);
    j->running = true;
    j->pulls++;
    j->started_us = g_get_monotonic_time();
    j->total = j->processed = 0;
    g_atomic_int_set(&j->cancel, 0);
    j->cancel_reason = NULL;
    g_mutex_unlock(&p->lock);
    o->on_progress = on_progress;
    o->progress_data = j;
    o->cancel = &j->cancel;   /* the job lives as long as the daemon */
}

static void on_progress(void *data, guint64 done, guint64 total)
{
    struct pull_job *j = data;
    g_mutex_lock(&j->owner->lock);
    j->processed += done;
    j->total += total;
    g_mutex_unlock(&j->owner->lock);
}

static guint64 elapsed_ms(const struct pull_job *j)
{
    return (guint64)(g_get_monotonic_time() - j->started_us) / 1000;
}

bool pull_job_end(struct pull_jobs *p, const char *uuid, const GError *error, const char **reason)
{
    g_mutex_lock(&p->lock);
    struct pull_job *j = job_locked(p, uuid);
    bool cancelled = g_atomic_int_get(&j->cancel) != 0;
    push_info_clear(&j->last);
    j->last = (struct push_info){
        .type = cancelled ? VIR_DOMAIN_JOB_CANCELLED
                : error   ? VIR_DOMAIN_JOB_FAILED
                          : VIR_DOMAIN_JOB_COMPLETED,
        .elapsed_ms = elapsed_ms(j), .total = j->total, .processed = MIN(j->processed, j->total),
        .error = cancelled ? g_strdup(j->cancel_reason) : error ? g_strdup(error->message) : NULL,
        .ended_us = g_get_monotonic_time(),
    };
    j->have_last = true;
    j->running = false;
    if (reason)
        *reason = j->cancel_reason;
    g_cond_broadcast(&p->ended);
    g_mutex_unlock(&p->lock);
    return cancelled;
}

bool pull_job_cancel(struct pull_jobs *p, const char *uuid, const char *reason)
{
    g_mutex_lock(&p->lock);
    struct pull_job *j = g_hash_table_lookup(p->domains, uuid);
    bool running = j && j->running;
    if (running) {
        if (!g_atomic_int_get(&j->cancel))
            j->cancel_reason = reason;
        g_atomic_int_set(&j->cancel, 1);
        guint which = j->pulls;
        gint64 deadline = g_get_monotonic_time() + PULL_CANCEL_WAIT_S * G_USEC_PER_SEC;
        while (j->running && j->pulls == which &&
               g_cond_wait_until(&p->ended, &p->lock, deadline))
            ;
    }
    g_mutex_unlock(&p->lock);
    return running;
}

bool pull_job_current(struct pull_jobs *p, const char *uuid, struct push_info *out)
{
    g_mutex_lock(&p->lock);
    struct pull_job *j = g_hash_table_lookup(p->domains, uuid);
    bool running = j && j->running;
    if (running)
        *out = (struct push_info){
            .type = VIR_DOMAIN_JOB_BOUNDED, .elapsed_ms = elapsed_ms(j), .total = j->total,
            .processed = MIN(j->processed, j->total),
        };
    g_mutex_unlock(&p->lock);
    return running;
}

bool pull_job_last(struct pull_jobs *p, const char *uuid, struct push_info *out)
{
    g_mutex_lock(&p->lock);
    struct pull_job *j = g_hash_table_lookup(p->domains, uuid);
    bool have = j && j->have_last;
    if (have) {
        *out = j->last;
        out->error = g_strdup(j->last.error);
    }
    g_mutex_unlock(&p->lock);
    return have;
}
