/* A disk's chain of layers: resolving it from snapshot directories,
 * opening and verifying it, and folding an inner snapshot's disk layers into
 * its child (see disk.h). */
#include "snapshot/disk.h"

#include <string.h>

#include "layer-internal.h"
#include "snapshot/compact.h"

#define MAX_DISK_CHAIN (SNAP_MAX_CHAIN - 1u)

static bool chain_error(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static bool chain_error(GError **error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *what = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error_literal(error, SNAP_ERROR, SNAP_ERROR_CHAIN, what);
    return false;
}

void snap_disk_chain_free(struct snap_disk_chain *c)
{
    if (!c)
        return;
    g_free(c->disk_id);
    g_strfreev(c->paths);
    g_free(c->base_path);
    g_free(c);
}

/* The parent directory's record of the disk, which must be the layer the
 * child's names. */
static bool read_parent_record(const char *child_dir, const struct snap_disk_record *child, const char *disk_id,
                               char **parent_dir, struct snap_disk_record *out, GError **error)
{
    g_autofree char *path = snap_dir_path_from_url(child->parent_url, error);
    g_autoptr(snap_dir) d = path ? snap_dir_read(path, error) : NULL;
    if (!d)
        return false;
    bool present;
    if (!snap_dir_disk_record(d, disk_id, out, &present, error))
        return false;
    char want[37], got[37];
    snap_id_to_string(&child->parent, want);
    if (!present)
        return chain_error(error, "snapshot %s: disk %s's layer was taken on layer %s in %s, which holds no layer "
                           "for the disk", child_dir, disk_id, want, path);
    snap_id_to_string(&out->id, got);
    if (!snap_id_equal(&out->id, &child->parent)) {
        chain_error(error, "snapshot %s: disk %s's layer was taken on layer %s, but %s holds layer %s (wrong parent)",
                    child_dir, disk_id, want, path, got);
        snap_disk_record_clear(out);
        return false;
    }
    if (g_strcmp0(out->base_path, child->base_path) != 0 || memcmp(&out->base, &child->base, sizeof out->base)) {
        chain_error(error, "snapshot %s: disk %s's base image differs from the one of its parent layer in %s",
                    child_dir, disk_id, path);
        snap_disk_record_clear(out);
        return false;
    }
    *parent_dir = g_steal_pointer(&path);
    return true;
}

struct snap_disk_chain *snap_dir_disk_chain(const struct snap_dir *top, const char *disk_id, bool *present,
                                            GError **error)
{
    struct snap_disk_record r;
    if (!snap_dir_disk_record(top, disk_id, &r, present, error) || !*present)
        return NULL;
    g_autoptr(snap_disk_chain) c = g_new0(struct snap_disk_chain, 1);
    c->disk_id = g_strdup(disk_id);
    c->top_id = r.id;
    c->base_path = g_strdup(r.base_path);
    c->base = r.base;
    g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *dir = g_strdup(top->path);
    bool ok = true;
    while (ok) {
        g_ptr_array_insert(paths, 0, g_build_filename(dir, r.file, NULL));
        if (snap_id_is_nil(&r.parent))
            break;
        if (paths->len == MAX_DISK_CHAIN) {
            ok = chain_error(error, "disk %s: the chain of disk layers below %s is longer than %u layers (a "
                             "parent_url loop?)", disk_id, top->path, MAX_DISK_CHAIN);
            break;
        }
        struct snap_disk_record parent;
        char *parent_dir = NULL;
        ok = read_parent_record(dir, &r, disk_id, &parent_dir, &parent, error);
        if (ok) {
            snap_disk_record_clear(&r);
            r = parent;
            g_free(dir);
            dir = parent_dir;
        }
    }
    snap_disk_record_clear(&r);
    if (!ok)
        return NULL;
    c->nlayers = paths->len;
    g_ptr_array_add(paths, NULL);
    c->paths = (char **)g_ptr_array_free(g_steal_pointer(&paths), FALSE);
    return g_steal_pointer(&c);
}

struct snap_chain *snap_disk_chain_open(const char *const *paths, unsigned n, GError **error)
{
    g_autoptr(snap_chain) chain = snap_chain_open(paths, n, SNAP_CHAIN_ALLOW_PARTIAL, error);
    if (!chain)
        return NULL;
    const struct snap_layer *first = chain->layers[0];
    if (!snap_layer_is_disk(first)) {
        chain_error(error, "snapshot layer %s: is a memory layer, not a disk layer", first->path);
        return NULL;
    }
    if (!snap_id_is_nil(&first->hdr.parent_id)) {
        char parent[37];
        snap_id_to_string(&first->hdr.parent_id, parent);
        chain_error(error, "disk layer %s: was taken on layer %s, which the chain lacks (its first layer must be "
                    "the one over the base image)", first->path, parent);
        return NULL;
    }
    return g_steal_pointer(&chain);
}

/* Count of blocks a layer holds, data and zero. */
static uint64_t layer_blocks(const struct snap_layer *l)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < l->hdr.run_count; i++)
        n += l->runs[i].npages;
    return n;
}

bool snap_disk_chain_verify(const struct snap_disk_chain *c, const char *image, uint64_t capacity, GError **error)
{
    /* An image changed underneath is what went wrong, whatever else no longer fits it. */
    if (!snap_disk_identity_check(image, &c->base, error))
        return false;
    g_autoptr(snap_chain) chain = snap_disk_chain_open((const char *const *)c->paths, c->nlayers, error);
    if (!chain)
        return false;
    if (!snap_id_equal(snap_chain_top_id(chain), &c->top_id)) {
        char want[37];
        snap_id_to_string(&c->top_id, want);
        return chain_error(error, "disk layer %s: is not layer %s, which the snapshot's state.json names",
                           chain->layers[chain->nlayers - 1]->path, want);
    }
    if (!capacity)
        capacity = c->base.size - c->base.size % 512;
    if (chain->ram_size != snap_disk_layer_size(capacity))
        return chain_error(error, "disk layer %s: covers %" G_GUINT64_FORMAT " bytes, but disk %s holds %"
                           G_GUINT64_FORMAT " (is it another disk's layer?)", chain->layers[0]->path,
                           chain->ram_size, c->disk_id, capacity);
    return true;
}

/* ---- inner fold ---- */

static bool rewrite_state(struct snap_dir *d, GError **error)
{
    g_autofree char *text = snap_state_text(d->state);
    return snap_dir_write_file(d->path, SNAP_DIR_STATE_FILE, text, error);
}

/* Fold inner's layer of disk_id into child's, if child's was taken on it;
 * *changed when child's record must follow. */
static bool fold_one(const struct snap_dir *in, struct snap_dir *kid, const char *disk_id, bool *changed,
                     GError **error)
{
    struct snap_disk_record ir, kr;
    bool in_has, kid_has;
    if (!snap_dir_disk_record(kid, disk_id, &kr, &kid_has, error))
        return false;
    if (!kid_has)
        return true;
    if (!snap_dir_disk_record(in, disk_id, &ir, &in_has, error)) {
        snap_disk_record_clear(&kr);
        return false;
    }
    /* Taken on another layer, or folded already. */
    if (!in_has || !snap_id_equal(&kr.parent, &ir.id)) {
        snap_disk_record_clear(&ir);
        snap_disk_record_clear(&kr);
        return true;
    }
    g_autofree char *in_layer = g_build_filename(in->path, ir.file, NULL);
    g_autofree char *kid_layer = g_build_filename(kid->path, kr.file, NULL);
    g_autoptr(snap_layer) l = snap_layer_open(kid_layer, error);
    bool ok = l != NULL;
    if (ok && snap_id_equal(&l->hdr.parent_id, &ir.id)) {
        g_clear_pointer(&l, snap_layer_close);
        ok = snap_compact_fold(in_layer, kid_layer, error) && (l = snap_layer_open(kid_layer, error));
    } else if (ok && !snap_id_equal(&l->hdr.parent_id, &ir.parent)) {
        ok = chain_error(error, "cannot fold %s into %s: disk %s's layer %s names neither the inner layer nor its "
                         "parent", in->path, kid->path, disk_id, kid_layer);
    }
    if (ok) {
        kr.parent = ir.parent;
        g_free(kr.parent_url);
        kr.parent_url = g_strdup(ir.parent_url);
        kr.blocks = layer_blocks(l);
        snap_disk_record_set(snap_dir_disk_object(kid, disk_id), &kr);
        *changed = true;
    }
    snap_disk_record_clear(&ir);
    snap_disk_record_clear(&kr);
    return ok;
}

bool snap_dir_fold_disks_into_child(const char *inner, const char *child, GError **error)
{
    g_autoptr(snap_dir) in = snap_dir_read(inner, error);
    g_autoptr(snap_dir) kid = in ? snap_dir_read(child, error) : NULL;
    if (!kid)
        return false;
    g_autoptr(GPtrArray) ids = snap_dir_disk_ids(kid);
    bool changed = false;
    for (guint i = 0; i < ids->len; i++)
        if (!fold_one(in, kid, ids->pdata[i], &changed, error))
            return false;
    return !changed || rewrite_state(kid, error);
}

bool snap_dir_fold_disk_into_child(const char *inner, const char *child, const char *disk_id, GError **error)
{
    g_autoptr(snap_dir) in = snap_dir_read(inner, error);
    g_autoptr(snap_dir) kid = in ? snap_dir_read(child, error) : NULL;
    bool changed = false;
    return kid && fold_one(in, kid, disk_id, &changed, error) && (!changed || rewrite_state(kid, error));
}

/* ---- parents found where this host keeps them ---- */

GPtrArray *snap_dir_disk_parent_dirs(const struct snap_dir *d, GError **error)
{
    g_autoptr(GPtrArray) dirs = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) ids = snap_dir_disk_ids(d);
    for (guint i = 0; i < ids->len; i++) {
        struct snap_disk_record r;
        bool present = false;
        if (!snap_dir_disk_record(d, ids->pdata[i], &r, &present, error))
            return NULL;
        g_autofree char *path = present && r.parent_url ? snap_dir_path_from_url(r.parent_url, error) : NULL;
        bool bad = present && r.parent_url && !path;
        snap_disk_record_clear(&r);
        if (bad)
            return NULL;
        if (path && !g_ptr_array_find_with_equal_func(dirs, path, g_str_equal, NULL))
            g_ptr_array_add(dirs, g_steal_pointer(&path));
    }
    return g_steal_pointer(&dirs);
}

/* The directory holding disk_id's layer `want`: from, or one of its memory
 * chain below it; NULL if none does. */
static char *find_layer_from(const char *from, const char *disk_id, const snap_id *want)
{
    g_autofree char *dir = g_strdup(from);
    for (unsigned depth = 0; dir && depth < SNAP_MAX_CHAIN; depth++) {
        g_autoptr(snap_dir) p = snap_dir_read(dir, NULL);
        if (!p)
            return NULL;
        struct snap_disk_record r;
        bool present = false;
        if (snap_dir_disk_record(p, disk_id, &r, &present, NULL) && present) {
            bool found = snap_id_equal(&r.id, want);
            snap_disk_record_clear(&r);
            if (found)
                return g_steal_pointer(&dir);
        }
        g_free(dir);
        dir = p->parent_path ? g_strdup(p->parent_path) : NULL;
    }
    return NULL;
}

static char *find_parent_layer(const struct snap_dir *d, const char *const *also, const char *disk_id,
                               const snap_id *want)
{
    char *here = d->parent_path ? find_layer_from(d->parent_path, disk_id, want) : NULL;
    for (; !here && also && *also; also++)
        here = find_layer_from(*also, disk_id, want);
    return here;
}

static bool parent_not_found(GError **error, const char *dir, const char *disk_id, const struct snap_disk_record *r)
{
    char want[37];
    snap_id_to_string(&r->parent, want);
    return chain_error(error, "snapshot %s: disk %s's parent layer %s is in none of the snapshots that came with it "
                       "(its state.json names %s, a directory this host was not given)", dir, disk_id, want,
                       r->parent_url);
}

bool snap_dir_relink_disk_parents(const char *dir, const char *const *also, bool require_found, GError **error)
{
    g_autoptr(snap_dir) d = snap_dir_read(dir, error);
    if (!d)
        return false;
    g_autoptr(GPtrArray) ids = snap_dir_disk_ids(d);
    bool changed = false;
    for (guint i = 0; i < ids->len; i++) {
        struct snap_disk_record r;
        bool present = false;
        if (!snap_dir_disk_record(d, ids->pdata[i], &r, &present, error))
            return false;
        static const snap_id nil;
        g_autofree char *here = present && !snap_id_equal(&r.parent, &nil)
                                    ? find_parent_layer(d, also, ids->pdata[i], &r.parent) : NULL;
        g_autofree char *url = here ? snap_dir_url(here) : NULL;
        if (require_found && present && !snap_id_equal(&r.parent, &nil) && !here) {
            parent_not_found(error, dir, ids->pdata[i], &r);
            snap_disk_record_clear(&r);
            return false;
        }
        if (url && g_strcmp0(url, r.parent_url) != 0) {
            g_free(r.parent_url);
            r.parent_url = g_steal_pointer(&url);
            snap_disk_record_set(snap_dir_disk_object(d, ids->pdata[i]), &r);
            changed = true;
        }
        snap_disk_record_clear(&r);
    }
    if (!changed)
        return true;
    g_autofree char *text = snap_state_text(d->state);
    return snap_dir_write_file(dir, SNAP_DIR_STATE_FILE, text, error);
}
