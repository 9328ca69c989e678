/* A chain of layers, base first, and the flat page -> layer index built from
 * their indexes (no page data is read to open a chain).
 *
 * Opening checks every layer (snap_layer_open) and that the layers fit together:
 * same page size and RAM size, layer 0 is a full layer, and each later layer's
 * parent id is the previous layer's id. Errors name the layer file and the
 * problem. */
#pragma once

#include "snapshot/layer.h"

#define SNAP_MAX_CHAIN 4096u /* < SNAP_INDEX_ZERO - 1 */

/* Page index entries: layer number + 1, or one of these. Absent is 0 so the
 * table starts as untouched zeroed memory and building it touches only the
 * entries of stored pages: restore setup does not grow with RAM size. */
#define SNAP_INDEX_ABSENT 0u      /* no layer holds the page (zero in a full chain) */
#define SNAP_INDEX_ZERO 0xffffu   /* the topmost layer holding it says zero */

struct snap_chain {
    unsigned nlayers;
    struct snap_layer **layers;  /* base first */
    uint64_t ram_size;
    uint64_t npages;
    uint16_t *page_layer;        /* npages entries: topmost layer holding the page */
    bool partial;                /* layer 0 is a diff (compaction of inner layers) */
};

enum snap_chain_flags {
    SNAP_CHAIN_DEFAULT = 0,
    /* Allow layer 0 to be a diff: for folding inner layers, never for restore. */
    SNAP_CHAIN_ALLOW_PARTIAL = 1,
};

struct snap_chain *snap_chain_open(const char *const *paths, unsigned npaths, unsigned flags,
                                   GError **error);
void snap_chain_free(struct snap_chain *chain);
typedef struct snap_chain snap_chain; /* for g_autoptr */
G_DEFINE_AUTOPTR_CLEANUP_FUNC(snap_chain, snap_chain_free)

/* The top layer's id: what a diff taken after restoring this chain names as parent. */
const snap_id *snap_chain_top_id(const struct snap_chain *chain);

/* True if the chain stores data for RAM page `page` (not zero, not absent). */
static inline bool snap_chain_page_has_data(const struct snap_chain *chain, uint64_t page)
{
    uint16_t e = chain->page_layer[page];
    return e != SNAP_INDEX_ABSENT && e != SNAP_INDEX_ZERO;
}

/* Where RAM page `page` comes from: SNAP_PAGE_KIND_ZERO (also for absent pages
 * of a full chain), _ABSENT (partial chains only) or _DATA with *layer and
 * *data_page set. */
enum snap_page_kind snap_chain_find(const struct snap_chain *chain, uint64_t page,
                                    unsigned *layer, uint64_t *data_page);

/* Length of the run of pages starting at `page` (at most max_pages) that come
 * from the same source as `page`: the same layer with consecutive data pages,
 * or all zero, or all absent. Lets copy/merge/uffd move whole runs at once. */
uint64_t snap_chain_run(const struct snap_chain *chain, uint64_t page, uint64_t max_pages,
                        enum snap_page_kind *kind, unsigned *layer, uint64_t *data_page);

/* Pages [page, page + n) come from src (n pages of layer l's data). */
typedef bool (*snap_data_run_fn)(void *opaque, struct snap_layer *l, uint64_t page, uint64_t n,
                                 const uint8_t *src, GError **error);

/* fn for each data run of the chain, in RAM order, each checked by
 * snap_layer_verify_data before; zero and absent runs are skipped (what the
 * eager restores and the shared RAM image walk). */
bool snap_chain_each_data_run(struct snap_chain *c, snap_data_run_fn fn, void *opaque, GError **error);
