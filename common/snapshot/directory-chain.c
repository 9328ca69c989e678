/* Chains of snapshot directories: following parents, opening and verifying
 * the layers below a snapshot, seals, and folding an inner snapshot into its
 * child (see directory.h). */
#include "snapshot/directory.h"

#include <errno.h>
#include <sys/stat.h>

#include "snapshot/compact.h"
#include "snapshot/disk.h"

/* The directory child's parent_url names, checked to be the snapshot the
 * diff was taken on. */
static struct snap_dir *read_parent(const struct snap_dir *child, GError **error)
{
    g_autoptr(snap_dir) parent = snap_dir_read(child->parent_path, error);
    if (!parent || snap_id_equal(&parent->memory.id, &child->memory.parent_id))
        return g_steal_pointer(&parent);
    char want[37], got[37];
    snap_id_to_string(&child->memory.parent_id, want);
    snap_id_to_string(&parent->memory.id, got);
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN,
                "snapshot %s is %s, but the diff above it (%s) was taken on %s (wrong parent)", parent->path, got,
                child->path, want);
    return NULL;
}

/* The directories below top, base first (top's ancestors). */
static GPtrArray *read_ancestors(const struct snap_dir *top, GError **error)
{
    g_autoptr(GPtrArray) up = g_ptr_array_new_with_free_func((GDestroyNotify)snap_dir_free);
    const struct snap_dir *cur = top;
    while (cur->memory.diff) {
        if (up->len + 1 == SNAP_MAX_CHAIN) {
            g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN,
                        "the snapshot chain below %s is longer than %u layers (a parent_url loop?)", top->path,
                        SNAP_MAX_CHAIN);
            return NULL;
        }
        struct snap_dir *parent = read_parent(cur, error);
        if (!parent)
            return NULL;
        g_ptr_array_insert(up, 0, parent);
        cur = parent;
    }
    return g_steal_pointer(&up);
}

/* What state.json says about a layer must be what the layer says. */
static bool record_matches_layer(const struct snap_dir *d, const struct snap_layer *l, GError **error)
{
    const char *problem = NULL;
    if (!snap_id_equal(&d->memory.id, &l->hdr.id))
        problem = "id";
    else if (d->memory.diff == snap_layer_is_full(l))
        problem = "kind (full or diff)";
    else if (d->memory.diff && !snap_id_equal(&d->memory.parent_id, &l->hdr.parent_id))
        problem = "parent id";
    else if (d->memory.ram_size != l->hdr.ram_size)
        problem = "RAM size";
    if (!problem)
        return true;
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN,
                "snapshot %s: the %s in " SNAP_DIR_STATE_FILE " does not match its layer %s", d->path, problem,
                l->path);
    return false;
}

struct snap_chain *snap_dir_open_chain(const struct snap_dir *top, GError **error)
{
    g_autoptr(GPtrArray) below = read_ancestors(top, error);
    if (!below)
        return NULL;
    unsigned n = below->len + 1;
    g_autofree const struct snap_dir **dirs = g_new(const struct snap_dir *, n);
    g_autofree const char **paths = g_new(const char *, n);
    for (unsigned i = 0; i < n; i++) {
        dirs[i] = i < below->len ? below->pdata[i] : top;
        paths[i] = dirs[i]->layer_path;
    }
    g_autoptr(snap_chain) chain = snap_chain_open(paths, n, SNAP_CHAIN_DEFAULT, error);
    for (unsigned i = 0; chain && i < n; i++)
        if (!record_matches_layer(dirs[i], chain->layers[i], error))
            return NULL;
    return g_steal_pointer(&chain);
}

/* ---- seals ---- */

/* A layer file's identity on disk: any write, replacement or truncation
 * changes its inode, size, mtime or ctime (ctime cannot be set back by hand). */
static char *seal_text(const char *layer_path, GError **error)
{
    struct stat st;
    if (stat(layer_path, &st) < 0) {
        int e = errno;
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO, "cannot stat snapshot layer %s: %s", layer_path,
                    g_strerror(e));
        return NULL;
    }
    return g_strdup_printf("%llu %llu %lld.%09ld %lld.%09ld\n", (unsigned long long)st.st_ino,
                           (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                           (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
}

static bool write_seal(const char *layer_path, GError **error)
{
    g_autofree char *text = seal_text(layer_path, error);
    if (!text)
        return false;
    g_autofree char *dir = g_path_get_dirname(layer_path);
    g_autofree char *base = g_path_get_basename(layer_path);
    g_autofree char *name = g_strconcat(base, SNAP_DIR_SEAL_SUFFIX, NULL);
    return snap_dir_write_file(dir, name, text, error);
}

static bool seal_matches(const char *layer_path)
{
    g_autofree char *path = g_strconcat(layer_path, SNAP_DIR_SEAL_SUFFIX, NULL);
    g_autofree char *recorded = NULL;
    g_autofree char *now = seal_text(layer_path, NULL);
    return now && g_file_get_contents(path, &recorded, NULL, NULL) && g_str_equal(recorded, now);
}

bool snap_dir_seal(const char *dir, GError **error)
{
    g_autoptr(snap_dir) d = snap_dir_read(dir, error);
    return d && write_seal(d->layer_path, error);
}

/* Read and check every data block of a layer that changed since its seal. */
static bool verify_changed_layer(struct snap_layer *layer, GError **error)
{
    if (seal_matches(layer->path))
        return true;
    if (!snap_layer_verify_data(layer, 0, layer->hdr.page_count, error))
        return false;
    g_autoptr(GError) local = NULL;
    if (!write_seal(layer->path, &local))
        g_warning("%s (the layer is verified; the next check reads it again)", local->message);
    return true;
}

bool snap_dir_verify_chain(const struct snap_dir *top, GError **error)
{
    g_autoptr(snap_chain) chain = snap_dir_open_chain(top, error);
    if (!chain)
        return false;
    for (unsigned i = 0; i < chain->nlayers; i++)
        if (!verify_changed_layer(chain->layers[i], error))
            return false;
    return true;
}

/* ---- fold ---- */

bool snap_dir_fold_into_child(const char *inner, const char *child, GError **error)
{
    g_autoptr(snap_dir) in = snap_dir_read(inner, error);
    g_autoptr(snap_dir) kid = in ? snap_dir_read(child, error) : NULL;
    if (!kid)
        return false;
    g_autoptr(snap_layer) in_layer = snap_layer_open(in->layer_path, error);
    g_autoptr(snap_layer) kid_layer = in_layer ? snap_layer_open(kid->layer_path, error) : NULL;
    if (!kid_layer)
        return false;
    if (snap_id_equal(&kid_layer->hdr.parent_id, &in_layer->hdr.id)) {
        g_clear_pointer(&kid_layer, snap_layer_close); /* the fold replaces the file */
        if (!snap_compact_fold(in->layer_path, kid->layer_path, error))
            return false;
    } else if (!snap_id_equal(&kid_layer->hdr.parent_id, &in_layer->hdr.parent_id)) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN,
                    "cannot fold %s into %s: the child's layer names neither it nor its parent", inner, child);
        return false;
    }
    return snap_dir_set_parent(child, in->parent_path, error) && snap_dir_fold_disks_into_child(inner, child, error);
}
