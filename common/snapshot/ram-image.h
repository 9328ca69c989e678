/* A snapshot's shared RAM image: one flattened, sparse file of its chain
 * beside the snapshot, which restore by sharing maps privately
 * (shim/ram-snapshot/restore-shared.c), so that every VM restored from the
 * snapshot on this host reads the same page cache.
 *
 * The image is built once per snapshot and boot: in an unnamed file
 * (O_TMPFILE) beside the snapshot, data runs written at their offsets, zero
 * runs left as holes (so it costs what the snapshot holds), then given its
 * name. Its name carries the top layer's id and the host's boot id: the image
 * is not synced (that would cost the whole write at disk speed), so after a
 * host crash it may be torn, and an image of an earlier boot is never used
 * (and is removed by the next build). Two builds at once both build; the
 * second to name its image uses the first's.
 *
 * Whoever may write the snapshot directory builds it: the shim restoring its
 * own domain's snapshot, or the daemon for clones, whose shims see their
 * origin's snapshot read-only (plugin/persist/include/persist/clone.h). */
#pragma once

#include <glib.h>

#include "snapshot/layer.h"

struct snap_chain;

/* A read-only descriptor of the image of chain c (top: its top layer's id)
 * in dir, built first when there is none of this boot; -1 with error (the
 * chain has no base, dir cannot be written, a layer cannot be read). path,
 * when not NULL, receives the image's path. */
int snap_ram_image_get(struct snap_chain *c, const char *dir, const snap_id *top, char **path, GError **error);
