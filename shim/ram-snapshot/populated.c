/* Which pages of guest RAM are populated: what a full layer holds (save.c)
 * and a live snapshot's first pass copies (scratch.c). */
#include "ram-snapshot/save.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "snapshot/layer.h"

#define MINCORE_CHUNK_PAGES (1u << 16)

static bool scan_failed(GError **error, const char *how)
{
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO, "cannot find populated guest memory (%s): %s", how,
                g_strerror(errno));
    return false;
}

static void set_range(uint64_t *bitmap, uint64_t first, uint64_t end)
{
    for (uint64_t p = first; p < end; p++)
        bitmap[p / 64] |= 1ull << (p % 64);
}

/* File-backed RAM (memfd): SEEK_DATA / SEEK_HOLE. */
static bool populated_by_file(const struct snap_ram *ram, uint64_t *bitmap, GError **error)
{
    off_t pos = 0;
    while ((uint64_t)pos < ram->size) {
        off_t data = lseek(ram->fd, pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            return true;
        off_t hole = data < 0 ? -1 : lseek(ram->fd, data, SEEK_HOLE);
        if (data < 0 || hole < 0)
            return scan_failed(error, "lseek");
        uint64_t end = MIN(ram->size, ((uint64_t)hole + SNAP_PAGE_SIZE - 1) & ~(uint64_t)(SNAP_PAGE_SIZE - 1));
        if (end <= (uint64_t)data)
            return true;
        set_range(bitmap, (uint64_t)data / SNAP_PAGE_SIZE, end / SNAP_PAGE_SIZE);
        pos = (off_t)end;
    }
    return true;
}

/* Anonymous or hugetlbfs RAM (hugetlbfs's SEEK_DATA calls every page data): mincore(), chunk by chunk. */
static bool populated_by_mincore(const struct snap_ram *ram, uint64_t *bitmap, GError **error)
{
    uint64_t npages = ram->size / SNAP_PAGE_SIZE;
    g_autofree unsigned char *vec = g_malloc(MINCORE_CHUNK_PAGES);
    for (uint64_t base = 0; base < npages; base += MINCORE_CHUNK_PAGES) {
        uint64_t n = MIN((uint64_t)MINCORE_CHUNK_PAGES, npages - base);
        if (mincore((void *)(ram->host + base * SNAP_PAGE_SIZE), n * SNAP_PAGE_SIZE, vec) < 0)
            return scan_failed(error, "mincore");
        for (uint64_t i = 0; i < n; i++)
            if (vec[i] & 1)
                bitmap[(base + i) / 64] |= 1ull << ((base + i) % 64);
    }
    return true;
}

bool snap_ram_populated(const struct snap_ram *ram, uint64_t *bitmap, GError **error)
{
    bool by_file = ram->fd >= 0 && ram->page_size <= SNAP_PAGE_SIZE;
    if (ram->private_file)
        return populated_by_file(ram, bitmap, error) && populated_by_mincore(ram, bitmap, error);
    return by_file ? populated_by_file(ram, bitmap, error) : populated_by_mincore(ram, bitmap, error);
}
