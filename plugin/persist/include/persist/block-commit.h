/* virsh blockcommit of an inner range of a running disk's chain (--top a
 * sealed layer, --base a layer below it or the image): the layers above
 * base up to top are folded into top's child, the sealed layer above top
 * (snap_dir_fold_disk_into_child, as snapshot-delete folds an inner
 * snapshot), and leave the disk's chain (the shim is told, then the live
 * definition and the disk record follow). The layers' own files stay in
 * their snapshots, which still revert. Synchronous: a fold costs what the
 * folded layers hold. */
#pragma once

#include <glib.h>
#include <stdbool.h>

struct vsnap_driver;
struct vsnap_domain;

/* Call under dom->job, dom running. base NULL: the image; shallow: top's
 * own parent. VIR_ERR_INVALID_ARG naming a top or base not in the chain,
 * VIR_ERR_CONFIG_UNSUPPORTED for a range vsnap cannot fold (top the chain's
 * top layer: its child is the overlay, which blockcommit --active and
 * blockpull fold into; a domain with another disk on layers). */
bool block_commit_inner(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *target, const char *top,
                        const char *base, bool shallow, GError **error);
