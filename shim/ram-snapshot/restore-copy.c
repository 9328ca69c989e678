/* Restore by copy: walk RAM through the page index, copy each run of pages that
 * comes from one layer, checking its data blocks first (the walk,
 * snap_chain_each_data_run, is the snapshot library's: the shared RAM image
 * is built with it too). */
#include "ram-snapshot/restore.h"

#include "snapshot/mapped-read.h"

static bool copy_run(void *dest, struct snap_layer *l, uint64_t page, uint64_t n, const uint8_t *src,
                     GError **error)
{
    if (snap_mapped_copy((uint8_t *)dest + page * SNAP_PAGE_SIZE, src, n * SNAP_PAGE_SIZE))
        return true;
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT,
                "snapshot layer %s: cannot be read: the file is shorter than when it was "
                "opened (truncated while in use) or its storage failed", l->path);
    return false;
}

bool snap_restore_copy(struct snap_chain *c, uint8_t *dest, uint64_t size, GError **error)
{
    if (c->partial || size != c->ram_size) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                    "restore by copy: RAM of %" G_GUINT64_FORMAT " bytes does not match the "
                    "snapshot's %" G_GUINT64_FORMAT " (or the chain has no base)", size, c->ram_size);
        return false;
    }
    return snap_chain_each_data_run(c, copy_run, dest, error);
}
