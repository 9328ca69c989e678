/* The flat page -> layer index: one 16-bit entry per RAM page (4 MiB for 8 GiB
 * of RAM, allocated zeroed and so left untouched where no layer has data),
 * filled from the layers' run lists base first so later layers overwrite
 * earlier ones. Lookups of the data position go back to the layer's
 * own index (a binary search), which keeps this table small. */
#include "snapshot/chain.h"

#include "snapshot/layer-internal.h"

void snap_page_index_build(struct snap_chain *c)
{
    c->page_layer = g_new0(uint16_t, c->npages ? c->npages : 1); /* all SNAP_INDEX_ABSENT */
    for (unsigned i = 0; i < c->nlayers; i++) {
        const struct snap_layer *l = c->layers[i];
        for (uint64_t r = 0; r < l->hdr.run_count; r++) {
            const struct snap_layer_run *run = &l->runs[r];
            uint16_t v = run->kind == SNAP_RUN_ZERO ? SNAP_INDEX_ZERO : (uint16_t)(i + 1);
            uint16_t *e = c->page_layer + run->first_page;
            for (uint32_t k = 0; k < run->npages; k++)
                e[k] = v;
        }
    }
}

static enum snap_page_kind entry_kind(const struct snap_chain *c, uint16_t e)
{
    if (e == SNAP_INDEX_ZERO)
        return SNAP_PAGE_KIND_ZERO;
    if (e == SNAP_INDEX_ABSENT)
        return c->partial ? SNAP_PAGE_KIND_ABSENT : SNAP_PAGE_KIND_ZERO;
    return SNAP_PAGE_KIND_DATA;
}

enum snap_page_kind snap_chain_find(const struct snap_chain *c, uint64_t page, unsigned *layer,
                                    uint64_t *data_page)
{
    uint16_t e = c->page_layer[page];
    enum snap_page_kind kind = entry_kind(c, e);
    if (kind == SNAP_PAGE_KIND_DATA) {
        *layer = e - 1u;
        snap_layer_find(c->layers[e - 1u], page, data_page);
    }
    return kind;
}

uint64_t snap_chain_run(const struct snap_chain *c, uint64_t page, uint64_t max_pages,
                        enum snap_page_kind *kind, unsigned *layer, uint64_t *data_page)
{
    uint64_t end = MIN(c->npages, page + max_pages);
    uint16_t e = c->page_layer[page];
    *kind = snap_chain_find(c, page, layer, data_page);
    uint64_t n = 1;
    if (*kind != SNAP_PAGE_KIND_DATA) {
        while (page + n < end && entry_kind(c, c->page_layer[page + n]) == *kind)
            n++;
        return n;
    }
    /* Same layer and consecutive in its data area: inside one run of the layer,
     * and not covered by a later layer. */
    const struct snap_layer *l = c->layers[e - 1u];
    const struct snap_layer_run *run = &l->runs[snap_layer_find_run(l, page)];
    end = MIN(end, run->first_page + run->npages);
    while (page + n < end && c->page_layer[page + n] == e)
        n++;
    return n;
}
