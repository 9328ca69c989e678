#include "driver/driver-block-job.h"

#include <libvirt/libvirt.h>

#include "domain/block-jobs.h"
#include "domain/domain.h"
#include "monitor/monitor.h"
#include "run/process.h"
#include "util/virt-error.h"

#define MIB (1024ull * 1024ull)

static bool refuse_flags(unsigned flags, unsigned allowed, GError **error)
{
    if ((flags & ~allowed) == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)", flags & ~allowed);
    return false;
}

/* What a job call needs of a running domain's disk, copied under dom->lock:
 * the target, the image and the shim's socket. */
typedef struct job_disk {
    char *target, *image, *api_socket;
} job_disk_t;

static void job_disk_clear(job_disk_t *d)
{
    g_free(d->target);
    g_free(d->image);
    g_free(d->api_socket);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(job_disk_t, job_disk_clear)

static bool find_job_disk(struct vsnap_domain *dom, const char *name, struct job_disk *out, GError **error)
{
    g_mutex_lock(&dom->lock);
    const struct domain_disk *d = dom->run ? domain_def_find_disk(dom->def, name) : NULL;
    if (d) {
        out->target = g_strdup(d->target);
        out->image = g_strdup(d->path);
        out->api_socket = g_strdup(dom->run->api_socket);
    }
    bool running = dom->run != NULL;
    g_mutex_unlock(&dom->lock);
    if (!running)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
    else if (!d)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "invalid path %s not assigned to domain", name);
    return d != NULL;
}

/* libvirt's bandwidth is MiB/s unless the call's BYTES flag says bytes/s. */
static bool bandwidth_bytes(uint64_t bandwidth, bool in_bytes, uint64_t *out, GError **error)
{
    if (!in_bytes && bandwidth > UINT64_MAX / MIB) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OVERFLOW, "bandwidth must be less than %llu",
                    (unsigned long long)(UINT64_MAX / MIB));
        return false;
    }
    *out = in_bytes ? bandwidth : bandwidth * MIB;
    return true;
}

static bool start_pull(struct vsnap_driver *drv, struct vsnap_domain *dom, const struct job_disk *d,
                       uint64_t bytes_per_s, GError **error)
{
    (void)drv;
    g_mutex_lock(&dom->lock);
    bool added = domain_block_job_add(dom, d->target, d->image, VIR_DOMAIN_BLOCK_JOB_TYPE_PULL, error);
    g_mutex_unlock(&dom->lock);
    if (!added)
        return false;
    g_autoptr(GError) local = NULL;
    if (monitor_vm_disk_pull(d->api_socket, d->target, bytes_per_s, &local))
        return true;
    g_mutex_lock(&dom->lock);
    domain_block_job_remove(dom, d->target);
    g_mutex_unlock(&dom->lock);
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "cannot start the block pull of disk '%s': %s",
                d->target, local->message);
    return false;
}

/* Under the domain's job, so a pull never starts under a snapshot, revert
 * or stop; the job itself runs on without it (snapshots are refused while
 * it does, naming it). */
static bool pull(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, uint64_t bandwidth,
                 bool in_bytes, GError **error)
{
    g_auto(job_disk_t) d = {0};
    uint64_t bytes_per_s;
    if (!bandwidth_bytes(bandwidth, in_bytes, &bytes_per_s, error) || !domain_job_acquire(dom, "blockpull", error))
        return false;
    bool ok = find_job_disk(dom, disk, &d, error) && start_pull(drv, dom, &d, bytes_per_s, error);
    domain_job_release(dom);
    return ok;
}

bool driver_block_pull(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, uint64_t bandwidth,
                       unsigned flags, GError **error)
{
    return refuse_flags(flags, VIR_DOMAIN_BLOCK_PULL_BANDWIDTH_BYTES, error) &&
           pull(drv, dom, disk, bandwidth, flags & VIR_DOMAIN_BLOCK_PULL_BANDWIDTH_BYTES, error);
}

bool driver_block_rebase(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, const char *base,
                         uint64_t bandwidth, unsigned flags, GError **error)
{
    if (flags & VIR_DOMAIN_BLOCK_REBASE_COPY) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "block copy (blockcopy, virDomainBlockRebase with VIR_DOMAIN_BLOCK_REBASE_COPY) is not "
                    "supported by vsnap yet");
        return false;
    }
    if (!refuse_flags(flags, VIR_DOMAIN_BLOCK_REBASE_BANDWIDTH_BYTES, error))
        return false;
    if (base) {
        g_auto(job_disk_t) d = {0};
        if (!find_job_disk(dom, disk, &d, error))
            return false;
        if (!g_str_equal(base, d.image)) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                        "a partial block pull (--base %s) is not supported: vsnap pulls every sealed layer of "
                        "disk '%s' into its overlay, over its image %s (give that as the base, or none)",
                        base, d.target, d.image);
            return false;
        }
    }
    return pull(drv, dom, disk, bandwidth, flags & VIR_DOMAIN_BLOCK_REBASE_BANDWIDTH_BYTES, error);
}

/* The disk's job record (type), or VIR_ERR_OPERATION_INVALID as libvirt
 * words it. */
static bool job_type(struct vsnap_domain *dom, const char *target, int *type, GError **error)
{
    g_mutex_lock(&dom->lock);
    struct domain_block_job *job = domain_block_job_find(dom, target);
    if (job)
        *type = job->type;
    g_mutex_unlock(&dom->lock);
    if (!job && error)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "disk '%s' does not have an active block job",
                    target);
    return job != NULL;
}

bool driver_block_job_info(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, unsigned flags,
                           struct block_job_info *out, bool *found, GError **error)
{
    (void)drv;
    g_auto(job_disk_t) d = {0};
    *found = false;
    if (!refuse_flags(flags, VIR_DOMAIN_BLOCK_JOB_INFO_BANDWIDTH_BYTES, error) || !find_job_disk(dom, disk, &d, error))
        return false;
    int type;
    if (!job_type(dom, d.target, &type, NULL))
        return true;
    struct disk_job_progress p;
    bool in_shim = false;
    if (!monitor_vm_disk_job_info(d.api_socket, d.target, &p, &in_shim, error))
        return false;
    /* The shim is done and its event on the way: all copied. */
    if (!in_shim)
        p = (struct disk_job_progress){ .cur = 1, .end = 1 };
    bool bytes = flags & VIR_DOMAIN_BLOCK_JOB_INFO_BANDWIDTH_BYTES;
    *out = (struct block_job_info){
        .type = type, .cur = p.cur, .end = p.end,
        .bandwidth = bytes ? p.bandwidth : (p.bandwidth + MIB - 1) / MIB,
    };
    *found = true;
    return true;
}

bool driver_block_job_set_speed(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk,
                                uint64_t bandwidth, unsigned flags, GError **error)
{
    (void)drv;
    g_auto(job_disk_t) d = {0};
    uint64_t bytes_per_s;
    int type;
    return refuse_flags(flags, VIR_DOMAIN_BLOCK_JOB_SPEED_BANDWIDTH_BYTES, error) &&
           bandwidth_bytes(bandwidth, flags & VIR_DOMAIN_BLOCK_JOB_SPEED_BANDWIDTH_BYTES, &bytes_per_s, error) &&
           find_job_disk(dom, disk, &d, error) && job_type(dom, d.target, &type, error) &&
           monitor_vm_disk_job_speed(d.api_socket, d.target, bytes_per_s, error);
}

bool driver_block_job_abort(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, unsigned flags,
                            GError **error)
{
    g_auto(job_disk_t) d = {0};
    int type;
    if (!refuse_flags(flags, VIR_DOMAIN_BLOCK_JOB_ABORT_ASYNC | VIR_DOMAIN_BLOCK_JOB_ABORT_PIVOT, error) ||
        !find_job_disk(dom, disk, &d, error) || !job_type(dom, d.target, &type, error))
        return false;
    if (flags & VIR_DOMAIN_BLOCK_JOB_ABORT_PIVOT) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "block job of disk '%s' is a %s, which has no pivot (only a copy or an active commit does)",
                    d.target, domain_block_job_type_name(type));
        return false;
    }
    if (!monitor_vm_disk_job_cancel(d.api_socket, d.target, error))
        return false;
    g_mutex_lock(&dom->lock);
    struct domain_block_job *job = domain_block_job_find(dom, d.target);
    if (job) {
        event_queue_block_job(drv->events, dom, job->path, job->disk, job->type, VIR_DOMAIN_BLOCK_JOB_CANCELED);
        domain_block_job_remove(dom, d.target);
    }
    g_mutex_unlock(&dom->lock);
    return true;
}
