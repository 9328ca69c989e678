#include "import.h"

#include <libvirt/libvirt.h>

#include "run/jail.h"
#include "persist/pull-job.h"
#include "snapshot-dir.h"
#include "util/virt-error.h"

bool import_is_local(const struct snapshot_entry *e)
{
    g_autofree char *state = g_build_filename(e->dir, "state.json", NULL);
    return g_file_test(state, G_FILE_TEST_EXISTS);
}

static bool fail(GError **error, const struct snapshot_entry *e, const char *why)
{
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                "snapshot '%s' is not on this host and cannot be imported: %s", e->name, why);
    return false;
}

/* e and its layer parents that are not here, e first. */
static GPtrArray *missing_chain(struct snapshot_tree *tree, struct snapshot_entry *e, GError **error)
{
    g_autoptr(GPtrArray) chain = g_ptr_array_new();
    for (struct snapshot_entry *x = e; x && !import_is_local(x);) {
        if (!x->store_url || !x->memory_id) {
            fail(error, x, "it names no snapshot store (redefine it with the XML its host shows)");
            return NULL;
        }
        g_ptr_array_add(chain, x);
        if (!x->layer_parent)
            break;
        struct snapshot_entry *parent = snapshot_tree_find_id(tree, x->layer_parent);
        if (!parent) {
            fail(error, x, "the snapshot its memory is a diff on is not defined here");
            return NULL;
        }
        x = parent;
    }
    return g_steal_pointer(&chain);
}

/* The pulled files, for a confined shim to read. */
static bool share(struct vsnap_driver *drv, const char *dir, GError **error)
{
    if (!jail_share_read(drv, dir, error))
        return false;
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    for (const char *name; d && (name = g_dir_read_name(d));) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (!jail_share_read(drv, path, error))
            return false;
    }
    return true;
}

static bool pull_one(struct vsnap_driver *drv, struct snapshot_tree *tree, struct store_cache *cache,
                     const struct store_options *o, struct snapshot_entry *x, GError **error)
{
    struct store_pull_result r;
    g_autoptr(GError) local = NULL;
    gint64 t0 = g_get_monotonic_time();
    /* The parent is here already (imported first, or taken here): the pull
     * names it in its own directory rather than pulling it again into the
     * cache's snapshots/ (which would fetch its layers again once the
     * cache had evicted them). */
    struct snapshot_entry *parent = x->layer_parent ? snapshot_tree_find_id(tree, x->layer_parent)
                                                    : NULL;
    if (!store_pull_onto(x->store_url, x->memory_id, x->dir, parent ? parent->dir : NULL, cache, o,
                         &r, &local)) {
        g_set_error(error, VSNAP_VIR_ERROR,
                    g_error_matches(local, STORE_ERROR, STORE_ERROR_CANCELLED)
                        ? VIR_ERR_OPERATION_ABORTED : VIR_ERR_OPERATION_FAILED,
                    "cannot import snapshot '%s' from %s: %s", x->name, x->store_url,
                    local->message);
        return false;
    }
    g_message("snapshot '%s' imported from %s in %.1f s (%u layers fetched, %u from the cache)",
              x->name, x->store_url, (g_get_monotonic_time() - t0) / 1e6, r.layers_fetched,
              r.layers_cached);
    if (parent && !snapdir_adopt_parent(x->dir, parent->dir, error)) {
        g_prefix_error(error, "snapshot '%s' imported, but not joined to '%s': ", x->name,
                       parent->name);
        return false;
    }
    return share(drv, x->dir, error);
}

bool import_snapshot(struct vsnap_driver *drv, struct snapshot_tree *tree,
                     struct snapshot_entry *e, GError **error)
{
    g_autoptr(GPtrArray) chain = missing_chain(tree, e, error);
    if (!chain)
        return false;
    if (chain->len == 0)
        return true;
    g_autofree char *dir = drv->store.cache_dir ? g_strdup(drv->store.cache_dir)
                                                : store_cache_default_dir();
    g_autoptr(GError) local = NULL;
    struct store_cache *cache = store_cache_open(dir, drv->store.cache_size, &local);
    if (!cache) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "cannot import snapshot '%s': the store cache %s: %s", e->name, dir,
                    local->message);
        return false;
    }
    /* domjobinfo shows the pull, domjobabort stops it (persist/pull-job.h). */
    struct store_options o = drv->store.options;   /* shared strings, read only */
    o.progress = false;
    pull_job_begin(drv->pulls, tree->domain_uuid, &o);
    bool ok = true;
    for (guint i = chain->len; ok && i-- > 0;)
        ok = pull_one(drv, tree, cache, &o, chain->pdata[i], error);
    store_cache_close(cache);
    const char *reason = NULL;
    if (pull_job_end(drv->pulls, tree->domain_uuid, ok ? NULL : *error, &reason)) {
        /* Asked to stop: the revert stops here, even when the last bytes
         * came meanwhile (what was pulled whole stays: it is complete). */
        g_clear_error(error);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_ABORTED,
                    "snapshot revert job: %s (the import of snapshot '%s' from %s stopped "
                    "before the revert touched the domain)", reason ? reason : "canceled", e->name,
                    e->store_url);
        return false;
    }
    return ok;
}
