/* What a revert to a snapshot starts and what it records once the
 * snapshot's VM runs: the steps that the revert (snapshot.c) and the finish
 * of a revert a daemon's end cut short (persist/recovery.c) share. Call
 * under the domain's job lock. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "domain/state.h"
#include "restore.h"
#include "snapshot-tree.h"

/* The definition saved with e and the request that starts its VM (running
 * or paused, as flags and e's state say). Everything that can be checked is,
 * before the domain is touched: the definition is this domain's, e's layer
 * chain verifies, each disk's base image is the one its chain was taken on.
 * *def is the caller's (domain_def_free), and req points into it and e. */
bool snapshot_revert_request(struct vsnap_driver *drv, struct vsnap_domain *dom,
                             struct snapshot_entry *e, unsigned flags, struct domain_def **def,
                             struct restore_request *req, GError **error);

/* e's VM runs: it is the domain's current snapshot and the VM's lineage,
 * and the revert's intent goes. */
bool snapshot_revert_recorded(struct snapshot_tree *tree, struct vsnap_domain *dom,
                              struct snapshot_entry *e, GError **error);

/* The pid of the domain's shim, 0 when it runs none. */
pid_t snapshot_revert_shim_pid(struct vsnap_domain *dom);
