/* A live snapshot's scratch image (shim/persist/live-snapshot.c): a file as
 * large as guest RAM, each page at its own RAM offset, into which the pages
 * of guest RAM are copied while the guest runs, pass after pass, a page
 * copied again overwriting its older copy. Once the last pass (with the
 * vCPUs stopped) is in, it holds RAM at that one instant, and the layer is
 * written from it (snap_save_full / snap_save_diff on snap_scratch_ram)
 * while the guest runs on. It has no name (a memfd, or O_TMPFILE), so it is
 * gone with its descriptor, also when the process dies. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "ram-snapshot/save.h"

struct snap_scratch;

/* In memory (dir NULL: a memfd, so the copies never wait for a disk) or in
 * directory dir (the partial snapshot directory: the same file system as the
 * layer); errors SNAP_ERROR_IO / SNAP_ERROR_NO_SPACE name where. */
struct snap_scratch *snap_scratch_new(const char *dir, uint64_t ram_size, GError **error);
void snap_scratch_free(struct snap_scratch *s);

/* Copy the pages of bitmap (snap_dirty_bitmap layout) from ram into the
 * scratch image; *pages (may be NULL) gets how many. */
bool snap_scratch_copy(struct snap_scratch *s, const struct snap_ram *ram, const uint64_t *bitmap, uint64_t *pages,
                       GError **error);
/* The same for the pages from first up to end (exclusive) only: a pass
 * copied in steps, so that it can stop between two. */
bool snap_scratch_copy_range(struct snap_scratch *s, const struct snap_ram *ram, const uint64_t *bitmap,
                             uint64_t first, uint64_t end, uint64_t *pages, GError **error);


/* The scratch image as RAM to write a layer from (mapped read-only on the
 * first call; valid until snap_scratch_free). */
bool snap_scratch_ram(struct snap_scratch *s, struct snap_ram *out, GError **error);
