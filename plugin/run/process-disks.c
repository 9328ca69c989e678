/* A run's disk images against other domains' use of them (see process-disks.h). */
#include "process-disks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "domain/disk-state.h"
#include "run/process.h"
#include "snapshot/image-lock.h"
#include "util/virt-error.h"

/* How a domain uses an image. */
enum image_use {
    IMAGE_UNUSED,
    IMAGE_READ,         /* a read-only disk of a running domain */
    IMAGE_BASE,         /* under a domain's disk layers, running or not */
    IMAGE_WRITTEN,      /* a running domain's writable disk without layers */
};

static bool has_layers(const struct domain_disk *disk)
{
    return disk->chain && disk->chain[0];
}

static bool same_image(const char *a, const struct stat *sa, bool have_sa, const char *b)
{
    struct stat sb;
    if (have_sa && stat(b, &sb) == 0)
        return sa->st_dev == sb.st_dev && sa->st_ino == sb.st_ino;
    return g_str_equal(a, b);
}

/* What `other` (its definition with its chains) does with the image, and
 * through which of its disks. */
static enum image_use use_of(const struct domain_def *other, bool running, const char *image,
                             const struct stat *st, bool have_st, const char **target)
{
    enum image_use use = IMAGE_UNUSED;
    for (size_t i = 0; i < other->n_disks; i++) {
        const struct domain_disk *d = &other->disks[i];
        if (!same_image(image, st, have_st, d->path))
            continue;
        enum image_use here = has_layers(d) ? IMAGE_BASE
                              : !running    ? IMAGE_UNUSED
                              : d->readonly ? IMAGE_READ
                                            : IMAGE_WRITTEN;
        if (here > use) {
            use = here;
            *target = d->target;
        }
    }
    return use;
}

/* The other domain's disks as they are now: a running one's live
 * definition carries its chains; a shut-off one's come from its record. */
static struct domain_def *current_disks(struct vsnap_driver *drv, struct vsnap_domain *dom, bool *running)
{
    g_mutex_lock(&dom->lock);
    *running = dom->run != NULL;
    struct domain_def *def = dom->def && dom->def->n_disks ? domain_def_copy(dom->def) : NULL;
    g_mutex_unlock(&dom->lock);
    if (def && !*running) {
        g_autofree char *dir = disk_state_dir(drv->paths.state_dir, dom->name);
        g_autoptr(GError) ignored = NULL;
        if (!disk_state_load(dir, def, &ignored))
            g_debug("domain %s: %s", dom->name, ignored->message);
    }
    return def;
}

static bool conflicts(enum image_use theirs, bool writing)
{
    return writing ? theirs != IMAGE_UNUSED : theirs == IMAGE_WRITTEN;
}

static void set_busy(GError **error, const struct domain_disk *mine, bool writing, const char *other,
                     const char *their_target, enum image_use theirs)
{
    const char *how = theirs == IMAGE_WRITTEN ? "writes it"
                      : theirs == IMAGE_READ  ? "reads it as a read-only disk"
                                              : "keeps disk layers over it (its snapshots), so it must not change";
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_RESOURCE_BUSY,
                "disk image '%s' of disk '%s' is in use by domain '%s' (disk '%s'), which %s; this domain "
                "would %s it, and an image has one writer, or readers and no writer",
                mine->path, mine->target, other, their_target, how, writing ? "write" : "read");
}

static bool check_disk(struct vsnap_driver *drv, GPtrArray *doms, const char *name, const struct domain_disk *mine,
                       bool writing, GError **error)
{
    struct stat st;
    bool have_st = stat(mine->path, &st) == 0;
    for (guint i = 0; i < doms->len; i++) {
        struct vsnap_domain *dom = doms->pdata[i];
        if (g_str_equal(dom->name, name))
            continue;
        bool running = false;
        g_autoptr(domain_def) other = current_disks(drv, dom, &running);
        const char *target = NULL;
        enum image_use theirs = other ? use_of(other, running, mine->path, &st, have_st, &target) : IMAGE_UNUSED;
        if (conflicts(theirs, writing)) {
            set_busy(error, mine, writing, dom->name, target, theirs);
            return false;
        }
    }
    return true;
}

/* The domain whose shim is pid, if it is one of ours. */
static char *domain_of_pid(GPtrArray *doms, pid_t pid)
{
    char *name = NULL;
    for (guint i = 0; i < doms->len && !name; i++) {
        struct vsnap_domain *dom = doms->pdata[i];
        g_mutex_lock(&dom->lock);
        if (dom->run && dom->run->pid == pid)
            name = g_strdup(dom->name);
        g_mutex_unlock(&dom->lock);
    }
    return name;
}

/* What no record shows: a lock on the image held by a process this daemon
 * did not start (another daemon's shim, one started by hand), or by a
 * shim of ours whose start raced this one. */
static bool check_lock(GPtrArray *doms, const struct domain_disk *mine, bool writing, GError **error)
{
    int fd = open(mine->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return true;   /* domain_def_check_disk_access said why already, or the shim will */
    pid_t pid = snap_image_lock_holder(fd, writing);
    close(fd);
    if (pid == 0)
        return true;
    g_autofree char *dom = pid > 0 ? domain_of_pid(doms, pid) : NULL;
    g_autofree char *who = dom       ? g_strdup_printf("in use by domain '%s' (its shim, pid %d, holds a lock on it)",
                                                       dom, (int)pid)
                           : pid > 0 ? g_strdup_printf("locked by process %d, no domain of this daemon (a shim "
                                                       "started by hand, or another daemon's)", (int)pid)
                                     : g_strdup("locked by a process this daemon cannot see");
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_RESOURCE_BUSY,
                "disk image '%s' of disk '%s' is %s; this domain would %s it, and an image has one writer, or "
                "readers and no writer", mine->path, mine->target, who, writing ? "write" : "read");
    return false;
}

bool process_disks_check(struct vsnap_driver *drv, const char *name, const struct domain_def *live, bool restoring,
                      GError **error)
{
    if (live->n_disks == 0)
        return true;
    g_autoptr(GPtrArray) doms = domain_list_snapshot(drv->domains);
    for (size_t i = 0; i < live->n_disks; i++) {
        const struct domain_disk *mine = &live->disks[i];
        bool writing = !restoring && !mine->readonly && !has_layers(mine);
        if (!check_disk(drv, doms, name, mine, writing, error) || !check_lock(doms, mine, writing, error))
            return false;
    }
    return true;
}
