/* Full and diff layers from guest RAM. The scan reads only populated (full) or
 * dirty (diff) pages; runs of non-zero pages are handed to the writer as one
 * pointer into guest RAM, so nothing is copied on the way except by write(). */
#include "ram-snapshot/save.h"
#include "ram-snapshot/dirty-bitmap.h"

#include "snapshot/layer-write.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool page_is_zero(const uint8_t *p)
{
    return p[0] == 0 && memcmp(p, p + 1, SNAP_PAGE_SIZE - 1) == 0;
}

/* Store pages [first, first + n): runs of non-zero pages as data, zero pages
 * as zero runs (the writer drops those in full layers). */
static bool store_pages(struct snap_layer_writer *w, const struct snap_ram *ram, uint64_t first,
                        uint64_t n, struct snap_save_stats *st, GError **error)
{
    uint64_t p = first, end = first + n;
    while (p < end) {
        const uint8_t *host = ram->host + p * SNAP_PAGE_SIZE;
        bool zero = page_is_zero(host);
        uint64_t q = p + 1;
        while (q < end && page_is_zero(ram->host + q * SNAP_PAGE_SIZE) == zero)
            q++;
        if (!snap_layer_writer_add(w, p, q - p, zero ? NULL : host, error))
            return false;
        if (zero)
            st->zero_pages += q - p;
        else
            st->data_pages += q - p;
        p = q;
    }
    st->scanned_pages += n;
    return true;
}

/* A step's end: steps->go_on once another SNAP_SAVE_STEP_PAGES were read. */
static bool step_done(const struct snap_steps *steps, const struct snap_save_stats *st, uint64_t *next,
                      GError **error)
{
    if (!steps || st->scanned_pages < *next)
        return true;
    *next = st->scanned_pages + SNAP_SAVE_STEP_PAGES;
    return steps->go_on(steps->data, st->scanned_pages, error);
}

/* Every run of pages set in bitmap (bit p of word p / 64 is RAM page p),
 * a run at most a step long. */
static bool store_bitmap(struct snap_layer_writer *w, const struct snap_ram *ram, const uint64_t *bitmap,
                         const struct snap_steps *steps, struct snap_save_stats *st, GError **error)
{
    uint64_t npages = ram->size / SNAP_PAGE_SIZE, next = SNAP_SAVE_STEP_PAGES;
    for (uint64_t p = 0; p < npages;) {
        if (!(bitmap[p / 64] >> (p % 64) & 1)) {
            p = (p % 64 == 0 && bitmap[p / 64] == 0) ? p + 64 : p + 1;
            continue;
        }
        uint64_t q = p + 1;
        while (q < npages && q - p < SNAP_SAVE_STEP_PAGES && (bitmap[q / 64] >> (q % 64) & 1))
            q++;
        if (!store_pages(w, ram, p, q - p, st, error) || !step_done(steps, st, &next, error))
            return false;
        p = q;
    }
    return true;
}

static bool check_ram(const char *path, const struct snap_ram *ram, GError **error)
{
    if (!ram->host || ram->size == 0 || ram->size % SNAP_PAGE_SIZE ||
        ((uintptr_t)ram->host % SNAP_PAGE_SIZE)) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                    "cannot write snapshot layer %s: guest RAM is not a page-aligned mapping", path);
        return false;
    }
    return true;
}

static bool finish(struct snap_layer_writer *w, bool ok, const char *path,
                   struct snap_save_stats *st, uint64_t t0, GError **error)
{
    if (!ok) {
        snap_layer_writer_abort(w);
        return false;
    }
    if (!snap_layer_writer_commit(w, error))
        return false;
    struct stat sb;
    st->file_bytes = stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    st->elapsed_ns = now_ns() - t0;
    return true;
}

bool snap_save_full(const char *path, const struct snap_ram *ram, const snap_id *id,
                    struct snap_save_stats *stats, GError **error)
{
    return snap_save_full_steps(path, ram, id, NULL, stats, error);
}

bool snap_save_full_steps(const char *path, const struct snap_ram *ram, const snap_id *id,
                          const struct snap_steps *steps, struct snap_save_stats *stats, GError **error)
{
    struct snap_save_stats local = { 0 }, *st = stats ? stats : &local;
    memset(st, 0, sizeof *st);
    uint64_t t0 = now_ns();
    if (!check_ram(path, ram, error))
        return false;
    struct snap_layer_writer *w = snap_layer_writer_new(path, ram->size, id, NULL, error);
    if (!w)
        return false;
    g_autofree uint64_t *populated = snap_dirty_bitmap_new(ram->size);
    bool ok = snap_ram_populated(ram, populated, error) && store_bitmap(w, ram, populated, steps, st, error);
    return finish(w, ok, path, st, t0, error);
}

bool snap_save_diff(const char *path, const struct snap_ram *ram, const uint64_t *dirty,
                    const snap_id *id, const snap_id *parent, struct snap_save_stats *stats,
                    GError **error)
{
    return snap_save_diff_steps(path, ram, dirty, id, parent, NULL, stats, error);
}

bool snap_save_diff_steps(const char *path, const struct snap_ram *ram, const uint64_t *dirty,
                          const snap_id *id, const snap_id *parent, const struct snap_steps *steps,
                          struct snap_save_stats *stats, GError **error)
{
    struct snap_save_stats local = { 0 }, *st = stats ? stats : &local;
    memset(st, 0, sizeof *st);
    uint64_t t0 = now_ns();
    if (!check_ram(path, ram, error))
        return false;
    if (!parent || snap_id_is_nil(parent)) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                    "cannot write diff layer %s: no parent layer id", path);
        return false;
    }
    struct snap_layer_writer *w = snap_layer_writer_new(path, ram->size, id, parent, error);
    if (!w)
        return false;
    return finish(w, store_bitmap(w, ram, dirty, steps, st, error), path, st, t0, error);
}
