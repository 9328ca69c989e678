/* Disk layers: what a snapshot holds of each disk (README.md, "Disk layers").
 *
 * At a VM's first snapshot a disk's image becomes the read-only base of a
 * chain and its identity (disk-identity.h) is recorded; every snapshot holds
 * one sealed disk layer per writable disk, "disk-<id>.layer" beside the
 * memory layer (the layer container of layer.h with SNAP_LAYER_FLAG_DISK: a
 * "page" is a 4 KiB block), naming the disk layer it was taken on as parent
 * (nil for the first, empty one over the image). A running disk writes into
 * an active overlay (overlay.h) over the chain.
 *
 * In state.json, each element of "devices.disks" (the shim's, with its "id")
 * carries the library's two members:
 *   "layer": {"file", "id", "parent" (null for the first), "parent_url"
 *             (the directory holding the parent; null for the first), "blocks"}
 *   "base":  {"path", "size", "mtime_ns", "crc32c" (8 hex digits)}
 * A disk's chain is its layer and, following parent_url, its parents' down to
 * the first, each parent's id checked; the chain is independent of the memory
 * chain (a full memory snapshot still has a disk parent). */
#pragma once

#include <json-glib/json-glib.h>

#include "snapshot/chain.h"
#include "snapshot/directory.h"
#include "snapshot/disk-identity.h"

#define SNAP_DISK_LAYER_PREFIX "disk-"
#define SNAP_DISK_LAYER_SUFFIX ".layer"
/* Beside the image while a fold into it is under way (snap_disk_fold_into_image). */
#define SNAP_DISK_FOLD_SUFFIX ".vsnap-fold"

/* "disk-<id>.layer", the id percent-escaped so that it is one file name. */
char *snap_disk_layer_name(const char *disk_id);
/* The size of a disk layer for a disk of capacity bytes: rounded up to 4 KiB. */
uint64_t snap_disk_layer_size(uint64_t capacity);

struct snap_disk_record {
    char *file;          /* the layer's file name in the snapshot directory */
    snap_id id;          /* the layer's id (never nil) */
    snap_id parent;      /* nil: the first layer, straight over the base image */
    char *parent_url;    /* non-nil parent: file:// URL of the directory holding it */
    uint64_t blocks;     /* blocks the layer holds (data and zero) */
    char *base_path;     /* the base image */
    struct snap_disk_identity base;
};

void snap_disk_record_clear(struct snap_disk_record *r);
/* Set "layer" and "base" on disk, an element of state.json's devices.disks. */
void snap_disk_record_set(JsonObject *disk, const struct snap_disk_record *r);
/* The record of disk `disk_id` in directory d's state.json. *present is false
 * (and true returned) when the snapshot holds no layer for it (a read-only
 * disk, or a snapshot without disk layers). Errors name the directory. */
bool snap_dir_disk_record(const struct snap_dir *d, const char *disk_id, struct snap_disk_record *r,
                          bool *present, GError **error);

/* One disk's chain as a snapshot directory describes it. */
struct snap_disk_chain {
    char *disk_id;
    char **paths;        /* layer files, base first, NULL-terminated */
    unsigned nlayers;
    snap_id top_id;      /* the top layer's id: what an overlay on the chain names */
    char *base_path;     /* the image, as recorded */
    struct snap_disk_identity base;
};

void snap_disk_chain_free(struct snap_disk_chain *c);
typedef struct snap_disk_chain snap_disk_chain; /* for g_autoptr */
G_DEFINE_AUTOPTR_CLEANUP_FUNC(snap_disk_chain, snap_disk_chain_free)

/* Resolve disk disk_id's chain below top: its record, then parent_url down to
 * the first layer, each parent's record id the child's parent and every
 * record naming the same base. NULL with *present false (no error) when top
 * holds no layer for the disk. */
struct snap_disk_chain *snap_dir_disk_chain(const struct snap_dir *top, const char *disk_id, bool *present,
                                            GError **error);

/* The directories d's disks' parent layers are in (their parent_url), each
 * once; an empty array for a snapshot whose disks start at their images. */
GPtrArray *snap_dir_disk_parent_dirs(const struct snap_dir *d, GError **error);

/* A snapshot moved to this host (a store's pull) names its disks' parent
 * layers by the directories that held them on its own host. Point each
 * disk's parent_url at the directory that holds that very layer here: one
 * of dir's memory chain (its parent, its parent's parent, ...), else one of
 * the directories in also (NULL or NULL-terminated; each searched with its
 * own memory chain: where a full snapshot's disks continue). A disk whose
 * parent is in none of them keeps its parent_url, unless require_found
 * (a pull: the URL is the store's, and names a directory of this host it
 * chose), which makes that SNAP_ERROR_CHAIN naming the disk. Atomic replace
 * of state.json, written only when something changed. */
bool snap_dir_relink_disk_parents(const char *dir, const char *const *also, bool require_found, GError **error);

/* Open disk layers as a chain: every one a disk layer, the first without a
 * parent, each naming the one before, one size (SNAP_ERROR_CHAIN naming the
 * file otherwise). For the shim's chain backend and the folds. */
struct snap_chain *snap_disk_chain_open(const char *const *paths, unsigned n, GError **error);

/* image (the disk's path now) still the base recorded, then the chain's
 * layers open and pinned to the records (the top's id; each layer naming the
 * one below, the first none) and covering capacity bytes (0: the recorded
 * base size, in whole sectors). Before any vCPU runs. */
bool snap_disk_chain_verify(const struct snap_disk_chain *c, const char *image, uint64_t capacity, GError **error);

/* libvirt's delete of inner snapshot: each disk layer of child taken on
 * inner's is rewritten to hold both (same id, naming inner's parent) and
 * child's record follows. Idempotent, like snap_dir_fold_into_child (which
 * calls it). */
bool snap_dir_fold_disks_into_child(const char *inner, const char *child, GError **error);
/* The same for the one disk disk_id (virsh blockcommit of an inner range):
 * inner's other disks' layers stay where they are. */
bool snap_dir_fold_disk_into_child(const char *inner, const char *child, const char *disk_id, GError **error);

/* Fold a chain (base first) and optionally an overlay on top of it into the
 * image, so that the image holds what the disk holds, crash-safely: the
 * intent (image, layers, overlay) is written durably to
 * <image>.vsnap-fold first, blocks are written in place (idempotent), the
 * image is fsynced, then the intent goes. base (may be NULL) is checked
 * against the image first. The layers and overlay stay: remove them after.
 * If a fold of image was interrupted (a crash), that fold is finished
 * instead and nothing else is done: run the fold again after a crash. */
bool snap_disk_fold_into_image(const char *image, const char *const *layers, unsigned n, const char *overlay,
                               const struct snap_disk_identity *base, GError **error);
/* Finish a fold of image that a crash interrupted, if there is one
 * (*resumed says). The intent's layers must still exist. */
bool snap_disk_fold_resume(const char *image, bool *resumed, GError **error);
