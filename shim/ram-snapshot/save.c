/* Full and diff layers from guest RAM. The scan reads only populated (full) or
 * dirty (diff) pages; runs of non-zero pages are handed to the writer as one
 * pointer into guest RAM, so nothing is copied on the way except by write(). */
#include "ram-snapshot/save.h"

#include "snapshot/layer-write.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MINCORE_CHUNK_PAGES (1u << 16)

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

/* Populated ranges of a file-backed RAM: SEEK_DATA / SEEK_HOLE. */
static bool scan_file(struct snap_layer_writer *w, const struct snap_ram *ram,
                      struct snap_save_stats *st, GError **error)
{
    off_t pos = 0;
    while ((uint64_t)pos < ram->size) {
        off_t data = lseek(ram->fd, pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            return true;
        off_t hole = data < 0 ? -1 : lseek(ram->fd, data, SEEK_HOLE);
        if (data < 0 || hole < 0) {
            g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO,
                        "cannot find populated guest memory (lseek): %s", g_strerror(errno));
            return false;
        }
        uint64_t first = (uint64_t)data / SNAP_PAGE_SIZE;
        uint64_t end = MIN(ram->size, ((uint64_t)hole + SNAP_PAGE_SIZE - 1) & ~(uint64_t)(SNAP_PAGE_SIZE - 1));
        if (end <= (uint64_t)data)
            return true;
        if (!store_pages(w, ram, first, end / SNAP_PAGE_SIZE - first, st, error))
            return false;
        pos = (off_t)end;
    }
    return true;
}

/* Populated pages of anonymous or hugetlbfs RAM: mincore(), chunk by chunk. */
static bool scan_mapped(struct snap_layer_writer *w, const struct snap_ram *ram,
                           struct snap_save_stats *st, GError **error)
{
    uint64_t npages = ram->size / SNAP_PAGE_SIZE;
    g_autofree unsigned char *vec = g_malloc(MINCORE_CHUNK_PAGES);
    for (uint64_t base = 0; base < npages; base += MINCORE_CHUNK_PAGES) {
        uint64_t n = MIN((uint64_t)MINCORE_CHUNK_PAGES, npages - base);
        if (mincore((void *)(ram->host + base * SNAP_PAGE_SIZE), n * SNAP_PAGE_SIZE, vec) < 0) {
            g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO,
                        "cannot find populated guest memory (mincore): %s", g_strerror(errno));
            return false;
        }
        for (uint64_t i = 0; i < n;) {
            if (!(vec[i] & 1)) {
                i++;
                continue;
            }
            uint64_t j = i + 1;
            while (j < n && (vec[j] & 1))
                j++;
            if (!store_pages(w, ram, base + i, j - i, st, error))
                return false;
            i = j;
        }
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
    struct snap_save_stats local = { 0 }, *st = stats ? stats : &local;
    memset(st, 0, sizeof *st);
    uint64_t t0 = now_ns();
    if (!check_ram(path, ram, error))
        return false;
    struct snap_layer_writer *w = snap_layer_writer_new(path, ram->size, id, NULL, error);
    if (!w)
        return false;
    bool by_file = ram->fd >= 0 && ram->page_size <= SNAP_PAGE_SIZE;
    bool ok = by_file ? scan_file(w, ram, st, error) : scan_mapped(w, ram, st, error);
    return finish(w, ok, path, st, t0, error);
}

bool snap_save_diff(const char *path, const struct snap_ram *ram, const uint64_t *dirty,
                    const snap_id *id, const snap_id *parent, struct snap_save_stats *stats,
                    GError **error)
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
    uint64_t npages = ram->size / SNAP_PAGE_SIZE;
    bool ok = true;
    for (uint64_t p = 0; ok && p < npages;) {
        if (!(dirty[p / 64] >> (p % 64) & 1)) {
            p = (p % 64 == 0 && dirty[p / 64] == 0) ? p + 64 : p + 1;
            continue;
        }
        uint64_t q = p + 1;
        while (q < npages && (dirty[q / 64] >> (q % 64) & 1))
            q++;
        ok = store_pages(w, ram, p, q - p, st, error);
        p = q;
    }
    return finish(w, ok, path, st, t0, error);
}
