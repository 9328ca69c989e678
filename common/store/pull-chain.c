/* The parents a pull needs (pull.h): a walk of the store's manifests, base
 * first, with a visited set and the format's chain limit. */
#include "store/pull.h"

#include <string.h>

#include "snapshot/chain.h"
#include "snapshot/directory.h"

struct manifest *pull_fetch_manifest(struct transport *t, const char *id, GError **error)
{
    if (!manifest_id_valid(id)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "%s: not a snapshot id", id);
        return NULL;
    }
    g_autofree char *name = manifest_name(id);
    GError *e = NULL;
    g_autoptr(GBytes) json = t->ops->get(t, name, &e);
    if (!json) {
        g_set_error(error, STORE_ERROR, e->code, "snapshot %s in %s: %s", id, t->url, e->message);
        g_error_free(e);
        return NULL;
    }
    struct manifest *m = manifest_parse(json, name, error);
    if (m && strcmp(m->id, id) != 0) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "manifest %s names snapshot %s", name, m->id);
        g_clear_pointer(&m, manifest_free);
    }
    return m;
}

bool pull_has_snapshot(const char *dir, const char *id)
{
    g_autoptr(snap_dir) have = snap_dir_read(dir, NULL);
    char have_id[37];
    if (have)
        snap_id_to_string(&have->memory.id, have_id);
    return have && strcmp(have_id, id) == 0;
}

/* One snapshot on the walk's path: the ones it needs, and the next to see. */
struct visit {
    char *id;
    GPtrArray *needs;
    guint next;
};

enum { ON_PATH = 1, DONE = 2 };

struct walk {
    struct transport *t;
    struct store_cache *cache;
    const char *top;          /* the snapshot pulled, for messages */
    GArray *path;             /* struct visit, the top first */
    GHashTable *seen;         /* id -> ON_PATH or DONE */
    GPtrArray *order;         /* ids, each after those it needs */
};

static bool in_cache(struct walk *w, const char *id)
{
    g_autofree char *dir = cache_snapshot_dir(w->cache, id);
    return pull_has_snapshot(dir, id);
}

/* What m needs that the cache lacks; parent_dir may hold m's parent. */
static GPtrArray *needs_of(struct walk *w, const struct manifest *m, const char *parent_dir)
{
    GPtrArray *needs = g_ptr_array_new_with_free_func(g_free);
    if (m->parent && !(parent_dir && pull_has_snapshot(parent_dir, m->parent)) && !in_cache(w, m->parent))
        g_ptr_array_add(needs, g_strdup(m->parent));
    for (guint i = 0; i < m->disk_parents->len; i++)
        if (!in_cache(w, m->disk_parents->pdata[i]))
            g_ptr_array_add(needs, g_strdup(m->disk_parents->pdata[i]));
    return needs;
}

static void enter(struct walk *w, const char *id, GPtrArray *needs)
{
    struct visit v = { g_strdup(id), needs, 0 };
    g_array_append_val(w->path, v);
    g_hash_table_insert(w->seen, g_strdup(id), GINT_TO_POINTER(ON_PATH));
}

/* The next snapshot the one atop the path needs: visited now, or refused. */
static bool step(struct walk *w, const char *id, GError **error)
{
    gint seen = GPOINTER_TO_INT(g_hash_table_lookup(w->seen, id));
    if (seen == DONE)
        return true;
    if (seen == ON_PATH) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "snapshot %s in %s: its parents lead "
                    "back to snapshot %s, on the way to it (a cycle)", w->top, w->t->url, id);
        return false;
    }
    const char *why = w->path->len >= SNAP_MAX_CHAIN ? "its chain of parents is deeper"
                      : g_hash_table_size(w->seen) >= SNAP_MAX_CHAIN ? "it needs more parent snapshots"
                                                                      : NULL;
    if (why) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "snapshot %s in %s: %s than the "
                    "format's limit on a chain (%u snapshots), at snapshot %s", w->top, w->t->url,
                    why, SNAP_MAX_CHAIN, id);
        return false;
    }
    g_autoptr(manifest) m = pull_fetch_manifest(w->t, id, error);
    if (!m)
        return false;
    enter(w, id, needs_of(w, m, NULL));
    return true;
}

static void leave(struct walk *w)
{
    struct visit *v = &g_array_index(w->path, struct visit, w->path->len - 1);
    g_hash_table_insert(w->seen, g_strdup(v->id), GINT_TO_POINTER(DONE));
    if (w->path->len > 1)   /* the top is the caller's to pull */
        g_ptr_array_add(w->order, g_steal_pointer(&v->id));
    g_free(v->id);
    g_ptr_array_unref(v->needs);
    g_array_set_size(w->path, w->path->len - 1);
}

GPtrArray *pull_chain_plan(struct transport *t, const struct manifest *m, const char *parent_dir,
                           struct store_cache *cache, GError **error)
{
    struct walk w = { t, cache, m->id, g_array_new(FALSE, FALSE, sizeof(struct visit)),
                      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
                      g_ptr_array_new_with_free_func(g_free) };
    enter(&w, m->id, needs_of(&w, m, parent_dir));
    bool ok = true;
    while (ok && w.path->len) {
        struct visit *v = &g_array_index(w.path, struct visit, w.path->len - 1);
        if (v->next == v->needs->len)
            leave(&w);
        else
            ok = step(&w, v->needs->pdata[v->next++], error);
    }
    while (w.path->len)
        leave(&w);
    g_array_unref(w.path);
    g_hash_table_unref(w.seen);
    if (!ok)
        g_clear_pointer(&w.order, g_ptr_array_unref);
    return w.order;
}
