/* What a job of persist/ calls when it finds a leftover of its own domain
 * (persist/recovery.h has the whole of recovery). Under the job lock. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/state.h"
#include "snapshot-tree.h"

/* Remove the directories of unrecorded snapshots no disk runs on, then
 * finish every delete of tree that is marked `deleting`
 * (snapshot-remove.h), newest first, each logged; true when none is left.
 * Errors are the delete's own, naming the snapshot. */
bool recovery_finish_leftovers(struct vsnap_driver *drv, struct vsnap_domain *dom,
                               struct snapshot_tree *tree, GError **error);
