#include "driver/driver-block-job.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <libvirt/libvirt.h>
#include <unistd.h>

#include "domain/block-jobs.h"
#include "domain/disk-state.h"
#include "domain/domain.h"
#include "monitor/monitor.h"
#include "persist/block-commit.h"
#include "persist/snapshot.h"
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

/* Record the job, then ask the shim; the record goes if the shim refuses. */
static bool start_job(struct vsnap_domain *dom, const struct job_disk *d, int type, uint64_t bytes_per_s,
                      GError **error)
{
    g_mutex_lock(&dom->lock);
    bool added = domain_block_job_add(dom, d->target, d->image, type, error);
    g_mutex_unlock(&dom->lock);
    if (!added)
        return false;
    g_autoptr(GError) local = NULL;
    bool pull = type == VIR_DOMAIN_BLOCK_JOB_TYPE_PULL;
    /* A commit writes the image, which the confined shim cannot open for writing. */
    int fd = pull ? -1 : open(d->image, O_RDWR | O_CLOEXEC);
    bool ok = pull ? monitor_vm_disk_pull(d->api_socket, d->target, bytes_per_s, &local)
          : fd < 0 ? (g_set_error(&local, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot open %s: %s", d->image,
                                  g_strerror(errno)), false)
                   : monitor_vm_disk_commit(d->api_socket, d->target, bytes_per_s, fd, &local);
    if (fd >= 0)
        close(fd);
    if (ok)
        return true;
    g_mutex_lock(&dom->lock);
    domain_block_job_remove(dom, d->target);
    g_mutex_unlock(&dom->lock);
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "cannot start the block %s of disk '%s': %s",
                domain_block_job_type_name(type), d->target, local->message);
    return false;
}

static bool start_pull(struct vsnap_driver *drv, struct vsnap_domain *dom, const struct job_disk *d,
                       uint64_t bytes_per_s, GError **error)
{
    (void)drv;
    return start_job(dom, d, VIR_DOMAIN_BLOCK_JOB_TYPE_PULL, bytes_per_s, error);
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

static bool no_job_yet(struct vsnap_domain *dom, const job_disk_t *d, GError **error);

/* The target: a new file of the disk's size (an existing one is never
 * written over), given to the shim; it goes again if the copy does not start. */
static bool start_copy(struct vsnap_domain *dom, const job_disk_t *d, const char *dest, uint64_t bytes_per_s,
                       GError **error)
{
    if (!g_path_is_absolute(dest)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "the copy's destination %s is not an absolute path",
                    dest);
        return false;
    }
    struct stat st;
    int fd = stat(d->image, &st) == 0 ? open(dest, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
    if (fd < 0 || ftruncate(fd, st.st_size) != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "cannot create the copy's destination %s: %s",
                    dest, g_strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(dest);
        }
        return false;
    }
    g_mutex_lock(&dom->lock);
    bool added = domain_block_job_add(dom, d->target, d->image, VIR_DOMAIN_BLOCK_JOB_TYPE_COPY, error);
    if (added)
        domain_block_job_find(dom, d->target)->dest = g_strdup(dest);
    g_mutex_unlock(&dom->lock);
    g_autoptr(GError) local = NULL;
    bool ok = added && monitor_vm_disk_copy(d->api_socket, d->target, dest, bytes_per_s, fd, &local);
    close(fd);
    if (ok)
        return true;
    unlink(dest);
    if (!added)
        return false;
    g_mutex_lock(&dom->lock);
    domain_block_job_remove(dom, d->target);
    g_mutex_unlock(&dom->lock);
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "cannot start the block copy of disk '%s': %s",
                d->target, local->message);
    return false;
}

/* libvirt's QEMU driver copies only a transient domain's disk this way: a
 * persistent definition would still name the disk the copy left. */
static bool copy(struct vsnap_domain *dom, const char *disk, const char *dest, uint64_t bandwidth, unsigned flags,
                 GError **error)
{
    unsigned allowed = VIR_DOMAIN_BLOCK_REBASE_COPY | VIR_DOMAIN_BLOCK_REBASE_COPY_RAW |
                       VIR_DOMAIN_BLOCK_REBASE_BANDWIDTH_BYTES;
    g_auto(job_disk_t) d = {0};
    uint64_t bytes_per_s;
    if (!refuse_flags(flags, allowed, error) ||
        !bandwidth_bytes(bandwidth, flags & VIR_DOMAIN_BLOCK_REBASE_BANDWIDTH_BYTES, &bytes_per_s, error))
        return false;
    if (!dest) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "a block copy needs a destination");
        return false;
    }
    if (!domain_job_acquire(dom, "blockcopy", error))
        return false;
    g_mutex_lock(&dom->lock);
    bool persistent = dom->persistent;
    g_mutex_unlock(&dom->lock);
    bool ok = find_job_disk(dom, disk, &d, error) && no_job_yet(dom, &d, error);
    if (ok && persistent) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not transient: a block copy of "
                    "disk '%s' would leave its persistent definition on the disk the copy left", d.target);
        ok = false;
    }
    ok = ok && start_copy(dom, &d, dest, bytes_per_s, error);
    domain_job_release(dom);
    return ok;
}

bool driver_block_rebase(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, const char *base,
                         uint64_t bandwidth, unsigned flags, GError **error)
{
    if (flags & VIR_DOMAIN_BLOCK_REBASE_COPY)
        return copy(dom, disk, base, bandwidth, flags, error);
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

/* The copy of an active commit is a pull (the image untouched); only its
 * pivot writes the image. */
static bool start_commit(struct vsnap_driver *drv, struct vsnap_domain *dom, const struct job_disk *d,
                         uint64_t bytes_per_s, GError **error)
{
    (void)drv;
    return start_job(dom, d, VIR_DOMAIN_BLOCK_JOB_TYPE_ACTIVE_COMMIT, bytes_per_s, error);
}

static void end_job(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *target, int status);

/* An inner range folds at once (persist/block-commit.h): the job begins
 * and completes within the call, its COMPLETED event on the way as it returns. */
static bool commit_inner(struct vsnap_driver *drv, struct vsnap_domain *dom, const job_disk_t *d, const char *base,
                         const char *top, bool shallow, GError **error)
{
    g_mutex_lock(&dom->lock);
    bool added = domain_block_job_add(dom, d->target, d->image, VIR_DOMAIN_BLOCK_JOB_TYPE_COMMIT, error);
    g_mutex_unlock(&dom->lock);
    if (!added)
        return false;
    if (block_commit_inner(drv, dom, d->target, top, base, shallow, error)) {
        end_job(drv, dom, d->target, VIR_DOMAIN_BLOCK_JOB_COMPLETED);
        return true;
    }
    g_mutex_lock(&dom->lock);
    domain_block_job_remove(dom, d->target);
    g_mutex_unlock(&dom->lock);
    return false;
}

static bool no_job_yet(struct vsnap_domain *dom, const job_disk_t *d, GError **error)
{
    g_mutex_lock(&dom->lock);
    bool busy = domain_block_job_find(dom, d->target) != NULL;
    g_mutex_unlock(&dom->lock);
    if (busy)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "disk '%s' already in active block job",
                    d->target);
    return !busy;
}

/* top must be the active layer (the disk's overlay, or the target) and
 * base the image, or absent: the commit of the whole chain into the image. */
static bool check_commit_range(struct vsnap_domain *dom, const struct job_disk *d, const char *base, const char *top,
                               unsigned flags, GError **error)
{
    g_mutex_lock(&dom->lock);
    const struct domain_disk *disk = domain_def_find_disk(dom->def, d->target);
    g_autofree char *active = disk && disk->chain ? g_strdup(disk->chain[0]) : NULL;
    g_mutex_unlock(&dom->lock);
    bool top_active = !top || g_str_equal(top, d->target) || (active && g_str_equal(top, active));
    if (!top_active) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                    "an active commit (--active) of disk '%s' starts at its active layer %s, not %s", d->target,
                    active ? active : d->target, top);
        return false;
    }
    if (base && !g_str_equal(base, d->image)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "disk '%s' commits into its image %s, the base of every layer, not into %s", d->target, d->image,
                    base);
        return false;
    }
    if (!active) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "disk '%s' has no snapshot layers to commit (it writes its image directly)", d->target);
        return false;
    }
    return true;
}

bool driver_block_commit(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, const char *base,
                         const char *top, uint64_t bandwidth, unsigned flags, GError **error)
{
    g_auto(job_disk_t) d = {0};
    uint64_t bytes_per_s;
    unsigned allowed = VIR_DOMAIN_BLOCK_COMMIT_ACTIVE | VIR_DOMAIN_BLOCK_COMMIT_BANDWIDTH_BYTES |
                       VIR_DOMAIN_BLOCK_COMMIT_SHALLOW;
    if (!refuse_flags(flags, allowed, error) ||
        !bandwidth_bytes(bandwidth, flags & VIR_DOMAIN_BLOCK_COMMIT_BANDWIDTH_BYTES, &bytes_per_s, error) ||
        !domain_job_acquire(dom, "blockcommit", error))
        return false;
    bool ok = find_job_disk(dom, disk, &d, error) && no_job_yet(dom, &d, error);
    if (ok && (flags & VIR_DOMAIN_BLOCK_COMMIT_ACTIVE))
        ok = check_commit_range(dom, &d, base, top, flags, error) && start_commit(drv, dom, &d, bytes_per_s, error);
    else if (ok)
        ok = commit_inner(drv, dom, &d, base, top, flags & VIR_DOMAIN_BLOCK_COMMIT_SHALLOW, error);
    domain_job_release(dom);
    return ok;
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
    /* A ready commit reads as done, which virsh --wait looks for too. */
    if (p.ready)
        p.cur = p.end;
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

/* The pivot rewrites the image every snapshot's layers of the disk sit on:
 * they are marked first (persist/snapshot.h), so that a revert to one is
 * refused naming the commit, and the pivot's intent is written (a crash
 * during it is finished before the next boot, domain/disk-state.h). Then
 * the shim pivots (vm.disk-job-pivot) and the live definition and the
 * disk record learn it: no chain any more. */
static bool pivot_commit(struct vsnap_driver *drv, struct vsnap_domain *dom, const job_disk_t *d, GError **error)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_local();
    g_autofree char *stamp = g_date_time_format(now, "%F %T");
    g_autofree char *what = g_strdup_printf("blockcommit --active of disk '%s' into %s (%s)", d->target, d->image,
                                            stamp);
    g_autofree char *disk_dir = disk_state_dir(drv->paths.state_dir, dom->name);
    if (!domain_job_acquire(dom, "blockcommit-pivot", error))
        return false;
    g_autoptr(GError) local = NULL;
    bool ok = snapshot_mark_disk_commit(drv, dom, what, error) && disk_state_begin_pivot(disk_dir, d->target, error);
    if (ok && !monitor_vm_disk_job_pivot(d->api_socket, d->target, &local)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "cannot pivot disk '%s': %s", d->target,
                    local->message);
        ok = false;
    }
    ok = ok && process_refresh_disks(dom, error);
    if (ok)
        disk_state_end_pivot(disk_dir, d->target);
    domain_job_release(dom);
    return ok;
}

/* A copy's pivot puts the live disk on the destination (no chain); an
 * abort leaves the disk as it was and removes the destination, unless the
 * copy was READY (blockcopy --finish: a whole copy, the user's). */
static bool end_copy(struct vsnap_domain *dom, const job_disk_t *d, bool pivot, GError **error)
{
    g_mutex_lock(&dom->lock);
    struct domain_block_job *job = domain_block_job_find(dom, d->target);
    g_autofree char *dest = job && job->dest ? g_strdup(job->dest) : NULL;
    bool ready = job && job->ready;
    g_mutex_unlock(&dom->lock);
    g_autoptr(GError) local = NULL;
    if (pivot ? !monitor_vm_disk_job_pivot(d->api_socket, d->target, &local)
              : !monitor_vm_disk_job_cancel(d->api_socket, d->target, &local)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "cannot %s the copy of disk '%s': %s",
                    pivot ? "pivot" : "abort", d->target, local->message);
        return false;
    }
    /* Aborted once READY (blockcopy --finish), the copy is whole and stays. */
    if (!pivot) {
        if (dest && !ready)
            unlink(dest);
        return true;
    }
    g_mutex_lock(&dom->lock);
    struct domain_disk *disk = domain_def_find_disk(dom->def, d->target);
    if (disk && dest) {
        g_free(disk->path);
        disk->path = g_strdup(dest);
    }
    g_mutex_unlock(&dom->lock);
    return process_refresh_disks(dom, error);
}

static void end_job(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *target, int status)
{
    g_mutex_lock(&dom->lock);
    struct domain_block_job *job = domain_block_job_find(dom, target);
    if (job) {
        event_queue_block_job(drv->events, dom, job->path, job->disk, job->type, status);
        domain_block_job_remove(dom, target);
    }
    g_mutex_unlock(&dom->lock);
}

bool driver_block_job_abort(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, unsigned flags,
                            GError **error)
{
    g_auto(job_disk_t) d = {0};
    int type;
    if (!refuse_flags(flags, VIR_DOMAIN_BLOCK_JOB_ABORT_ASYNC | VIR_DOMAIN_BLOCK_JOB_ABORT_PIVOT, error) ||
        !find_job_disk(dom, disk, &d, error) || !job_type(dom, d.target, &type, error))
        return false;
    bool pivot = flags & VIR_DOMAIN_BLOCK_JOB_ABORT_PIVOT;
    if (type == VIR_DOMAIN_BLOCK_JOB_TYPE_COPY) {
        if (!end_copy(dom, &d, pivot, error))
            return false;
        end_job(drv, dom, d.target, pivot ? VIR_DOMAIN_BLOCK_JOB_COMPLETED : VIR_DOMAIN_BLOCK_JOB_CANCELED);
        return true;
    }
    if (pivot && type != VIR_DOMAIN_BLOCK_JOB_TYPE_ACTIVE_COMMIT) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "block job of disk '%s' is a %s, which has no pivot (only a copy or an active commit does)",
                    d.target, domain_block_job_type_name(type));
        return false;
    }
    if (pivot ? !pivot_commit(drv, dom, &d, error) : !monitor_vm_disk_job_cancel(d.api_socket, d.target, error))
        return false;
    end_job(drv, dom, d.target, pivot ? VIR_DOMAIN_BLOCK_JOB_COMPLETED : VIR_DOMAIN_BLOCK_JOB_CANCELED);
    return true;
}
