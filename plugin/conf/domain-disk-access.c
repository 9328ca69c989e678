/* Can the disks of a definition be opened? Checked by the daemon before it
 * spawns a shim, so that a missing or unreadable image is a clear libvirt
 * error naming the path and nothing is started, instead of a shim that
 * fails at vm.create with the reason in its log. */
#include "conf/domain-conf.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* The image is written only while no snapshot layers over it. */
static bool opens_read_only(const struct domain_disk *disk)
{
    return disk->readonly || (disk->chain && disk->chain[0]);
}

static void set_access_error(GError **error, const struct domain_disk *disk, int errnum)
{
    /* The words libvirt's QEMU driver uses, which users and their scripts
     * know, plus the disk they belong to. */
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR,
                "Cannot access storage file '%s' of disk '%s' (as uid:%u, gid:%u, for %s): %s", disk->path,
                disk->target, (unsigned)geteuid(), (unsigned)getegid(),
                opens_read_only(disk) ? "reading" : "reading and writing", g_strerror(errnum));
}

static bool check_kind(const struct domain_disk *disk, const struct stat *st, GError **error)
{
    if (disk->is_block ? S_ISBLK(st->st_mode) : S_ISREG(st->st_mode))
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                "disk '%s': '%s' is not a %s, as <disk type='%s'> says", disk->target, disk->path,
                disk->is_block ? "block device" : "regular file", disk->is_block ? "block" : "file");
    return false;
}

static bool check_disk(const struct domain_disk *disk, GError **error)
{
    /* O_NONBLOCK: a FIFO given as an image must not hang the daemon. */
    int flags = (opens_read_only(disk) ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    int fd = open(disk->path, flags);
    if (fd < 0) {
        set_access_error(error, disk, errno);
        return false;
    }
    struct stat st;
    bool ok = true;
    if (fstat(fd, &st) < 0) {
        set_access_error(error, disk, errno);
        ok = false;
    } else {
        ok = check_kind(disk, &st, error);
    }
    close(fd);
    return ok;
}

/* A chain's files are the daemon's (the disk directory, snapshot
 * directories): one missing lost what the disk held since that layer, and
 * no shim may start on a stand-in. The overlay comes first: it is what a
 * host's clean-up or a full disk takes, and what a revert replaces. */
static bool check_chain(const struct domain_disk *disk, GError **error)
{
    for (char **p = disk->chain; p && *p; p++) {
        bool overlay = p == disk->chain;
        int fd = open(*p, (overlay ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        struct stat st;
        int err = fd < 0 ? errno : fstat(fd, &st) < 0 ? errno : S_ISREG(st.st_mode) ? 0 : EINVAL;
        if (fd >= 0)
            close(fd);
        if (err == 0)
            continue;
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "disk '%s' cannot continue: its %s '%s' is lost (%s); revert to a snapshot "
                    "to run the disk from it, or undefine the domain", disk->target,
                    overlay ? "overlay (the blocks written since its last snapshot)"
                            : "sealed disk layer",
                    *p, err == EINVAL ? "not a regular file" : g_strerror(err));
        return false;
    }
    return true;
}

bool domain_def_check_disk_access(const struct domain_def *def, GError **error)
{
    for (size_t i = 0; i < def->n_disks; i++)
        if (!check_disk(&def->disks[i], error) || !check_chain(&def->disks[i], error))
            return false;
    return true;
}
