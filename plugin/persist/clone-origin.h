/* A clone's origin as persist/ sees it (clone.h): the origin's snapshot
 * tree, the snapshot the clone starts from, and who descends from a
 * snapshot. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "snapshot-tree.h"
#include "domain/state.h"

struct clone_origin {
    struct snapshot_tree *tree;       /* the origin's snapshots */
    struct snapshot_entry *entry;     /* in tree: the snapshot clones start from */
};

/* The origin of def (a clone's definition): VIR_ERR_NO_DOMAIN or
 * VIR_ERR_NO_DOMAIN_SNAPSHOT naming what is missing. */
bool clone_origin_load(struct vsnap_driver *drv, const struct domain_def *def, struct clone_origin *out,
                       GError **error);
void clone_origin_clear(struct clone_origin *o);
typedef struct clone_origin clone_origin;
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(clone_origin, clone_origin_clear)

/* The base a clone's first snapshot is a diff on: the origin's snapshot,
 * when the running clone's memory descends from it (lineage.h) and the
 * clone has no current snapshot of its own. False, o untouched, otherwise. */
bool clone_diff_base(struct vsnap_driver *drv, struct vsnap_domain *dom, const struct snapshot_tree *own,
                     struct clone_origin *o);

/* Refuse (VIR_ERR_OPERATION_INVALID, naming every clone and clone snapshot
 * that descends) the removal of the snapshots `doomed` (struct
 * snapshot_entry *) of domain origin (tree: its snapshots): a clone descends
 * from a snapshot that is its origin snapshot or sits, through layer
 * parents, on it. */
bool clone_check_snapshots_unused(struct vsnap_driver *drv, struct vsnap_domain *origin,
                                  struct snapshot_tree *tree, GPtrArray *doomed, GError **error);

/* What a restore of a clone (def), from its origin's snapshot or from state
 * of its own sitting on it, reads of the origin: the directories of the
 * origin snapshot's chain, NULL-terminated (empty for a domain that is no
 * clone). Its shim has them bound read-only into its jail and writes none. */
GPtrArray *clone_origin_dirs(struct vsnap_driver *drv, const struct domain_def *def, GError **error);
