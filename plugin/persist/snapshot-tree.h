/* Snapshot metadata of one domain, on disk beside the domain:
 *
 *   <state_dir>/snapshots/<domain>/<id>/         one snapshot; <id> is a random
 *                                                uuid, never the user's name
 *       config.json state.json <layer> ...      written by the shim (vm.snapshot)
 *       domain.xml                               the definition when taken
 *       snapshot.ini                             our metadata (with the layer id
 *                                                the shim wrote); written last: a
 *                                                directory without it is an
 *                                                unfinished snapshot
 *       deleting                                 present while the snapshot is
 *                                                being folded into its children
 *       .push-pending                            its push to store_url is not
 *                                                done yet (persist/push.h)
 *   <state_dir>/snapshots/<domain>/current       name of the current snapshot
 *
 * Two relations: the libvirt tree (`parent`, by name: the current snapshot
 * when this one was taken) and the layer chain (`layer_parent`, by id: the
 * snapshot whose layer a diff sits on; NULL for a full layer). Whenever a diff
 * is taken they agree, but a full layer may still have a libvirt parent.
 *
 * The disk is the truth: a tree is loaded for each call and every change is
 * written at once (atomic replace). Changes run under the domain's job lock;
 * readers may load at any time and only ever see whole files. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct snapshot_entry {
    char *id;
    char *dir;              /* <tree dir>/<id> */
    char *name;
    char *description;
    char *parent;           /* libvirt parent name, NULL for a root */
    int64_t creation_time;
    int state;              /* enum snapshot_state (conf/snapshot-conf.h) */
    bool full;              /* full layer (else a diff on layer_parent) */
    char *layer_parent;     /* id, NULL for a full layer */
    char *memory_id;        /* the id of the layer the shim wrote (NULL: not recorded) */
    char *store_url;        /* the snapshot store it is pushed to, or was learnt from
                             * (redefined from another host's XML); NULL: none */
    bool deleting;          /* an interrupted delete to finish */
    char *disk_commit;      /* the block commit that rewrote the image its disk layers sit on
                             * (it cannot be reverted to), NULL: none */
    char *domain_uuid;      /* the domain it belongs to */
};

struct snapshot_tree {
    char *dir;
    char *domain_uuid;
    GPtrArray *entries;     /* struct snapshot_entry *, oldest first */
    char *current;          /* name, NULL when none */
};

typedef struct snapshot_tree snapshot_tree;
void snapshot_tree_free(struct snapshot_tree *tree);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(snapshot_tree, snapshot_tree_free)

/* The directory of a domain's snapshots. */
char *snapshot_tree_dir(const char *state_dir, const char *domain);

/* The daemon's own files in a snapshot directory (snapshot.ini, domain.xml,
 * deleting; NULL-terminated): this host's metadata beside the shim's files,
 * which never travel to a snapshot store (a host that imports the snapshot
 * has its own). */
extern const char *const snapshot_entry_own_files[];

/* Load (an absent directory is an empty tree). Broken entries are skipped
 * with a warning, and so are those of an older domain of the same name
 * (another uuid: left behind by a transient domain). */
struct snapshot_tree *snapshot_tree_load(const char *state_dir, const char *domain,
                                         const char *domain_uuid, GError **error);

struct snapshot_entry *snapshot_tree_find(struct snapshot_tree *tree, const char *name);
struct snapshot_entry *snapshot_tree_find_id(struct snapshot_tree *tree, const char *id);
/* Snapshots whose libvirt parent is `name` (NULL: the roots). */
GPtrArray *snapshot_tree_children(struct snapshot_tree *tree, const char *name);
/* Every descendant of `name`, children before their own children. */
GPtrArray *snapshot_tree_descendants(struct snapshot_tree *tree, const char *name);
/* Snapshots whose layer is a diff on entry's layer. */
GPtrArray *snapshot_tree_layer_children(struct snapshot_tree *tree,
                                        const struct snapshot_entry *entry);
unsigned snapshot_tree_count_live(struct snapshot_tree *tree);

/* A new entry's directory (created) with a fresh id. */
struct snapshot_entry *snapshot_tree_new_entry(struct snapshot_tree *tree, GError **error);
/* Write entry's metadata (the commit point of a new snapshot). */
bool snapshot_entry_save(const struct snapshot_entry *entry, GError **error);
bool snapshot_tree_set_current(struct snapshot_tree *tree, const char *name, GError **error);
/* Mark entry as being deleted (crash-safe fold), or drop the mark. */
bool snapshot_entry_mark_deleting(struct snapshot_entry *entry, GError **error);
/* Forget and remove an entry: its metadata first, then its files. */
bool snapshot_tree_remove(struct snapshot_tree *tree, struct snapshot_entry *entry,
                          GError **error);
/* Remove unfinished snapshot directories (call under the job lock), but
 * those holding one of the paths in in_use (may be NULL): a snapshot the
 * shim finished and a dead daemon never recorded may hold the disk layers
 * the domain's disks now run on. */
/* Drop e from the tree only: its directory has gone elsewhere (a kept disk
 * layer, snapshot-disks.h). */
void snapshot_tree_forget(struct snapshot_tree *tree, struct snapshot_entry *e);
void snapshot_tree_remove_unfinished(struct snapshot_tree *tree, GPtrArray *in_use);
/* Remove the domain's whole snapshot directory. */
bool snapshot_tree_remove_all(const char *state_dir, const char *domain, GError **error);

/* The domain definition stored with a snapshot (XML text). */
char *snapshot_entry_domain_xml(const struct snapshot_entry *entry, GError **error);
bool snapshot_entry_save_domain_xml(const struct snapshot_entry *entry, const char *xml,
                                    GError **error);
