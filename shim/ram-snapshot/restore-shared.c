/* Restore by sharing: guest RAM is a private (copy-on-write) mapping of one
 * flattened image of the chain (the snapshot library's, snapshot/ram-image.h:
 * a sparse file beside the snapshot, built once per snapshot and boot), so
 * every VM restored from the snapshot on this host reads the same page cache
 * and holds of its own only what it writes (ram-snapshot/restore.h). */
#include "ram-snapshot/restore.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "snapshot/ram-image.h"

bool snap_restore_shared(struct snap_chain *c, const char *dir, const snap_id *top, struct snap_merged_ram *out,
                         GError **error)
{
    *out = (struct snap_merged_ram){ .fd = -1 };
    int fd = snap_ram_image_get(c, dir, top, NULL, error);
    if (fd < 0)
        return false;
    void *p = mmap(NULL, c->ram_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO, "cannot map the RAM image of %s: %s", dir, g_strerror(e));
        return false;
    }
    *out = (struct snap_merged_ram){ .host = p, .size = c->ram_size, .fd = fd };
    return true;
}
