#include "persist/job.h"

#include <errno.h>
#include <stdint.h>
#include <glib/gstdio.h>

#include <libvirt/libvirt.h>

#include "domain/events.h"
#include "util/atomic-file.h"
#include "monitor/monitor.h"
#include "run/process.h"
#include "snapshot-dir.h"
#include "util/virt-error.h"

#define JOB_FILE "job"

static bool job_write(struct vsnap_domain *dom, const struct domain_job *job, GError **error)
{
    g_autofree char *path = process_run_path(dom, JOB_FILE);
    if (!path) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return false;
    }
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_key_file_set_integer(kf, "job", "operation", job->operation);
    g_key_file_set_int64(kf, "job", "started_us", job->started_us);
    g_key_file_set_uint64(kf, "job", "total", job->total);
    g_key_file_set_uint64(kf, "job", "processed", job->processed);
    g_key_file_set_string(kf, "job", "watch_dir", job->watch_dir ? job->watch_dir : "");
    g_key_file_set_boolean(kf, "job", "resume", job->resume);
    g_key_file_set_boolean(kf, "job", "live", job->live);
    g_key_file_set_integer(kf, "job", "state", job->state);
    g_key_file_set_integer(kf, "job", "reason", job->reason);
    g_key_file_set_string(kf, "job", "leftover", job->leftover ? job->leftover : "");
    g_key_file_set_string(kf, "job", "product", job->product ? job->product : "");
    g_key_file_set_string(kf, "job", "product_was", job->product_was ? job->product_was : "");
    g_autofree char *text = g_key_file_to_data(kf, NULL, NULL);
    return atomic_file_write(path, text, error);
}

/* A file's identity: a rename over it makes a new one (another inode). */
static char *product_identity(const char *path)
{
    GStatBuf st;
    if (g_lstat(path, &st) != 0)
        return g_strdup("absent");
    return g_strdup_printf("%ju:%ju:%jd.%09ld", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino,
                           (intmax_t)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
}

bool domain_job_begin(struct vsnap_domain *dom, const struct domain_job *begun, GError **error)
{
    struct domain_job job = *begun;
    g_autofree char *was = job.product ? product_identity(job.product) : NULL;
    job.product_was = was;
    job.started_us = g_get_monotonic_time();
    g_atomic_int_set(&dom->job_cancel, 0);
    g_mutex_lock(&dom->lock);
    job.state = dom->state;
    job.reason = dom->reason;
    g_mutex_unlock(&dom->lock);
    if (!job_write(dom, &job, error)) {
        g_prefix_error(error, "cannot record the job of %s: ", dom->name);
        return false;
    }
    return true;
}

void domain_job_progress(struct vsnap_domain *dom, guint64 total, guint64 processed,
                         const char *watch_dir)
{
    struct domain_job job = {0};
    if (!domain_job_get(dom, &job))
        return;
    job.total = total;
    job.processed = processed;
    g_free(job.watch_dir);
    job.watch_dir = g_strdup(watch_dir);
    g_autoptr(GError) error = NULL;
    if (!job_write(dom, &job, &error))
        g_warning("domain %s: progress of its job not recorded: %s", dom->name, error->message);
    domain_job_clear(&job);
}

void domain_job_end(struct vsnap_domain *dom)
{
    g_autofree char *path = process_run_path(dom, JOB_FILE);
    if (path && g_unlink(path) < 0 && errno != ENOENT)
        g_warning("domain %s: cannot remove %s: %s", dom->name, path, g_strerror(errno));
}

bool domain_job_get(struct vsnap_domain *dom, struct domain_job *job)
{
    g_autofree char *path = process_run_path(dom, JOB_FILE);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) error = NULL;
    if (!path)
        return false;
    if (!g_key_file_load_from_file(kf, path, 0, &error)) {
        if (!g_error_matches(error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            g_warning("domain %s: cannot read its job: %s", dom->name, error->message);
        return false;
    }
    job->operation = g_key_file_get_integer(kf, "job", "operation", NULL);
    job->started_us = g_key_file_get_int64(kf, "job", "started_us", NULL);
    job->total = g_key_file_get_uint64(kf, "job", "total", NULL);
    job->processed = g_key_file_get_uint64(kf, "job", "processed", NULL);
    job->watch_dir = g_key_file_get_string(kf, "job", "watch_dir", NULL);
    job->resume = g_key_file_get_boolean(kf, "job", "resume", NULL);
    job->live = g_key_file_get_boolean(kf, "job", "live", NULL);
    job->state = g_key_file_get_integer(kf, "job", "state", NULL);
    job->reason = g_key_file_get_integer(kf, "job", "reason", NULL);
    job->leftover = g_key_file_get_string(kf, "job", "leftover", NULL);
    if (job->leftover && !*job->leftover)
        g_clear_pointer(&job->leftover, g_free);
    job->product = g_key_file_get_string(kf, "job", "product", NULL);
    if (job->product && !*job->product)
        g_clear_pointer(&job->product, g_free);
    job->product_was = g_key_file_get_string(kf, "job", "product_was", NULL);
    if (job->watch_dir && *job->watch_dir && !job->live)
        job->processed = MIN(job->total, snapdir_bytes(job->watch_dir));
    return true;
}

void domain_job_clear(struct domain_job *job)
{
    g_clear_pointer(&job->watch_dir, g_free);
    g_clear_pointer(&job->leftover, g_free);
    g_clear_pointer(&job->product, g_free);
    g_clear_pointer(&job->product_was, g_free);
}

bool domain_job_made_product(const struct domain_job *job)
{
    if (!job->product)
        return false;
    g_autofree char *now = product_identity(job->product);
    return !g_str_equal(now, "absent") && g_strcmp0(now, job->product_was) != 0;
}

bool domain_job_cancel(struct vsnap_domain *dom, GError **error)
{
    g_mutex_lock(&dom->lock);
    char *api = dom->run ? g_strdup(dom->run->api_socket) : NULL;
    g_mutex_unlock(&dom->lock);
    g_autofree char *api_socket = api;
    if (!api_socket) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return false;
    }
    g_atomic_int_set(&dom->job_cancel, 1);
    /* The job ends itself once the shim answered its snapshot (or, between
     * two steps, once it sees the mark). A job not yet at the shim's
     * snapshot (pausing) or past it (packing, resuming) has none to cancel:
     * asked again until the job ends. */
    struct domain_job job = {0};
    gint64 deadline = g_get_monotonic_time() + JOB_CANCEL_WAIT_S * G_USEC_PER_SEC;
    bool asked = false;
    while (domain_job_get(dom, &job) && g_get_monotonic_time() < deadline) {
        domain_job_clear(&job);
        if (!asked)
            asked = monitor_vm_cancel_snapshot(api_socket, NULL);
        g_usleep(asked ? 2 * 1000 : 5 * 1000);
    }
    domain_job_clear(&job);
    return true;
}

bool domain_job_cancelled(struct vsnap_domain *dom)
{
    return g_atomic_int_get(&dom->job_cancel);
}

void domain_job_completed(struct event_queue *events, struct vsnap_domain *dom, struct domain_job_stats *stats)
{
    stats->ended_us = g_get_monotonic_time();
    g_mutex_lock(&dom->lock);
    g_free(dom->completed);
    dom->completed = g_memdup2(stats, sizeof *stats);
    event_queue_job_completed(events, dom, stats);
    g_mutex_unlock(&dom->lock);
}
