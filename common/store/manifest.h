/* A snapshot's manifest: manifests/<id>.json in the store, written after
 * every object it names, so a reader never sees a snapshot whose objects are
 * not all there. Library-internal; the format is in README.md. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#define MANIFEST_VERSION 1
#define MANIFEST_MAX_BYTES (16u << 20)
#define MANIFEST_MAX_DISK_PARENTS 64

enum manifest_kind {
    MANIFEST_FILE,    /* a small file of the directory (config.json, state.json, ...) */
    MANIFEST_LAYER,   /* a layer (memory or disk): through the cache */
};

struct manifest_file {
    char *name;
    enum manifest_kind kind;
    guint64 size;
    char digest[65];          /* SHA-256 of the uncompressed file */
    guint64 object_size;
    guint64 frames;           /* zstd frames in the object */
    char table_sha256[65];    /* of the object's seek table */
};

struct manifest {
    char *id;                 /* the snapshot's memory layer id */
    char *parent;             /* the parent snapshot's id, or NULL */
    /* Snapshots, other than parent's chain, holding the parent layers of
     * this one's disks (a full snapshot continues its disks' chains). */
    GPtrArray *disk_parents;  /* char * ids */
    char *created;            /* ISO 8601, for people */
    GArray *files;            /* struct manifest_file */
    char *domain_xml, *snapshot_xml;   /* optional */
};

struct manifest *manifest_new(void);
void manifest_free(struct manifest *m);
typedef struct manifest manifest;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(manifest, manifest_free)

char *manifest_name(const char *id);   /* manifests/<id>.json */
bool manifest_id_valid(const char *id);
/* Sort strings (ids, file names) in byte order: a listing's and a
 * manifest's files are in name order whatever order the store or the
 * directory gave them. */
void manifest_sort_names(GPtrArray *names);
GBytes *manifest_to_json(const struct manifest *m);
/* name: the manifest's object name, for messages. */
struct manifest *manifest_parse(GBytes *json, const char *name, GError **error);
