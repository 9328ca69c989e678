/* The walk over a chain's data runs: snapshot/chain.h. */
#include "snapshot/chain.h"

bool snap_chain_each_data_run(struct snap_chain *c, snap_data_run_fn fn, void *opaque, GError **error)
{
    for (uint64_t p = 0; p < c->npages;) {
        enum snap_page_kind kind;
        unsigned layer = 0;
        uint64_t data_page = 0;
        uint64_t n = snap_chain_run(c, p, c->npages - p, &kind, &layer, &data_page);
        if (kind == SNAP_PAGE_KIND_DATA) {
            struct snap_layer *l = c->layers[layer];
            if (!snap_layer_verify_data(l, data_page, n, error) ||
                !fn(opaque, l, p, n, snap_layer_data_page(l, data_page), error))
                return false;
        }
        p += n;
    }
    return true;
}
