/* The <disks> of vsnap's snapshot XML (libvirt's external model, see
 * conf/snapshot-conf.h): what a snapshot holds of each disk, read from its
 * directory, and what a request may say about them. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "conf/snapshot-conf.h"

/* out->disks for the snapshot in dir of a domain defined as domain: each
 * disk's sealed layer there (external), or 'no' when the snapshot holds none
 * (read-only disks). Nothing for a domain without disks. A directory that
 * cannot be read shows the disk external without a file (and is logged):
 * listing snapshots must not fail on one damaged snapshot, which reverting
 * refuses by name. */
void snapshot_disks_fill(const char *dir, const struct domain_def *domain, struct snapshot_def *out);

/* A create request's <disks> (snapshot-create-as --diskspec): vsnap layers
 * every writable disk itself, so each named disk must be one of the domain's,
 * 'external' without a file for a writable disk and 'no' for a read-only
 * one. VIR_ERR_CONFIG_UNSUPPORTED (or VIR_ERR_INVALID_ARG for an unknown disk)
 * naming the disk otherwise. */
bool snapshot_disks_check_request(const struct snapshot_def *request, const struct domain_def *domain,
                                  GError **error);

/* A redefinition's <disks>, if given, must be the snapshot's own (stored). */
bool snapshot_disks_check_same(const struct snapshot_def *given, const struct snapshot_def *stored,
                               GError **error);

struct vsnap_driver;
struct vsnap_domain;

/* The disks' part of deleting the snapshot in gone_dir, before its
 * directory goes (call under dom->job). child_dirs: the directories of its
 * child snapshots; last: it is the domain's only snapshot.
 * - Each child's disk layers taken on gone's take gone's blocks (and so does
 *   a save's or managed save's layer the domain's disks run on).
 * - The last snapshot of a shut-off domain without a managed save image:
 *   each disk's whole chain and overlay are folded back into its image,
 *   which afterwards holds exactly what the guest last wrote, and the
 *   domain's disks write their images directly again.
 * - Otherwise, when the domain's disks run on gone's layer with nothing
 *   above it to fold it into (as QEMU lets an external snapshot's metadata
 *   go while its overlay stays in use), *keeps: the caller finishes the
 *   snapshot's metadata, then moves its directory into the domain's disk
 *   directory with snapshot_disks_keep_layer.
 * - Else gone's layers leave the domain's chains (live XML, disk record). */
/* Every file the domain's disks run on now (chains and overlays of the
 * running VM, or the recorded ones). */
GPtrArray *snapshot_disks_in_use(struct vsnap_driver *drv, struct vsnap_domain *dom);

/* What snapshot_disks_delete would do (*keeps), changing nothing. */
bool snapshot_disks_check_delete(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *gone_dir,
                                 bool *keeps, GError **error);
bool snapshot_disks_delete(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *gone_dir,
                           GPtrArray *child_dirs, bool last, bool *keeps, GError **error);

/* The deleted snapshot's directory gone_dir becomes <disk dir>/kept-<id>
 * (domain/disk-state.h): renamed there (the step that deletes the snapshot,
 * whose metadata files go from it), then the chains follow: the running
 * VM's shim is told (vm.move-disk-layers) and its live XML and the disk
 * record name the new place. Redone from the start after a crash. */
bool snapshot_disks_keep_layer(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *gone_dir,
                               GError **error);
/* Recovery: chains still naming a kept directory's old place (a daemon
 * killed between the rename and telling the shim) follow it now. */
bool snapshot_disks_finish_moves(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error);

struct snapshot_tree;
/* Kept directories the disks no longer run on directly are folded into
 * every snapshot, save or managed save image whose disk layers were taken on
 * them (snapdir_fold_disks_into_child), leave the chains and are removed; one
 * no chain and nothing else uses just goes. After a snapshot is taken (its
 * layer is then the one above), a revert, and in recovery. */
bool snapshot_disks_fold_kept(struct vsnap_driver *drv, struct vsnap_domain *dom, struct snapshot_tree *tree,
                              GError **error);
