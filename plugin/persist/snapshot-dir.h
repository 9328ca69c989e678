/* A snapshot directory as the shim writes it for vm.snapshot: Cloud
 * Hypervisor's shape (config.json, state.json) plus vsnap's memory layer
 * (state.json's "memory": {layer, kind, id, parent_id, parent_url}, see
 * shim/persist/persist.h); vm.restore follows parent_url down to the base.
 * This file is what the daemon knows about such a directory without a VM:
 * where its layer is, which directory it names as parent, the chain below it,
 * and the offline operations on layers (chain check, fold of an inner layer
 * into its child). Errors are VSNAP_VIR_ERROR GErrors naming the directory. */
#pragma once

#include <glib.h>
#include <stdbool.h>

/* file://<dir>, as vm.snapshot and vm.restore take it. */
char *snapdir_url(const char *dir);

/* The memory layer file of dir (state.json's memory.layer). */
char *snapdir_layer_path(const char *dir, GError **error);

/* The directory dir names as parent (*parent = NULL for a full snapshot). */
bool snapdir_parent(const char *dir, char **parent, GError **error);

/* Point dir's parent record at parent (NULL: no parent), atomically. */
bool snapdir_set_parent(const char *dir, const char *parent, GError **error);

/* Directories from the base up to top (top last). */
GPtrArray *snapdir_chain(const char *top, GError **error);

/* Open the chain below top as a restore would (every header and index
 * checksum, ids and parents, sizes): a bad chain is refused before anything is
 * stopped. Page data is checked too, for each layer whose file changed since it
 * was sealed (see snapdir_seal): a layer edited or replaced on disk is read
 * whole and refused if a block fails its checksum, while an untouched one
 * costs nothing, so an on-demand revert still runs before any RAM is read.
 * (Corruption that leaves the file's inode, size and times alone is still
 * caught when the page is first served: the VM stops, no bad data runs.) */
bool snapdir_check_chain(const char *top, GError **error);

/* Record that dir's layer, as it is on disk now, holds the data its checksums
 * describe: called right after the shim wrote it. */
bool snapdir_seal(const char *dir, GError **error);

/* The layer id of dir's layer and of its parent (text, 36 characters). */
bool snapdir_layer_ids(const char *dir, char out_id[37], char out_parent[37], GError **error);

/* Fold inner's pages into child (child keeps its id and now names inner's
 * parent), then point child's record at inner's parent directory. Idempotent:
 * a child already folded only gets its record fixed. */
bool snapdir_fold_into_child(const char *inner, const char *child, GError **error);

/* Bytes of all regular files in dir (progress of a snapshot being written). */
guint64 snapdir_bytes(const char *dir);

/* rm -r of a snapshot or image directory (one level of files, as we write them). */
bool snapdir_remove(const char *dir, GError **error);
