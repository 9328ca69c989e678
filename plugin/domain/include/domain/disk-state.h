/* Where a domain's disks are between runs. Once a disk has snapshots it is
 * a chain (the image, sealed disk layers in snapshot directories, an active
 * overlay); the daemon records each disk's current chain and overlay, as
 * the shim reports them, so that the next start of a shut-off domain (a
 * boot after a shutdown, a host restart) continues exactly where the guest
 * left its disks. Everything lives in the domain's disk directory:
 *
 *   <state_dir>/disks/<name>/          0700, the shims' vsnap_work_dir
 *   <state_dir>/disks/<name>/chains    key file, one group per disk target:
 *                                      image=, layers= (base first), overlay=
 *   <state_dir>/disks/<name>/VDX-*.overlay  the shims' active overlays
 *   <state_dir>/disks/<name>/saved-*   save and managed save snapshot files
 *                                      whose disk layers chains use
 *   <state_dir>/disks/<name>/kept-<id> a deleted snapshot's directory whose
 *                                      disk layer the disks ran on: an unnamed
 *                                      part of the chains, no snapshot's, until
 *                                      a fold into the layer above removes it
 *                                      (persist/snapshot-disks.c)
 *
 * Functions take no locks; callers hold the domain's job. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "conf/domain-conf.h"

/* <state_dir>/disks/<name>. */
char *disk_state_dir(const char *state_dir, const char *name);
/* Create it (0700) with its parents. */
bool disk_state_make_dir(const char *dir, GError **error);

/* Set on def's disks the chains recorded for them (disks whose recorded image
 * is not def's image any more keep none: the chain belongs to that image).
 * Every other disk gets no chain. */
bool disk_state_load(const char *dir, struct domain_def *def, GError **error);
/* Record def's disk chains (durably; no chain at all removes the record). */
bool disk_state_save(const char *dir, const struct domain_def *def, GError **error);
/* Whether any disk of the record has a chain. */
bool disk_state_has_chain(const char *dir);
/* Remove the overlays in dir that the chains of def no longer use (what a
 * revert or restore left of the run before). saved-* directories stay: their
 * disk layers are the parents of snapshots taken on them; they go with the
 * whole directory (a fold into the images, an undefine). */
void disk_state_collect(const char *dir, const struct domain_def *def);
/* A new <dir>/saved-<uuid> path (not created): where a save's or a managed
 * save's snapshot files live while a chain uses their disk layers. */
char *disk_state_new_saved_dir(const char *dir);
/* Where a deleted snapshot's directory snapshot_dir is kept while the disks
 * run on its layer: <dir>/kept-<its base name> (a snapshot directory is
 * named by the snapshot's id, so the name is the delete's own and a crash
 * after the move finds it again). */
char *disk_state_kept_dir(const char *dir, const char *snapshot_dir);
/* The kept-* (kept) or saved-* directories in dir, as paths. */
GPtrArray *disk_state_list(const char *dir, bool kept);
/* For a layer path in a snapshot directory: the same file in that
 * directory's kept-* place in dir when it is there (the snapshot was deleted
 * and its layer kept), else NULL. */
char *disk_state_kept_path(const char *dir, const char *layer);
/* A snapshot directory the chains use moved from `from` to `to`: def's
 * chains and the record follow. */
bool disk_state_relocate(const char *dir, struct domain_def *def, const char *from, const char *to,
                         GError **error);
/* The layers in snapshot_dir left def's chains (folded into a child's); the
 * record follows. */
bool disk_state_drop_layers(const char *dir, struct domain_def *def, const char *snapshot_dir,
                            GError **error);
/* dir holds nothing but overlays no record names (or nothing): what a start
 * that never finished left (the daemon killed before the shim's restore
 * was recorded), which nothing can use. */
bool disk_state_holds_only_unrecorded(const char *dir);
/* rm -r dir. */
bool disk_state_remove(const char *dir, GError **error);

/* Fold each chain of def (and its overlay) back into its image, so that the
 * image holds exactly what the disk holds, crash-safely; refused
 * (VIR_ERR_OPERATION_INVALID) for a clone, whose images are its origin's base
 * (snap_disk_fold_into_image: an intent beside the image, redone by the
 * next fold of that image if a crash cut this one short). */
bool disk_state_fold_into_images(const struct domain_def *def, GError **error);
/* The domain's disks go back to being their images: the recorded chains
 * folded into them, then dir removed. Nothing to do without a record. For a
 * domain that ceases to exist (undefined, a transient one that stopped);
 * call before its snapshots' directories go. A clone's record and overlays
 * are only removed: what it wrote goes with it. */
bool disk_state_release(const char *dir, const struct domain_def *def, GError **error);

/* An active commit's pivot (blockcommit --active --pivot) writes disk
 * target's overlay into its image while the shim runs: the intent
 * (<dir>/pivot-<target>) is written durably first and removed once the
 * disk record says the disk is its image alone. A pivot a crash cut short
 * is finished before the next boot (disk_state_finish_pivots): the overlay
 * (over the image alone after the commit's pull) is folded into the image,
 * whose identity is no longer the one the overlay recorded, and the disk
 * writes its image directly again. */
bool disk_state_begin_pivot(const char *dir, const char *target, GError **error);
void disk_state_end_pivot(const char *dir, const char *target);
bool disk_state_finish_pivots(const char *dir, struct domain_def *def, GError **error);
