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

#include "snapshot/directory.h"
#include "snapshot/layer.h"

void store_push_result_clear(struct store_push_result *r)
{
    g_clear_pointer(&r->id, g_free);
}

/* Files that travel: every regular file but seals (they describe this
 * host's inode), temporary files and hidden ones. */
static bool travels(const char *dir, const char *name)
{
    if (name[0] == '.' || g_str_has_suffix(name, SNAP_DIR_SEAL_SUFFIX) || strstr(name, ".tmp-"))
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
    bool ok = object_digest(fd, path, f->size, f->digest, error) &&
              push_object(t, fd, path, f, pg, r, error);
    close(fd);
    return ok;
}

static GPtrArray *travelling_files(const char *dir, guint64 *total, GError **error)
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
        if (!travels(dir, n))
            continue;
        g_autofree char *p = g_build_filename(dir, n, NULL);
        struct stat st;
        if (stat(p, &st) == 0)
            *total += st.st_size;
        g_ptr_array_add(names, g_strdup(n));
    }
    g_dir_close(d);
    g_ptr_array_sort(names, (GCompareFunc)g_strcmp0);
    return names;
}

static char *now_iso8601(void)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    return g_date_time_format_iso8601(now);
}

/* One directory, its parents already pushed. */
static bool push_one(struct transport *t, const struct snap_dir *d, const struct store_push_args *a,
                     bool top, struct store_push_result *r, GError **error)
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
    g_autoptr(GPtrArray) names = travelling_files(d->path, &total, error);
    if (!names)
        return false;
    g_autoptr(manifest) m = manifest_new();
    m->id = g_strdup(id);
    if (d->memory.diff) {
        snap_id_to_string(&d->memory.parent_id, parent);
        m->parent = g_strdup(parent);
    }
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
    if (!ok)
        return false;
    g_autoptr(GBytes) json = manifest_to_json(m);
    return t->ops->put(t, mname, json, error);
}

bool store_push(const struct store_push_args *a, const struct store_options *o,
                struct store_push_result *r, GError **error)
{
    memset(r, 0, sizeof(*r));
    g_autoptr(transport) t = transport_open(a->url, o, error);
    if (!t)
        return false;
    /* the chain, top first */
    g_autoptr(GPtrArray) chain = g_ptr_array_new_with_free_func((GDestroyNotify)snap_dir_free);
    for (const char *p = a->dir; p;) {
        GError *e = NULL;
        struct snap_dir *d = snap_dir_read(p, &e);
        if (!d) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "%s", e->message);
            g_error_free(e);
            return false;
        }
        g_ptr_array_add(chain, d);
        p = d->parent_path;
        if (chain->len > 4096) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "%s: chain too long", a->dir);
            return false;
        }
    }
    for (guint i = chain->len; i-- > 0;)
        if (!push_one(t, chain->pdata[i], a, i == 0, r, error))
            return false;
    char id[37];
    snap_id_to_string(&((struct snap_dir *)chain->pdata[0])->memory.id, id);
    r->id = g_strdup(id);
    return true;
}
