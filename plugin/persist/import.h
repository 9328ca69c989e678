/* Snapshots whose files are in a snapshot store, not here: a snapshot
 * redefined from another host's XML (its <cookie> names the store and the
 * manifest) has metadata only until a revert imports it. The import pulls
 * through the host's store cache (store_pull: a cached layer costs neither
 * download nor decompression; the directory's layers are hard links to the
 * cached files, so evicting them from the cache later leaves the snapshot
 * whole) into the snapshot's own directory, the layer parents it needs
 * first, each into its own snapshot's directory, and points each at its
 * parent there: the result is the same tree of directories a snapshot taken
 * here makes, which diffs, reverts and deletes then use as they are. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "snapshot-tree.h"
#include "domain/state.h"

/* The snapshot's own files are here. */
bool import_is_local(const struct snapshot_entry *e);

/* Make e local (and the layer parents it needs). Under the job lock; the
 * domain is not touched. VIR_ERR_OPERATION_FAILED naming the snapshot and
 * the store otherwise; a failed pull leaves the directory as it was.
 * pull_job_cancel (domjobabort, destroy) stops it: VIR_ERR_OPERATION_ABORTED,
 * the same way out. */
bool import_snapshot(struct vsnap_driver *drv, struct snapshot_tree *tree,
                     struct snapshot_entry *e, GError **error);
