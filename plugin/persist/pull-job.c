#include "pull-job.h"

#include <libvirt/libvirt.h>

struct pull_job {
    struct pull_jobs *owner;
    bool running;
    gint64 started_us;
    guint64 total, processed;
    bool have_last;
    struct push_info last;
};

struct pull_jobs {
    GMutex lock;
    GHashTable *domains;   /* uuid -> struct pull_job * (kept for the daemon's life, like pushes) */
};

struct pull_jobs *pull_jobs_new(void)
{
    struct pull_jobs *p = g_new0(struct pull_jobs, 1);
    g_mutex_init(&p->lock);
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

void *pull_job_begin(struct pull_jobs *p, const char *uuid)
{
    g_mutex_lock(&p->lock);
    struct pull_job *j = job_locked(p, uuid);
    j->running = true;
    j->started_us = g_get_monotonic_time();
    j->total = j->processed = 0;
    g_mutex_unlock(&p->lock);
    return j;
}

void pull_job_on_progress(void *data, guint64 done, guint64 total)
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

void pull_job_end(struct pull_jobs *p, const char *uuid, const GError *error)
{
    g_mutex_lock(&p->lock);
    struct pull_job *j = job_locked(p, uuid);
    push_info_clear(&j->last);
    j->last = (struct push_info){
        .type = error ? VIR_DOMAIN_JOB_FAILED : VIR_DOMAIN_JOB_COMPLETED,
        .elapsed_ms = elapsed_ms(j), .total = j->total, .processed = MIN(j->processed, j->total),
        .error = error ? g_strdup(error->message) : NULL, .ended_us = g_get_monotonic_time(),
    };
    j->have_last = true;
    j->running = false;
    g_mutex_unlock(&p->lock);
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
