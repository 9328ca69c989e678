#include "fuzz-layer-file.h"

#include <glib.h>
#include <string.h>

#include "fuzz-common.h"
#include "snapshot/crc32c.h"
#include "snapshot/layer-internal.h"
#include "snapshot/layer.h"

/* Take n bytes from the tail (zeros once it runs out). */
static void take(const uint8_t **p, size_t *left, void *dst, size_t n)
{
    size_t k = MIN(n, *left);
    memcpy(dst, *p, k);
    memset((uint8_t *)dst + k, 0, n - k);
    *p += k;
    *left -= k;
}

static GByteArray *laid_out(struct snap_layer_header *h, unsigned flags, const uint8_t *tail,
                            size_t tail_len)
{
    h->page_count %= FUZZ_LAYER_MAX_PAGES;
    h->run_count %= FUZZ_LAYER_MAX_RUNS;
    h->block_count = snap_blocks_for_pages(h->page_count);
    h->index_offset = SNAP_LAYER_DATA_OFFSET + h->page_count * SNAP_PAGE_SIZE;
    h->csum_offset = h->index_offset + h->run_count * sizeof(struct snap_layer_run);
    h->file_size = h->csum_offset + h->block_count * sizeof(uint32_t);

    GByteArray *file = g_byte_array_sized_new((guint)h->file_size);
    g_byte_array_set_size(file, (guint)h->file_size);
    memset(file->data, 0, file->len);
    uint8_t fill = tail_len ? tail[0] : 0;
    for (uint64_t p = 0; p < h->page_count; p++)
        memset(file->data + SNAP_LAYER_DATA_OFFSET + p * SNAP_PAGE_SIZE, (uint8_t)(fill + p),
               SNAP_PAGE_SIZE);
    const uint8_t *cur = tail_len ? tail + 1 : tail;
    size_t left = tail_len ? tail_len - 1 : 0;
    struct snap_layer_run *runs = (struct snap_layer_run *)(file->data + h->index_offset);
    take(&cur, &left, runs, h->run_count * sizeof *runs);
    uint32_t *crcs = (uint32_t *)(file->data + h->csum_offset);
    for (uint64_t b = 0; b < h->block_count; b++) {
        if (flags & FUZZ_LAYER_FIX_BLOCKS) {
            uint64_t first = b * SNAP_BLOCK_PAGES;
            uint64_t pages = MIN((uint64_t)SNAP_BLOCK_PAGES, h->page_count - first);
            crcs[b] = crc32c(0, file->data + SNAP_LAYER_DATA_OFFSET + first * SNAP_PAGE_SIZE,
                             pages * SNAP_PAGE_SIZE);
        } else {
            take(&cur, &left, &crcs[b], sizeof crcs[b]);
        }
    }
    if (flags & FUZZ_LAYER_FIX_INDEX)
        h->index_crc = snap_layer_index_crc(runs, h->run_count, crcs, h->block_count);
    return file;
}

static GByteArray *raw(struct snap_layer_header *h, unsigned flags, const uint8_t *tail,
                       size_t tail_len)
{
    GByteArray *file = g_byte_array_sized_new(SNAP_LAYER_DATA_OFFSET + (guint)tail_len);
    g_byte_array_set_size(file, SNAP_LAYER_DATA_OFFSET);
    memset(file->data, 0, file->len);
    g_byte_array_append(file, tail, (guint)tail_len);
    /* The index where the header says it is, if the file holds it. */
    uint64_t runs_len = h->run_count * sizeof(struct snap_layer_run);
    uint64_t crcs_len = h->block_count * sizeof(uint32_t);
    if ((flags & FUZZ_LAYER_FIX_INDEX) && h->run_count <= file->len && h->block_count <= file->len &&
        h->index_offset <= file->len && runs_len <= file->len - h->index_offset &&
        h->csum_offset <= file->len && crcs_len <= file->len - h->csum_offset) {
        g_autofree struct snap_layer_run *runs = g_memdup2(file->data + h->index_offset, runs_len);
        g_autofree uint32_t *crcs = g_memdup2(file->data + h->csum_offset, crcs_len);
        h->index_crc = snap_layer_index_crc(runs, h->run_count, crcs, h->block_count);
    }
    return file;
}

void fuzz_layer_write(const char *path, const uint8_t *rec, size_t len)
{
    struct snap_layer_header h;
    size_t hlen = MIN(len, sizeof h);
    memset(&h, 0, sizeof h);
    memcpy(&h, rec, hlen);
    unsigned flags = len > sizeof h ? rec[sizeof h] : 0;
    const uint8_t *tail = len > sizeof h + 1 ? rec + sizeof h + 1 : rec + len;
    size_t tail_len = len > sizeof h + 1 ? len - sizeof h - 1 : 0;

    g_autoptr(GByteArray) file = (flags & FUZZ_LAYER_LAYOUT) ? laid_out(&h, flags, tail, tail_len)
                                                             : raw(&h, flags, tail, tail_len);
    if (flags & FUZZ_LAYER_FIX_HEADER)
        h.header_crc = snap_layer_header_crc(&h);
    memcpy(file->data, &h, sizeof h);
    fuzz_write_file(path, file->data, file->len);
}

void fuzz_layer_exercise(struct snap_layer *l)
{
    const struct snap_layer_header *h = &l->hdr;
    uint64_t ram_pages = h->ram_size / SNAP_PAGE_SIZE;
    /* Every run's edges and the pages either side of them. */
    for (uint64_t i = 0; i < h->run_count; i++) {
        uint64_t first = l->runs[i].first_page, last = first + l->runs[i].npages - 1;
        uint64_t probes[] = {first ? first - 1 : 0, first, last, last + 1};
        for (size_t k = 0; k < G_N_ELEMENTS(probes); k++) {
            uint64_t data_page = UINT64_MAX;
            if (probes[k] < ram_pages &&
                snap_layer_find(l, probes[k], &data_page) == SNAP_PAGE_KIND_DATA &&
                data_page >= h->page_count)
                g_error("page %" G_GUINT64_FORMAT " maps to data page %" G_GUINT64_FORMAT
                        " of %" G_GUINT64_FORMAT, probes[k], data_page, h->page_count);
        }
    }
    g_autoptr(GError) error = NULL;
    volatile uint8_t sum = 0;
    for (uint64_t p = 0; p < h->page_count; p++) {
        g_clear_error(&error);
        if (snap_layer_verify_data(l, p, 1, &error)) {
            const uint8_t *page = snap_layer_data_page(l, p);
            sum += page[0] + page[SNAP_PAGE_SIZE - 1];
        }
    }
}
