/* Pull: a manifest, its parents into the cache's snapshots/ (pull-chain.c
 * says which, base first), its layers through the cache (hard-linked into
 * the new directory: a hit costs nothing), its other files straight into
 * the new directory, which appears whole or not at all (snap_dir_commit).
 * Every object's bytes are compared with their digest before anything
 * keeps them. Also ls and verify. */
#include "store/object.h"
#include "store/pull.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/directory.h"
#include "snapshot/disk.h"

/* Decompress one object into fd, its frames checked on the way and its
 * bytes against the manifest's digest. */
struct fill {
    struct transport *t;
    const char *snapshot;
    const struct manifest_file *f;
    struct progress *pg;
    struct store_pull_result *r;
};

static bool fill_object(void *ctx, int fd, const char *path, GError **error)
{
    struct fill *x = ctx;
    g_autofree char *obj = object_name(x->f->digest);
    struct seekable_table table;
    if (!object_fetch_table(x->t, obj, x->f->object_size, x->f->size, x->f->frames,
                            x->f->table_sha256, &table, error))
        return false;
    char digest[65];
    bool ok = object_import(x->t, obj, &table, fd, path, x->pg, digest, error);
    seekable_table_clear(&table);
    if (ok && strcmp(digest, x->f->digest) != 0) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                    "store %s: object %s (%s of snapshot %s) decompresses to SHA-256 %s, not the %s "
                    "it is named by: refused, nothing of it kept", x->t->url, obj, x->f->name,
                    x->snapshot, digest, x->f->digest);
        ok = false;
    }
    if (ok && x->r)
        x->r->bytes_received += x->f->object_size;
    return ok;
}

static bool link_or_copy(const char *from, const char *to, GError **error)
{
    if (link(from, to) == 0)
        return true;
    if (errno != EXDEV && errno != EPERM && errno != EMLINK) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "link %s to %s: %s", from, to, g_strerror(errno));
        return false;
    }
    /* another file system: a copy (copy_file_range reflinks where it can) */
    g_autoptr(GFile) src = g_file_new_for_path(from);
    g_autoptr(GFile) dst = g_file_new_for_path(to);
    g_autoptr(GError) e = NULL;
    if (!g_file_copy(src, dst, G_FILE_COPY_NONE, NULL, NULL, NULL, &e)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "copy %s to %s: %s", from, to, e->message);
        return false;
    }
    return true;
}

/* What a pull holds in the cache until it ends: the layers it pinned
 * (their fds) and the digests of those it imported itself. */
struct held {
    GArray *pins;
    GPtrArray *fetched;
};

static bool pull_layer(struct fill *x, struct store_cache *cache, const char *dest, struct held *h,
                       GError **error)
{
    g_autofree char *path = NULL;
    int pin = -1;
    bool hit = false;
    if (!cache_get_layer(cache, x->f->digest, x->f->size, fill_object, x, x->t->opts, &path, &pin,
                         &hit, error))
        return false;
    g_array_append_val(h->pins, pin);
    if (hit) {
        x->r->layers_cached++;
        progress_add(x->pg, x->f->size);   /* done too: processed reaches the total */
    } else {
        x->r->layers_fetched++;
        g_ptr_array_add(h->fetched, g_strdup(x->f->digest));
    }
    g_autofree char *to = g_build_filename(dest, x->f->name, NULL);
    return link_or_copy(path, to, error);
}

/* The most a file that is not a layer may hold: what the format allows
 * config.json and state.json, and the larger of the two for any other (a
 * file another program keeps beside a snapshot). */
static guint64 small_file_max(const char *name)
{
    return strcmp(name, SNAP_DIR_CONFIG_FILE) == 0 ? SNAP_CONFIG_MAX_BYTES : SNAP_STATE_MAX_BYTES;
}

static bool pull_small_file(struct fill *x, const char *dest, GError **error)
{
    if (x->f->size > small_file_max(x->f->name)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                    "store %s: snapshot %s's %s claims %" G_GUINT64_FORMAT " bytes, more than the "
                    "%" G_GUINT64_FORMAT " MiB such a file may hold: refused before fetching it",
                    x->t->url, x->snapshot, x->f->name, x->f->size, small_file_max(x->f->name) >> 20);
        return false;
    }
    g_autofree char *path = g_build_filename(dest, x->f->name, NULL);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "create %s: %s", path, g_strerror(errno));
        return false;
    }
    bool ok = ftruncate(fd, (off_t)x->f->size) == 0;
    if (!ok)
        g_set_error(error, STORE_ERROR, errno == ENOSPC ? STORE_ERROR_NO_SPACE : STORE_ERROR_IO,
                    "truncate %s: %s", path, g_strerror(errno));
    ok = ok && fill_object(x, fd, path, error);
    if (ok && fsync(fd) != 0) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "fsync %s: %s", path, g_strerror(errno));
        ok = false;
    }
    close(fd);
    return ok;
}

static bool as_store_error(GError **error, GError *e)
{
    g_set_error(error, STORE_ERROR,
                e->domain == SNAP_ERROR && !snap_error_is_bad_input(e) ? STORE_ERROR_IO
                                                                       : STORE_ERROR_CORRUPT,
                "%s", e->message);
    g_error_free(e);
    return false;
}

static bool pull_files(struct transport *t, const struct manifest *m, const char *partial,
                       struct store_cache *cache, struct store_pull_result *r, struct held *h,
                       GError **error)
{
    guint64 total = 0;
    for (guint i = 0; i < m->files->len; i++)
        total += g_array_index(m->files, struct manifest_file, i).size;
    struct progress pg;
    progress_begin(&pg, "pull", total, t->opts->progress);
    progress_watch(&pg, t->opts->on_progress, t->opts->progress_data);
    bool ok = true;
    for (guint i = 0; ok && i < m->files->len; i++) {
        struct fill x = { t, m->id, &g_array_index(m->files, struct manifest_file, i), &pg, r };
        if (strcmp(x.f->name, SNAP_DIR_STORE_ORIGIN_FILE) == 0) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                        "manifest %s in %s names a file %s: only a pull writes that (it marks what came from a "
                        "store)", m->id, t->url, SNAP_DIR_STORE_ORIGIN_FILE);
            ok = false;
            break;
        }
        if (store_cancelled(t->opts, error)) {
            ok = false;
            break;
        }
        ok = x.f->kind == MANIFEST_LAYER ? pull_layer(&x, cache, partial, h, error)
                                         : pull_small_file(&x, partial, error);
    }
    progress_end(&pg);
    return ok;
}

/* Where this host has snapshot id: parent_dir when it holds it (the
 * caller keeps it there), else the cache's snapshots/, pulled there
 * before (pull_chain_plan put it first). */
static char *find_parent(struct transport *t, const struct manifest *m, const char *id,
                         const char *parent_dir, struct store_cache *cache, GError **error)
{
    if (parent_dir && pull_has_snapshot(parent_dir, id))
        return g_strdup(parent_dir);
    g_autofree char *dir = cache_snapshot_dir(cache, id);
    if (pull_has_snapshot(dir, id))
        return g_steal_pointer(&dir);
    g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "snapshot %s in %s: its parent %s is not in %s "
                "(it was evicted, or the store changed its manifests during the pull)", m->id, t->url,
                id, dir);
    return NULL;
}

/* The snapshots holding the parent layers of m's disks outside its parent's
 * chain: a NULL-terminated list of directories. */
static GPtrArray *find_disk_parents(struct transport *t, const struct manifest *m,
                                    struct store_cache *cache, GError **error)
{
    g_autoptr(GPtrArray) dirs = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < m->disk_parents->len; i++) {
        char *dir = find_parent(t, m, m->disk_parents->pdata[i], NULL, cache, error);
        if (!dir)
            return NULL;
        g_ptr_array_add(dirs, dir);
    }
    g_ptr_array_add(dirs, NULL);
    return g_steal_pointer(&dirs);
}

/* A diff's state.json without a parent in the manifest would keep the
 * parent_url the store wrote: a directory of this host it chose. */
static bool parent_as_manifest_says(const struct manifest *m, const struct snap_dir *d, const char *parent,
                                    GError **error)
{
    if (parent || !d->memory.diff)
        return true;
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN,
                "snapshot %s: its state.json is a diff of %s, but its manifest names no parent", m->id,
                d->memory.parent_url);
    return false;
}

static bool pull_into(struct transport *t, const struct manifest *m, const char *dest,
                      const char *parent_dir, struct store_cache *cache,
                      struct store_pull_result *r, GError **error)
{
    g_autofree char *parent = m->parent ? find_parent(t, m, m->parent, parent_dir, cache, error) : NULL;
    if (m->parent && !parent)
        return false;
    g_autoptr(GPtrArray) disk_parents = find_disk_parents(t, m, cache, error);
    if (!disk_parents)
        return false;
    GError *e = NULL;
    if (!snap_dir_check_destination(dest, &e))
        return as_store_error(error, e);
    g_autofree char *partial = snap_dir_create_partial(dest, &e);
    if (!partial)
        return as_store_error(error, e);
    g_autoptr(GArray) pins = g_array_new(FALSE, FALSE, sizeof(int));
    g_autoptr(GPtrArray) fetched = g_ptr_array_new_with_free_func(g_free);
    struct held held = { pins, fetched };
    bool ok = pull_files(t, m, partial, cache, r, &held, error);
    if (ok) {
        g_autoptr(snap_dir) d = snap_dir_read(partial, &e);
        g_autofree char *origin = g_strdup_printf("%s %s", t->url, m->id);
        /* The parent is where this host keeps it, and so are its disk
         * layers: no directory state.json names is the store's choice. */
        if (!d || !parent_as_manifest_says(m, d, parent, &e) ||
            (parent && (!d->parent_path || strcmp(d->parent_path, parent) != 0) &&
             !snap_dir_set_parent(partial, parent, &e)) ||
            !snap_dir_relink_disk_parents(partial, (const char *const *)disk_parents->pdata, true, &e) ||
            !snap_dir_mark_from_store(partial, origin, &e) || !snap_dir_commit(partial, dest, &e) ||
            !snap_dir_seal(dest, &e))
            ok = as_store_error(error, e);
    }
    if (!ok)
        snap_dir_remove(partial, NULL);
    for (guint i = 0; i < pins->len; i++)
        close(g_array_index(pins, int, i));
    /* A pull that failed adds nothing to the cache: the layers it brought
     * in before the failure leave again (unpinned first, just above). */
    if (!ok)
        cache_drop_layers(cache, fetched);
    return ok;
}

/* A parent into the cache's snapshots/, unless it is there (one process
 * at a time: the lock is the one fd held beside the layers' pins, whatever
 * the chain's depth). */
static bool pull_parent(struct transport *t, const char *id, struct store_cache *cache,
                        struct store_pull_result *r, GError **error)
{
    g_autofree char *dir = cache_snapshot_dir(cache, id);
    if (pull_has_snapshot(dir, id))
        return true;
    int lock = cache_lock_snapshot(cache, id, t->opts, error);
    if (lock < 0)
        return false;
    bool ok = pull_has_snapshot(dir, id);
    if (!ok) {
        g_autoptr(manifest) m = NULL;
        ok = snap_dir_remove(dir, error) && snap_dir_remove_partials(dir, error) &&
             (m = pull_fetch_manifest(t, id, error)) && pull_into(t, m, dir, NULL, cache, r, error);
    }
    close(lock);
    return ok;
}

bool store_pull_onto(const char *url, const char *id, const char *dest, const char *parent_dir,
                     struct store_cache *cache, const struct store_options *o,
                     struct store_pull_result *r, GError **error)
{
    memset(r, 0, sizeof(*r));
    struct store_options bounded;
    g_autoptr(transport) t = transport_open(url, store_options_bounded(o, &bounded), error);
    if (!t)
        return false;
    g_autoptr(manifest) m = pull_fetch_manifest(t, id, error);
    if (!m)
        return false;
    g_autoptr(GPtrArray) parents = pull_chain_plan(t, m, parent_dir, cache, error);
    if (!parents)
        return false;
    for (guint i = 0; i < parents->len; i++)
        if (!pull_parent(t, parents->pdata[i], cache, r, error))
            return false;
    return pull_into(t, m, dest, parent_dir, cache, r, error);
}

bool store_pull(const char *url, const char *id, const char *dest, struct store_cache *cache,
                const struct store_options *o, struct store_pull_result *r, GError **error)
{
    return store_pull_onto(url, id, dest, NULL, cache, o, r, error);
}

GPtrArray *store_list(const char *url, const struct store_options *o, GError **error)
{
    struct store_options bounded;
    g_autoptr(transport) t = transport_open(url, store_options_bounded(o, &bounded), error);
    if (!t)
        return NULL;
    g_autoptr(GPtrArray) names = t->ops->list(t, "manifests", error);
    if (!names)
        return NULL;
    GPtrArray *ids = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < names->len; i++) {
        const char *n = names->pdata[i];
        if (!g_str_has_suffix(n, ".json"))
            continue;
        g_autofree char *id = g_strndup(n, strlen(n) - 5);
        if (manifest_id_valid(id))
            g_ptr_array_add(ids, g_steal_pointer(&id));
    }
    manifest_sort_names(ids);
    return ids;
}

bool store_verify(const char *url, const char *id, const struct store_options *o, GError **error)
{
    struct store_options bounded;
    g_autoptr(transport) t = transport_open(url, store_options_bounded(o, &bounded), error);
    if (!t)
        return false;
    g_autoptr(manifest) m = pull_fetch_manifest(t, id, error);
    if (!m)
        return false;
    /* the digest is taken as the frames come: what they decompress to
     * needs no room anywhere */
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "open /dev/null: %s", g_strerror(errno));
        return false;
    }
    bool ok = true;
    for (guint i = 0; ok && i < m->files->len; i++) {
        struct fill x = { t, id, &g_array_index(m->files, struct manifest_file, i), NULL, NULL };
        struct progress pg;
        progress_begin(&pg, x.f->name, x.f->size, o->progress);
        x.pg = &pg;
        ok = fill_object(&x, null, "/dev/null", error);
        progress_end(&pg);
    }
    close(null);
    return ok;
}

bool store_split_ref(const char *ref, char **url, char **id, GError **error)
{
    const char *slash = strrchr(ref, '/');
    if (!slash || !manifest_id_valid(slash + 1) || slash == ref || slash[-1] == '/') {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "%s: not STORE-URL/ID", ref);
        return false;
    }
    *url = g_strndup(ref, slash - ref);
    *id = g_strdup(slash + 1);
    return true;
}
