/* The daemon's view of a snapshot directory (the shim writes them for
 * vm.snapshot): the snapshot library (common/snapshot/directory.h) owns the
 * format, and this file only hands its operations to the daemon with errors
 * in VSNAP_VIR_ERROR (the library's message, which names the directory). */
#pragma once

#include <glib.h>
#include <stdbool.h>

/* file://<dir>, as vm.snapshot and vm.restore take it. */
char *snapdir_url(const char *dir);

/* The directory dir names as parent (*parent = NULL for a full snapshot). */
bool snapdir_parent(const char *dir, char **parent, GError **error);

/* The id of dir's memory layer (state.json's memory.id, the layer's own). */
char *snapdir_layer_id(const char *dir, GError **error);

/* The sealed disk layer of disk disk_id (its target) in dir, as a path:
 * NULL with no error when dir holds no layer for that disk (a read-only
 * disk, or a snapshot taken before disks had layers). */
char *snapdir_disk_layer(const char *dir, const char *disk_id, GError **error);

/* Open and verify the chain below top as a restore would, before anything is
 * stopped (snap_dir_read: state.json's records and its and config.json's
 * checksums; snap_dir_verify_chain: headers, indexes, ids, and the data of
 * each layer that changed since its seal). With expected_id, top must still
 * be the snapshot of that layer id (its files not replaced by another's). */
bool snapdir_check_chain(const char *top, const char *expected_id, GError **error);

/* Build the shared RAM image of dir's chain beside it when there is none of
 * this boot (snapshot/ram-image.h), for shims that see dir read-only (a
 * clone's); *path: the image. */
bool snapdir_build_ram_image(const char *dir, char **path, GError **error);

/* Record that dir's layer, as it is on disk now, is the one the shim just
 * wrote (snap_dir_seal). */
bool snapdir_seal(const char *dir, GError **error);

/* Fold inner into child, its diff, and point child's record at inner's
 * parent (snap_dir_fold_into_child; idempotent). */
bool snapdir_fold_into_child(const char *inner, const char *child, GError **error);

/* Fold inner's disk layers into child's that were taken on them (for a
 * child whose memory layer is not a diff on inner's: its disks still are;
 * snap_dir_fold_disks_into_child, idempotent). */
bool snapdir_fold_disks_into_child(const char *inner, const char *child, GError **error);

/* Whether a disk layer of dir's snapshot was taken on one in parent (its
 * record's parent_url). */
bool snapdir_disks_sit_on(const char *dir, const char *parent, bool *sits, GError **error);

/* Bytes written so far of a snapshot being written into dir. */
guint64 snapdir_bytes(const char *dir);

/* rm -r of a snapshot or image directory. */
bool snapdir_remove(const char *dir, GError **error);
/* The same, and the partial directories a shim that died while writing a
 * snapshot for dir left beside it. */
bool snapdir_remove_with_partials(const char *dir, GError **error);

struct domain_def;
/* Every writable disk of def that dir's snapshot holds a layer of: its
 * chain resolves and its base image is at the path def names and is the
 * one the chain was taken on (size, mtime, CRC-32C of its ends: a `cp -a`
 * copy matches), VIR_ERR_OPERATION_FAILED naming the disk and the image
 * otherwise. For a revert, before anything stops. */
bool snapdir_check_disks(const char *dir, const struct domain_def *def, GError **error);

/* A snapshot directory that came from a store: its memory record names
 * parent's directory, and its disk records the directories of its memory
 * chain here that hold their parent layers (snap_dir_relink_disk_parents). */
bool snapdir_adopt_parent(const char *dir, const char *parent, GError **error);
