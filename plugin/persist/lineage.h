/* Lineage: which snapshot the running VM's memory descends from without a
 * break, so that the next snapshot or managed save can be a diff on it, and
 * which layers sit on a snapshot's layer, so that deleting it can fold it
 * into them. The one place that relates the running VM, the snapshot tree
 * and the managed save image; snapshot.c and save.c both ask here and never
 * each other.
 *
 *   <run_dir>/<name>/snapshot-lineage   id of that snapshot + the VM generation
 *
 * The file vanishes with the runtime directory when the domain stops. Call
 * under the domain's job lock. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "snapshot-tree.h"
#include "domain/state.h"

void lineage_set(struct vsnap_domain *dom, const char *snapshot_id);
/* The next snapshot must be full. A lineage that cannot be removed is an
 * error: left behind, it would let a diff sit on a base the VM no longer
 * descends from. */
bool lineage_clear(struct vsnap_domain *dom, GError **error);
/* The snapshot id, NULL when the VM restarted or has none. */
char *lineage_get(struct vsnap_domain *dom);

/* The snapshot of tree a diff can sit on: the current one, when the running
 * VM's memory descends from it. NULL when none. */
struct snapshot_entry *lineage_diff_base(struct vsnap_domain *dom, struct snapshot_tree *tree);
/* The same for a caller without the tree (managed save): its directory. */
char *lineage_diff_base_dir(struct vsnap_driver *drv, struct vsnap_domain *dom);

/* *child: the managed save image's directory when its layer is a diff on
 * snapshot's, else NULL. False when the image's parent cannot be read (its
 * layer may depend on snapshot's: deleting that now could break it). */
bool lineage_managed_child(struct vsnap_driver *drv, struct vsnap_domain *dom,
                           const struct snapshot_entry *snapshot, char **child, GError **error);
