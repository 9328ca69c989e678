/* The steps of deleting one snapshot of a domain: its disks' part, the fold
 * of its layer into the layers that are diffs on it, its children's new
 * parent, and its directory. A step whose crash in the middle would leave a
 * chain half folded marks the snapshot `deleting` first (snapshot-tree.h), so
 * that what was cut short is finished later by the same steps: snapshot.c's
 * delete takes them, and so does persist/recovery.c for a delete that a
 * crash or an error cut short. Call under the domain's job lock. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/state.h"
#include "snapshot-tree.h"

/* Remove gone, whose own descendants are handled already (a snapshot marked
 * `deleting` is finished). Refusals come before anything changed; their
 * messages name the snapshot. */
bool snapshot_remove_one(struct vsnap_driver *drv, struct vsnap_domain *dom,
                         struct snapshot_tree *tree, struct snapshot_entry *gone, GError **error);
