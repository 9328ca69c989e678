/* libvirt's snapshot operations on vsnap domains: entry points the RPC layer
 * calls. Snapshots hold guest memory and device state (vm.snapshot of the
 * paused VM): the first of a domain is a full layer, later ones are diffs on
 * the current snapshot while the VM has run from it without a break. A revert
 * replaces the shim by a new one restored from the snapshot's layer chain.
 * Errors are VSNAP_VIR_ERROR GErrors with libvirt's codes. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/state.h"

/* Returns the new snapshot's name. */
/* A block commit is about to rewrite image, the base every snapshot's
 * layers of the disk sit on: each snapshot of dom is marked (durably,
 * before the image changes) with what (the commit, for messages), so that
 * reverting to it is refused naming the commit; deleting it still works.
 * Call under dom->job. */
bool snapshot_mark_disk_commit(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *what,
                               GError **error);

char *snapshot_create(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *xml,
                      unsigned flags, GError **error);
char *snapshot_get_xml(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                       unsigned flags, GError **error);
/* Names matching virDomainSnapshotListFlags, parents before children. from:
 * NULL for the domain's snapshots, else the children (or, with
 * VIR_DOMAIN_SNAPSHOT_LIST_DESCENDANTS, all descendants) of that snapshot. */
GPtrArray *snapshot_list(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *from,
                         unsigned flags, GError **error);
bool snapshot_exists(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                     GError **error);
/* Name of the current snapshot; NULL with VIR_ERR_NO_DOMAIN_SNAPSHOT when none
 * (has_current answers without an error). */
char *snapshot_current(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error);
int snapshot_has_current(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error);
int snapshot_is_current(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                        GError **error);
char *snapshot_parent(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                      GError **error);
bool snapshot_revert(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                     unsigned flags, GError **error);
bool snapshot_delete(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                     unsigned flags, GError **error);

/* Hooks for the domain driver. The number of snapshots, -1 when the
 * metadata cannot be read. */
int snapshot_count(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error);
/* Undefine: refuse while snapshots exist unless VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA,
 * which removes them (metadata and layers: one is useless without the other). */
bool snapshot_check_undefine(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                             GError **error);
void snapshot_remove_all(struct vsnap_driver *drv, struct vsnap_domain *dom);
/* Whether clones (persist/clone.h), or snapshots of clones, descend from
 * any of dom's snapshots (error says which; true, too, when the snapshots
 * cannot be read): its snapshots and disks must then stay. */
bool snapshot_has_clones(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error);
/* A start (job held, dom shut off) from dom's current snapshot, as a revert
 * to it; *started false when it has none. */
bool snapshot_start_from_current(struct vsnap_driver *drv, struct vsnap_domain *dom, bool paused, bool *started,
                                 GError **error);

/* At start-up, after recovery (persist/recovery.h): every snapshot whose push
 * a daemon's end left pending is queued again, oldest first; none of a
 * domain whose tree still holds a delete recovery could not finish. */
void snapshot_queue_pushes(struct vsnap_driver *drv, struct vsnap_domain *dom);
