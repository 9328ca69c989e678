#include "driver/driver-block.h"

#include <errno.h>
#include <libvirt/libvirt.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "monitor/monitor.h"
#include "run/process.h"
#include "util/virt-error.h"

void block_stats_clear(struct block_stats *s)
{
    g_clear_pointer(&s->name, g_free);
    g_clear_pointer(&s->path, g_free);
}

/* The file the guest writes: the active overlay once there is a chain. */
static const char *active_path(const struct domain_disk *disk)
{
    return disk->chain && disk->chain[0] ? disk->chain[0] : disk->path;
}

/* Size of a regular file or block device. */
static bool file_size(const char *path, const struct stat *st, uint64_t *size, GError **error)
{
    if (!S_ISBLK(st->st_mode)) {
        *size = (uint64_t)st->st_size;
        return true;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || ioctl(fd, BLKGETSIZE64, size) < 0) {
        int errnum = errno;
        if (fd >= 0)
            close(fd);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot get the size of '%s': %s", path,
                    g_strerror(errnum));
        return false;
    }
    close(fd);
    return true;
}

static bool stat_file(const char *path, struct stat *st, GError **error)
{
    if (stat(path, st) == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot stat '%s': %s", path,
                g_strerror(errno));
    return false;
}

static bool disk_info(const struct domain_disk *disk, struct block_info *out, GError **error)
{
    struct stat image, active;
    const char *top = active_path(disk);
    if (!stat_file(disk->path, &image, error) || !stat_file(top, &active, error) ||
        !file_size(disk->path, &image, &out->capacity, error) ||
        !file_size(top, &active, &out->physical, error))
        return false;
    /* A block device is all allocated; a file has what its blocks hold. */
    out->allocation = S_ISBLK(active.st_mode) ? out->physical : (uint64_t)active.st_blocks * 512;
    return true;
}

/* The disk named `name` of dom's definition (the live one when running),
 * copied so the files are looked at without dom->lock held. */
static struct domain_disk *copy_disk(struct vsnap_domain *dom, const char *name, char **api_socket,
                                     GError **error)
{
    g_mutex_lock(&dom->lock);
    const struct domain_disk *d = domain_def_find_disk(dom->def, name);
    struct domain_disk *copy = NULL;
    if (d) {
        copy = g_new0(struct domain_disk, 1);
        copy->target = g_strdup(d->target);
        copy->path = g_strdup(d->path);
        copy->chain = g_strdupv(d->chain);
    }
    if (api_socket)
        *api_socket = dom->run ? g_strdup(dom->run->api_socket) : NULL;
    g_mutex_unlock(&dom->lock);
    if (!copy)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "invalid path %s not assigned to domain",
                    name);
    return copy;
}

static void free_disk_copy(struct domain_disk *d)
{
    g_free(d->target);
    g_free(d->path);
    g_strfreev(d->chain);
    g_free(d);
}
typedef struct domain_disk disk_copy;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(disk_copy, free_disk_copy)

bool driver_block_info(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk,
                       struct block_info *out, GError **error)
{
    (void)drv;
    g_autoptr(disk_copy) d = copy_disk(dom, disk, NULL, error);
    return d && disk_info(d, out, error);
}

static void fill_counters(struct block_stats *out, const struct disk_counters *c)
{
    out->rd_reqs = c->read_ops;
    out->rd_bytes = c->read_bytes;
    out->wr_reqs = c->write_ops;
    out->wr_bytes = c->write_bytes;
    out->fl_reqs = c->flush_ops;
    out->errors = c->io_errors;
}

bool driver_block_stats(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk,
                        struct block_stats *out, GError **error)
{
    (void)drv;
    g_autofree char *api_socket = NULL;
    g_autoptr(disk_copy) d = copy_disk(dom, disk, &api_socket, error);
    if (!d)
        return false;
    if (!api_socket) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return false;
    }
    struct disk_counters c;
    if (!monitor_vm_disk_counters(api_socket, d->target, &c, error))
        return false;
    *out = (struct block_stats){.name = g_strdup(d->target), .path = g_strdup(active_path(d))};
    fill_counters(out, &c);
    return true;
}

static bool grow_image(const char *path, uint64_t size, GError **error)
{
    struct stat st;
    if (!stat_file(path, &st, error))
        return false;
    if (S_ISBLK(st.st_mode) || (uint64_t)st.st_size > size) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, S_ISBLK(st.st_mode)
                    ? "cannot resize %s: a block device's size is the device's" : "cannot shrink %s to %" G_GUINT64_FORMAT
                    " bytes (it holds %" G_GUINT64_FORMAT "): vsnap only grows a disk", path, size,
                    (uint64_t)st.st_size);
        return false;
    }
    if (truncate(path, (off_t)size) == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot grow %s: %s", path, g_strerror(errno));
    return false;
}

/* The disk's image and the shim's socket, if it may grow. */
static bool resizable(struct vsnap_domain *dom, const char *name, char **image, char **target, char **api_socket,
                      GError **error)
{
    g_mutex_lock(&dom->lock);
    const struct domain_disk *d = domain_def_find_disk(dom->def, name);
    bool running = dom->run != NULL, layered = d && d->chain && d->chain[0], ro = d && d->readonly;
    *image = d ? g_strdup(d->path) : NULL;
    *target = d ? g_strdup(d->target) : NULL;
    *api_socket = running ? g_strdup(dom->run->api_socket) : NULL;
    g_mutex_unlock(&dom->lock);
    if (!running)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
    else if (!d)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "invalid path %s not assigned to domain", name);
    else if (ro)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "disk '%s' is read-only", *target);
    else if (layered)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED, "disk '%s' runs on snapshot layers, which "
                    "keep the size they were taken at: vsnap grows a disk only before its first snapshot (or once "
                    "blockcommit --active --pivot put it back on its image)", *target);
    return running && d && !ro && !layered;
}

bool driver_block_resize(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, uint64_t size,
                         unsigned flags, GError **error)
{
    (void)drv;
    if (flags & ~(unsigned)VIR_DOMAIN_BLOCK_RESIZE_BYTES) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)", flags);
        return false;
    }
    if (!(flags & VIR_DOMAIN_BLOCK_RESIZE_BYTES) && size > UINT64_MAX / 1024) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OVERFLOW, "size %" G_GUINT64_FORMAT " KiB is too large", size);
        return false;
    }
    uint64_t bytes = flags & VIR_DOMAIN_BLOCK_RESIZE_BYTES ? size : size * 1024;
    bytes = (bytes + 511) / 512 * 512;
    if (!domain_job_acquire(dom, "blockresize", error))
        return false;
    g_autofree char *image = NULL, *target = NULL, *api_socket = NULL;
    uint64_t capacity = 0;
    bool ok = resizable(dom, disk, &image, &target, &api_socket, error) && grow_image(image, bytes, error) &&
              monitor_vm_disk_resize(api_socket, target, &capacity, error);
    domain_job_release(dom);
    return ok;
}

size_t driver_disk_errors(struct vsnap_driver *drv, struct vsnap_domain *dom, char ***targets, int **codes,
                          GError **error)
{
    (void)drv;
    g_mutex_lock(&dom->lock);
    char *api_socket = dom->run ? g_strdup(dom->run->api_socket) : NULL;
    g_auto(GStrv) all = g_new0(char *, dom->def->n_disks + 1);
    for (size_t i = 0; i < dom->def->n_disks; i++)
        all[i] = g_strdup(dom->def->disks[i].target);
    g_mutex_unlock(&dom->lock);
    g_autofree char *socket = api_socket;
    *targets = g_new0(char *, g_strv_length(all) + 1);
    *codes = g_new0(int, g_strv_length(all) + 1);
    if (!socket) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return (size_t)-1;
    }
    size_t n = 0;
    for (guint i = 0; all[i]; i++) {
        struct disk_counters c;
        if (!monitor_vm_disk_counters(socket, all[i], &c, error))
            return (size_t)-1;
        if (c.io_errors == 0)
            continue;
        bool full = c.last_errno == ENOSPC || c.last_errno == EDQUOT;
        (*targets)[n] = g_strdup(all[i]);
        (*codes)[n++] = full ? VIR_DOMAIN_DISK_ERROR_NO_SPACE : VIR_DOMAIN_DISK_ERROR_UNSPEC;
    }
    return n;
}

size_t driver_all_block_stats(struct vsnap_driver *drv, struct vsnap_domain *dom, struct block_stats **out)
{
    (void)drv;
    g_mutex_lock(&dom->lock);
    g_auto(GStrv) targets = g_new0(char *, dom->def->n_disks + 1);
    for (size_t i = 0; i < dom->def->n_disks; i++)
        targets[i] = g_strdup(dom->def->disks[i].target);
    bool running = dom->run != NULL;
    g_mutex_unlock(&dom->lock);

    size_t n = g_strv_length(targets);
    *out = g_new0(struct block_stats, MAX(n, 1));
    for (size_t i = 0; i < n; i++) {
        g_autofree char *api_socket = NULL;
        g_autoptr(GError) error = NULL;
        g_autoptr(disk_copy) d = copy_disk(dom, targets[i], &api_socket, &error);
        struct block_stats *s = &(*out)[i];
        s->name = g_strdup(targets[i]);
        if (!d)
            continue;   /* redefined meanwhile: the name alone */
        s->path = g_strdup(active_path(d));
        struct disk_counters c;
        /* Statistics are best effort, as in libvirt: what cannot be read is
         * left out (zero), the rest is reported. */
        if (running && api_socket && monitor_vm_disk_counters(api_socket, d->target, &c, &error))
            fill_counters(s, &c);
        g_clear_error(&error);
        if (!disk_info(d, &s->info, &error))
            s->info = (struct block_info){0};
    }
    return n;
}
