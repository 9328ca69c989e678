/* Chains of memory layers as a restore opens them (snap_chain_open: each
 * layer, the links between them, the page index), then every page looked
 * up through the chain as the restore paths do (snap_chain_find,
 * snap_chain_run), checked against the layers' own answers, and the chain
 * compacted into one layer that must open again and hold the same pages.
 *
 * Input: one byte of flags (bit 0: open as a partial chain, as folding
 * does), then up to 8 records of fuzz-layer-file.h, each starting with
 * the layer magic "VSNAPLYR", which is where the input is cut. */
#include <string.h>

#include "fuzz-common.h"
#include "fuzz-layer-file.h"
#include "snapshot/chain.h"
#include "snapshot/compact.h"

#define MAX_LAYERS 8u
/* Pages looked at per chain; a header may announce terabytes of RAM. */
#define MAX_PAGES 4096u

static char *paths[MAX_LAYERS];
static char *compacted;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    for (unsigned i = 0; i < MAX_LAYERS; i++) {
        g_autofree char *name = g_strdup_printf("layer-%u", i);
        paths[i] = fuzz_path(name);
    }
    compacted = fuzz_path("compacted");
    return 0;
}

static unsigned split(const uint8_t *data, size_t size)
{
    static const char magic[] = SNAP_LAYER_MAGIC;
    const size_t mlen = sizeof magic - 1;
    unsigned n = 0;
    const uint8_t *rec = memmem(data, size, magic, mlen);
    while (rec && n < MAX_LAYERS) {
        size_t left = size - (size_t)(rec - data);
        const uint8_t *next = left > mlen ? memmem(rec + mlen, left - mlen, magic, mlen) : NULL;
        size_t len = next ? (size_t)(next - rec) : left;
        fuzz_layer_write(paths[n++], rec, len);
        rec = next;
    }
    return n;
}

static void check_pages(const struct snap_chain *c)
{
    uint64_t end = MIN(c->npages, (uint64_t)MAX_PAGES);
    for (uint64_t page = 0; page < end;) {
        enum snap_page_kind kind;
        unsigned layer = UINT_MAX;
        uint64_t data_page = UINT64_MAX;
        uint64_t n = snap_chain_run(c, page, end - page, &kind, &layer, &data_page);
        if (n == 0 || n > end - page)
            g_error("snap_chain_run at page %" G_GUINT64_FORMAT ": %" G_GUINT64_FORMAT " pages",
                    page, n);
        if (kind == SNAP_PAGE_KIND_DATA) {
            if (layer >= c->nlayers)
                g_error("page %" G_GUINT64_FORMAT " is in layer %u of %u", page, layer, c->nlayers);
            const struct snap_layer *l = c->layers[layer];
            uint64_t own = UINT64_MAX;
            if (snap_layer_find(l, page + n - 1, &own) != SNAP_PAGE_KIND_DATA ||
                own != data_page + n - 1 || own >= l->hdr.page_count)
                g_error("a run of %" G_GUINT64_FORMAT " data pages from page %" G_GUINT64_FORMAT
                        " is not what layer %u holds", n, page, layer);
        }
        page += n;
    }
}

static void check_compacted(struct snap_chain *c)
{
    if (c->npages > MAX_PAGES)
        return;
    snap_id id;
    memset(&id, 0x5a, sizeof id);
    g_autoptr(GError) error = NULL;
    if (!snap_compact_chain(c, compacted, &id, &error))
        return;   /* a chain whose data fails its checksums does not compact */
    const char *one[] = {compacted};
    g_autoptr(snap_chain) again =
        snap_chain_open(one, 1, c->partial ? SNAP_CHAIN_ALLOW_PARTIAL : SNAP_CHAIN_DEFAULT, &error);
    if (!again)
        g_error("the compacted layer does not open: %s", error->message);
    for (uint64_t page = 0; page < c->npages; page++) {
        unsigned la, lb;
        uint64_t da, db;
        enum snap_page_kind ka = snap_chain_find(c, page, &la, &da);
        enum snap_page_kind kb = snap_chain_find(again, page, &lb, &db);
        bool a_zero = ka != SNAP_PAGE_KIND_DATA, b_zero = kb != SNAP_PAGE_KIND_DATA;
        /* A full layer has no zero runs (absent is zero); a diff keeps them. */
        if (c->partial ? ka != kb : a_zero != b_zero)
            g_error("page %" G_GUINT64_FORMAT ": kind %d in the chain, %d in its compaction", page,
                    ka, kb);
        if (!a_zero && !b_zero &&
            memcmp(snap_layer_data_page(c->layers[la], da),
                   snap_layer_data_page(again->layers[lb], db), SNAP_PAGE_SIZE) != 0)
            g_error("page %" G_GUINT64_FORMAT " differs after compaction", page);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return -1;
    unsigned flags = data[0] & 1 ? SNAP_CHAIN_ALLOW_PARTIAL : SNAP_CHAIN_DEFAULT;
    unsigned n = split(data + 1, size - 1);
    if (n == 0)
        return -1;
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_chain) chain = snap_chain_open((const char *const *)paths, n, flags, &error);
    if (!chain) {
        g_debug("%s", error->message);
        return 0;
    }
    check_pages(chain);
    check_compacted(chain);
    return 0;
}
