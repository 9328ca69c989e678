/* A snapshot directory: what vm.snapshot writes and vm.restore reads. This is
 * the only code that knows its layout and the part of state.json anyone but
 * the shim reads or writes (the memory record); the shim's vCPU and device
 * state inside state.json stay the shim's. See README.md for the format.
 *
 *   <dir>/config.json          the VM's configuration (the shim's VmConfig)
 *   <dir>/state.json           {"vsnap_state_version": 2,
 *                               "memory": {"layer", "kind", "id", "parent_id",
 *                                          "parent_url", "ram_size"},
 *                               ...the shim's own members,
 *                               "config": {"file": "config.json", "sha256"},
 *                               "state_sha256": the file's own SHA-256}
 *   <dir>/memory-ranges        the memory layer (snapshot/layer.h)
 *   <dir>/memory-ranges.seal   the layer file as it was when last verified
 *                              (optional: snap_dir_seal)
 *   <dir>/store-origin         the snapshot came from a snapshot store: the
 *                              pull wrote it (snap_dir_mark_from_store)
 *   .<name>.partial-XXXXXX     beside <dir>, while a snapshot is written
 *
 * A snapshot is written into a directory that does not exist yet, an empty
 * one, or one another program prepared: regular files that are none of the
 * snapshot's own (libvirt's ch driver writes libvirt-save.xml first). Those
 * files are kept; an existing snapshot is never overwritten.
 *
 * A diff names its parent twice: where its directory is (parent_url) and
 * which snapshot it must be (parent_id, the parent's memory.id and the id the
 * diff's layer names as parent). The files are bound to each other: the layer
 * by its id (memory.id), config.json by its SHA-256 in state.json, state.json
 * by its own, so a file swapped in from another snapshot or damaged on disk is
 * refused by name before anything uses it. Reading checks the format version,
 * every member of the records, both checksums and the ids; the chain
 * functions check that records and layers agree. Errors are SNAP_ERROR GErrors naming the
 * directory: SNAP_ERROR_FORMAT for a state.json that is wrong or missing,
 * SNAP_ERROR_CHAIN for parents that do not match, SNAP_ERROR_IO and
 * SNAP_ERROR_NO_SPACE when the file system fails. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "snapshot/chain.h"

#define SNAP_DIR_CONFIG_FILE "config.json"
#define SNAP_DIR_STATE_FILE "state.json"
#define SNAP_DIR_LAYER_FILE "memory-ranges"
#define SNAP_DIR_SEAL_SUFFIX ".seal"
#define SNAP_DIR_STORE_ORIGIN_FILE "store-origin"
#define SNAP_STATE_VERSION 2
#define SNAP_STATE_DIGEST_MEMBER "state_sha256"
/* Larger files are refused unread: the shim writes a few hundred KiB. */
#define SNAP_STATE_MAX_BYTES (64u << 20)
#define SNAP_CONFIG_MAX_BYTES (16u << 20)

/* state.json's "memory". */
struct snap_memory_record {
    char *layer;        /* file name of the memory layer inside the directory */
    bool diff;          /* "kind": "diff", else "full" */
    snap_id id;         /* the layer's id (never nil) */
    snap_id parent_id;  /* diff: the parent snapshot's id */
    char *parent_url;   /* diff: file:// URL of the parent's directory */
    uint64_t ram_size;  /* bytes of guest RAM the layer covers */
};

void snap_memory_record_clear(struct snap_memory_record *record);

/* The one writer of the record: adds "vsnap_state_version" and "memory" to
 * the object b is building (state.json's root). */
void snap_state_add_record(JsonBuilder *b, const struct snap_memory_record *record);

/* The one writer of state.json and config.json: config_text into
 * dir/config.json, then state (the root the record was added to, with the
 * shim's members) into dir/state.json with "config" (config.json's SHA-256)
 * and "state_sha256" added; each durably (snap_dir_write_file). */
bool snap_dir_write_state(const char *dir, JsonNode *state, const char *config_text, GError **error);

/* One snapshot directory, its state.json read and its memory record checked. */
struct snap_dir {
    char *path;
    char *layer_path;    /* path / memory.layer */
    char *parent_path;   /* diff: the directory parent_url names; else NULL */
    struct snap_memory_record memory;
    char config_sha256[65];   /* config.json's, as state.json records it (and it is) */
    JsonNode *state;     /* all of state.json, the shim's members included */
};

/* The one parser of the records: the version, "memory" and "config", then
 * state.json's own checksum and config.json's (SNAP_ERROR_CHECKSUM naming
 * the file that does not match). */
struct snap_dir *snap_dir_read(const char *path, GError **error);
void snap_dir_free(struct snap_dir *dir);
typedef struct snap_dir snap_dir; /* for g_autoptr */
G_DEFINE_AUTOPTR_CLEANUP_FUNC(snap_dir, snap_dir_free)

/* Point dir's record at parent (NULL: a full snapshot, no parent) and keep
 * every other member of state.json as it was; atomic replace. Refused unless
 * dir's layer names exactly that parent (after a fold, see below). */
bool snap_dir_set_parent(const char *dir, const char *parent, GError **error);

/* file:// URL of a directory, as state.json, vm.snapshot and vm.restore use. */
char *snap_dir_url(const char *path);
/* The absolute path a file:// URL (or an absolute path) names, without
 * trailing slashes; SNAP_ERROR_INVALID for anything else. */
char *snap_dir_path_from_url(const char *url, GError **error);

/* ---- chains of snapshot directories ---- */

/* Follow parent_url from top down to the base, each parent's id checked
 * against the child's parent_id, then open the layers base first
 * (snap_chain_open: headers, indexes, ids, sizes) and check that each
 * directory's record matches its layer (id, parent, RAM size). */
struct snap_chain *snap_dir_open_chain(const struct snap_dir *top, GError **error);

/* Record that dir's layer, as it is on disk now, holds the data its
 * checksums describe: call right after the layer was written. */
bool snap_dir_seal(const char *dir, GError **error);

/* snap_dir_open_chain, then every data block of each layer whose file changed
 * since its seal (edited, replaced or never sealed): a damaged layer is
 * refused before anything uses it, while an untouched one costs nothing.
 * Corruption that leaves the file's inode, size and times alone is still
 * caught when a block is first read. */
bool snap_dir_verify_chain(const struct snap_dir *top, GError **error);

/* Fold inner's pages into child, its diff (snap_compact_fold: child keeps its
 * id and now names inner's parent), then point child's record at inner's
 * parent directory, and fold the disk layers the same way
 * (snap_dir_fold_disks_into_child, snapshot/disk.h). Idempotent: a child
 * whose layer was folded already only gets its record fixed. Afterwards
 * child no longer needs inner. */
bool snap_dir_fold_into_child(const char *inner, const char *child, GError **error);

/* ---- writing a snapshot directory ---- */

/* Whether a file named name belongs to the snapshot itself (the files above
 * and the temporary names they are written under). */
bool snap_dir_is_snapshot_file(const char *name);

/* ---- snapshots from a store ----
 *
 * A store is untrusted input: whoever writes to it chose every byte of the
 * config.json and state.json a pull brings in. A pull marks what it made
 * (store-origin, holding the store's URL and the manifest id, written into
 * the partial directory so the snapshot never appears without it); a
 * restore of a marked snapshot takes none of the host paths its config.json
 * names (disks, serial and console files, sockets, the kernel, taps) from
 * it, only from its caller. The mark never travels to a store and a pulled
 * manifest may not name it. The parent directories in state.json (memory
 * and disk layers) are set by the pull itself to directories it pulled or
 * its caller keeps. */

/* Mark dir (a pull's partial directory) as come from a store; origin says
 * which (the store's URL and the manifest id, one line). */
bool snap_dir_mark_from_store(const char *dir, const char *origin, GError **error);

/* Whether dir holds the mark; an error looking (other than its absence)
 * counts as marked. */
bool snap_dir_is_from_store(const char *dir);

/* Whether a snapshot may be written to dest: dest does not exist (but its
 * parent directory does), or is a
 * directory holding only regular files that are not snapshot files.
 * SNAP_ERROR_INVALID naming the obstacle otherwise. */
bool snap_dir_check_destination(const char *dest, GError **error);

/* Create the partial directory a snapshot for dest is written into
 * (".<name>.partial-XXXXXX" beside dest). SNAP_ERROR_INVALID if dest's parent
 * directory does not exist. */
char *snap_dir_create_partial(const char *dest, GError **error);

/* Write text to dir/name durably (temporary name, fsync, rename). */
bool snap_dir_write_file(const char *dir, const char *name, const char *text, GError **error);

/* Make the partial directory dest, atomically: a reader of dest sees the
 * whole snapshot or none of it. dest must pass snap_dir_check_destination.
 * Absent or empty, the partial directory is renamed over it; holding foreign
 * files, those are linked (or copied) into the partial directory, which then
 * trades places with dest (RENAME_EXCHANGE), and the old directory goes.
 * Everything is fsynced, dest's parent last. */
bool snap_dir_commit(const char *partial, const char *dest, GError **error);

/* Bytes of the regular files in dir and in its partial directories: the
 * progress of a snapshot being written. */
guint64 snap_dir_bytes(const char *dir);

/* Remove the partial directories of snapshots for dest that writers which
 * died left behind (call only when no writer for dest runs). */
bool snap_dir_remove_partials(const char *dest, GError **error);

/* Remove dir and everything in it (rm -r). A missing dir is not an error. */
bool snap_dir_remove(const char *dir, GError **error);
