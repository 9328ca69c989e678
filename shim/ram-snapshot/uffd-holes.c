/* Which zero runs an on-demand restore leaves to the kernel (uffd-holes.h).
 * Each hole splits the RAM mapping into more areas (two per hole), so their
 * number is bounded: past MAX_HOLES only longer runs qualify. */
#include "uffd-holes.h"

#define MIN_HOLE_PAGES 4u    /* 16 KiB: shorter zero runs are served as today */
#define MAX_HOLES 2048u

static void add_run(GArray *holes, uint64_t first, uint64_t n, uint64_t align, uint64_t min)
{
    uint64_t start = (first + align - 1) / align * align, end = (first + n) / align * align;
    if (end > start && end - start >= min)
        g_array_append_val(holes, ((struct uffd_hole){ start, end - start }));
}

static GArray *zero_runs(const struct snap_chain *chain, uint64_t npages, uint64_t align, uint64_t min)
{
    GArray *holes = g_array_new(FALSE, FALSE, sizeof(struct uffd_hole));
    for (uint64_t p = 0; p < npages;) {
        enum snap_page_kind kind;
        unsigned layer = 0;
        uint64_t dp = 0, n = snap_chain_run(chain, p, npages - p, &kind, &layer, &dp);
        if (n == 0)
            break;
        if (kind == SNAP_PAGE_KIND_ZERO)
            add_run(holes, p, n, align, min);
        p += n;
    }
    return holes;
}

GArray *uffd_holes_find(const struct snap_chain *chain, uint64_t npages, uint64_t align_pages)
{
    uint64_t align = MAX(1, align_pages), min = MAX(MIN_HOLE_PAGES, align);
    GArray *holes = zero_runs(chain, npages, align, min);
    while (holes->len > MAX_HOLES) {
        min *= 2;
        GArray *fewer = g_array_new(FALSE, FALSE, sizeof(struct uffd_hole));
        for (guint i = 0; i < holes->len; i++) {
            struct uffd_hole *h = &g_array_index(holes, struct uffd_hole, i);
            if (h->n >= min)
                g_array_append_val(fewer, *h);
        }
        g_array_free(holes, TRUE);
        holes = fewer;
    }
    return holes;
}
