/* Push: a snapshot directory's files as objects (skipping those the store
 * has), then its manifest. Parents go first, so a manifest's parent is
 * always in the store before it. */
#include "store/manifest.h"
#include "store/object.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/chain.h"
#include "snapshot/directory.h"
#include "snapshot/disk.h"
#include "snapshot/layer.h"

void store_push_result_clear(struct store_push_result *r)
{
    g_clear_pointer(&r->id, g_free);
}

/* Files that travel: every regular file but seals (they describe this
 * host's inode), the mark of a pulled snapshot (this host's record of where
 * it came from), temporary files and hidden ones. */
static bool travels(const char *dir, const char *name)
{
    if (name[0] == '.' || g_str_has_suffix(name, SNAP_DIR_SEAL_SUFFIX) || strstr(name, ".tmp-") ||
        strcmp(name, SNAP_DIR_STORE_ORIGIN_FILE) == 0)
        return false;
    g_autofree char *p = g_build_filename(dir, name, NULL);
    struct stat st;
    return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Layers (memory and disk) share one container; its magic says which files
 * go through a host's cache. */
static bool is_layer(int fd)
{
    char magic[8];
    return pread(fd, magic, sizeof(magic), 0) == sizeof(magic) &&
           memcmp(magic, SNAP_LAYER_MAGIC, sizeof(magic)) == 0;
}

static bool push_object(struct transport *t, int fd, const char *path, struct manifest_file *f,
                        struct progress *pg, struct store_push_result *r, GError **error)
{
    g_autofree char *obj = object_name(f->digest);
    guint64 have = G_MAXUINT64;
    struct object_info info = { 0 };
    if (!t->ops->stat(t, obj, &have, error))
        return false;
    g_autoptr(GError) damaged = NULL;
    if (have != G_MAXUINT64 && !object_describe(t, obj, have, &info, &damaged) &&
        !g_error_matches(damaged, STORE_ERROR, STORE_ERROR_CORRUPT)) {
        g_propagate_error(error, g_steal_pointer(&damaged));
        return false;
    }
    if (have != G_MAXUINT64 && !damaged) {
        /* the store has it (another snapshot's, another host's): its own
         * table goes into the manifest */
        r->objects_skipped++;
        progress_add(pg, f->size);
    } else {
        /* not there, or there but damaged (a push that died halfway on a
         * store without atomic writes): written anew */
        if (!object_export(t, obj, fd, path, f->size, pg, &info, error))
            return false;
        r->objects_sent++;
        r->bytes_sent += info.object_size;
    }
    f->object_size = info.object_size;
    f->frames = info.frames;
    g_strlcpy(f->table_sha256, info.table_sha256, sizeof(f->table_sha256));
    r->bytes_in += f->size;
    return true;
}

static bool push_file(struct transport *t, const char *dir, const char *name, struct progress *pg,
                      struct manifest_file *f, struct store_push_result *r, GError **error)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "open %s: %s", path, g_strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    f->name = g_strdup(name);
    f->size = st.st_size;
    f->kind = is_layer(fd) ? MANIFEST_LAYER : MANIFEST_FILE;
    bool ok = object_digest(fd, path, f->size, t->opts, f->digest, error) &&
              push_object(t, fd, path, f, pg, r, error);
    close(fd);
    return ok;
}

static bool skipped(const char *const *skip, const char *name)
{
    for (; skip && *skip; skip++)
        if (strcmp(*skip, name) == 0)
            return true;
    return false;
}

static GPtrArray *travelling_files(const char *dir, const char *const *skip, guint64 *total,
                                   GError **error)
{
    g_autoptr(GError) e = NULL;
    GDir *d = g_dir_open(dir, 0, &e);
    if (!d) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "%s", e->message);
        return NULL;
    }
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    *total = 0;
    for (const char *n; (n = g_dir_read_name(d));) {
        if (!travels(dir, n) || skipped(skip, n))
            continue;
        g_autofree char *p = g_build_filename(dir, n, NULL);
        struct stat st;
        if (stat(p, &st) == 0)
            *total += st.st_size;
        g_ptr_array_add(names, g_strdup(n));
    }
    g_dir_close(d);
    manifest_sort_names(names);
    return names;
}

static char *now_iso8601(void)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    return g_date_time_format_iso8601(now);
}

static bool as_invalid(GError **error, GError *e)
{
    g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "%s", e->message);
    g_error_free(e);
    return false;
}

/* One directory, its parents already pushed. */
static bool push_one(struct transport *t, const struct snap_dir *d, GPtrArray *disk_parents,
                     const struct store_push_args *a, bool top, struct store_push_result *r, GError **error)
{
    char id[37], parent[37];
    snap_id_to_string(&d->memory.id, id);
    g_autofree char *mname = manifest_name(id);
    guint64 have = G_MAXUINT64;
    if (!t->ops->stat(t, mname, &have, error))
        return false;
    if (have != G_MAXUINT64)
        return true;   /* the snapshot is in the store: ids are the layers' own */
    guint64 total;
    g_autoptr(GPtrArray) names = travelling_files(d->path, a->skip, &total, error);
    if (!names)
        return false;
    g_autoptr(manifest) m = manifest_new();
    m->id = g_strdup(id);
    if (d->memory.diff) {
        snap_id_to_string(&d->memory.parent_id, parent);
        m->parent = g_strdup(parent);
    }
    for (guint i = 0; i < disk_parents->len; i++)
        g_ptr_array_add(m->disk_parents, g_strdup(disk_parents->pdata[i]));
    m->created = now_iso8601();
    if (top) {
        m->domain_xml = g_strdup(a->domain_xml);
        m->snapshot_xml = g_strdup(a->snapshot_xml);
    }
    struct progress pg;
    progress_begin(&pg, "push", total, t->opts->progress);
    progress_watch(&pg, t->opts->on_progress, t->opts->progress_data);
    bool ok = true;
    for (guint i = 0; ok && i < names->len; i++) {
        struct manifest_file f = { 0 };
        ok = push_file(t, d->path, names->pdata[i], &pg, &f, r, error);
        g_array_append_val(m->files, f);
    }
    progress_end(&pg);
    /* a cancel seen by no transfer (the last object was skipped) still
     * keeps the manifest out */
    if (!ok || store_cancelled(t->opts, error))
        return false;
    g_autoptr(GBytes) json = manifest_to_json(m);
    return t->ops->put(t, mname, json, error);
}

/* What a push sends: a directory and every directory it depends on, each
 * after what it depends on: its memory parent, then the directories holding
 * its disks' parent layers (a full snapshot continues its disks' chains). */
struct push_plan {
    GPtrArray *dirs;          /* struct snap_dir *, dependencies first */
    GPtrArray *disk_parents;  /* per dir: GPtrArray of the ids it names */
    GHashTable *seen;         /* memory ids planned (or being planned) */
};

static void push_plan_clear(struct push_plan *p)
{
    g_ptr_array_unref(p->dirs);
    g_ptr_array_unref(p->disk_parents);
    g_hash_table_unref(p->seen);
}

static char *dir_id(const struct snap_dir *d)
{
    char id[37];
    snap_id_to_string(&d->memory.id, id);
    return g_strdup(id);
}

/* The ids of d's memory chain below it. */
static GHashTable *memory_chain_ids(const struct snap_dir *d)
{
    GHashTable *ids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autofree char *dir = g_strdup(d->parent_path);
    for (unsigned depth = 0; dir && depth < SNAP_MAX_CHAIN; depth++) {
        g_autoptr(snap_dir) p = snap_dir_read(dir, NULL);
        if (!p)
            break;
        g_hash_table_add(ids, dir_id(p));
        g_free(dir);
        dir = g_strdup(p->parent_path);
    }
    return ids;
}

static bool plan_dir(struct push_plan *plan, const char *path, char **id_out, GError **error);

/* d's disks' parent directories outside its memory chain, planned; their ids
 * in *out. */
static bool plan_disk_parents(struct push_plan *plan, const struct snap_dir *d, GPtrArray *out, GError **error)
{
    g_autoptr(GHashTable) chain = NULL;   /* read only when a disk leaves the memory chain's top */
    GError *e = NULL;
    g_autoptr(GPtrArray) dirs = snap_dir_disk_parent_dirs(d, &e);
    if (!dirs)
        return as_invalid(error, e);
    for (guint i = 0; i < dirs->len; i++) {
        char *id = NULL;
        if (!plan_dir(plan, dirs->pdata[i], &id, error))
            return false;
        bool in_parent = d->parent_path && strcmp(dirs->pdata[i], d->parent_path) == 0;
        if (!in_parent && !chain)
            chain = memory_chain_ids(d);
        if (!in_parent && !g_hash_table_contains(chain, id) &&
            !g_ptr_array_find_with_equal_func(out, id, g_str_equal, NULL))
            g_ptr_array_add(out, id);
        else
            g_free(id);
    }
    return true;
}

static bool plan_dir(struct push_plan *plan, const char *path, char **id_out, GError **error)
{
    GError *e = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(path, &e);
    if (!d)
        return as_invalid(error, e);
    *id_out = dir_id(d);
    if (g_hash_table_contains(plan->seen, *id_out))
        return true;
    if (g_hash_table_size(plan->seen) >= SNAP_MAX_CHAIN) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "%s: too many snapshots below it", path);
        return false;
    }
    g_hash_table_add(plan->seen, g_strdup(*id_out));
    g_autofree char *parent_id = NULL;
    if (d->parent_path && !plan_dir(plan, d->parent_path, &parent_id, error))
        return false;
    GPtrArray *extra = g_ptr_array_new_with_free_func(g_free);
    if (!plan_disk_parents(plan, d, extra, error)) {
        g_ptr_array_unref(extra);
        return false;
    }
    g_ptr_array_add(plan->dirs, g_steal_pointer(&d));
    g_ptr_array_add(plan->disk_parents, extra);
    return true;
}

bool store_push(const struct store_push_args *a, const struct store_options *o,
                struct store_push_result *r, GError **error)
{
    memset(r, 0, sizeof(*r));
    struct store_options bounded;
    g_autoptr(transport) t = transport_open(a->url, store_options_bounded(o, &bounded), error);
    if (!t)
        return false;
    struct push_plan plan = {
        g_ptr_array_new_with_free_func((GDestroyNotify)snap_dir_free),
        g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref),
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
    };
    g_autofree char *id = NULL;
    bool ok = plan_dir(&plan, a->dir, &id, error);
    for (guint i = 0; ok && i < plan.dirs->len; i++)
        ok = push_one(t, plan.dirs->pdata[i], plan.disk_parents->pdata[i], a, i == plan.dirs->len - 1, r,
                      error);
    push_plan_clear(&plan);
    if (ok)
        r->id = g_steal_pointer(&id);
    return ok;
}
