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

bool domain_def_check_disk_access(const struct domain_def *def, GError **error)
{
    for (size_t i = 0; i < def->n_disks; i++)
        if (!check_disk(&def->disks[i], error))
            return false;
    return true;
}
