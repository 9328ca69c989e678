/* Opening and checking a chain of layers. */
#include "snapshot/chain.h"

#include "snapshot/layer-internal.h"

static bool check_link(const struct snap_chain *c, unsigned i, GError **error)
{
    const struct snap_layer *l = c->layers[i];
    char want[37], have[37];
    if (snap_layer_is_disk(l) != snap_layer_is_disk(c->layers[0])) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN, "snapshot layer %s: is a %s layer in a chain of %s layers",
                    l->path, snap_layer_is_disk(l) ? "disk" : "memory",
                    snap_layer_is_disk(c->layers[0]) ? "disk" : "memory");
        return false;
    }
    if (l->hdr.ram_size != c->layers[0]->hdr.ram_size) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN,
                    "snapshot layer %s: RAM size %" G_GUINT64_FORMAT " differs from the base's %"
                    G_GUINT64_FORMAT, l->path, l->hdr.ram_size, c->layers[0]->hdr.ram_size);
        return false;
    }
    if (i == 0) {
        if (!snap_layer_is_full(l) && !c->partial) {
            snap_id_to_string(&l->hdr.parent_id, want);
            g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN,
                        "snapshot layer %s: is a diff (parent %s) but is first in the chain; "
                        "the chain must start with its base layer", l->path, want);
            return false;
        }
        return true;
    }
    const struct snap_layer *prev = c->layers[i - 1];
    if (!snap_id_equal(&l->hdr.parent_id, &prev->hdr.id)) {
        snap_id_to_string(&prev->hdr.id, want);
        snap_id_to_string(&l->hdr.parent_id, have);
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN,
                    "snapshot layer %s: wrong parent: it was taken on top of layer %s, but the "
                    "layer before it in the chain (%s) is %s",
                    l->path, snap_id_is_nil(&l->hdr.parent_id) ? "(none: it is a full layer)" : have,
                    prev->path, want);
        return false;
    }
    return true;
}

struct snap_chain *snap_chain_open(const char *const *paths, unsigned npaths, unsigned flags,
                                   GError **error)
{
    if (npaths == 0 || npaths > SNAP_MAX_CHAIN) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                    "a snapshot chain needs 1 to %u layers, got %u", SNAP_MAX_CHAIN, npaths);
        return NULL;
    }
    g_autoptr(snap_chain) c = g_new0(struct snap_chain, 1);
    c->layers = g_new0(struct snap_layer *, npaths);
    c->partial = flags & SNAP_CHAIN_ALLOW_PARTIAL;
    for (unsigned i = 0; i < npaths; i++) {
        c->layers[i] = snap_layer_open(paths[i], error);
        if (!c->layers[i])
            return NULL;
        c->nlayers = i + 1;
        if (!check_link(c, i, error))
            return NULL;
    }
    c->partial = !snap_layer_is_full(c->layers[0]);
    c->ram_size = c->layers[0]->hdr.ram_size;
    c->npages = c->ram_size / SNAP_PAGE_SIZE;
    snap_page_index_build(c);
    return g_steal_pointer(&c);
}

void snap_chain_free(struct snap_chain *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < c->nlayers; i++)
        snap_layer_close(c->layers[i]);
    g_free(c->layers);
    g_free(c->page_layer);
    g_free(c);
}

const snap_id *snap_chain_top_id(const struct snap_chain *c)
{
    return &c->layers[c->nlayers - 1]->hdr.id;
}
