/* Opening a layer: everything except page data is read and checked here, so a
 * chain can be refused before a VM runs. Page data is mmapped and checked block
 * by block when first used (snap_layer_verify_data). */
#include "snapshot/layer.h"

#include "snapshot/crc32c.h"
#include "snapshot/layer-internal.h"
#include "snapshot/mapped-read.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { BLOCK_UNCHECKED, BLOCK_GOOD, BLOCK_BAD };

#define bad_layer(error, code, path, ...) snap_file_error(error, code, "snapshot layer", path, __VA_ARGS__)

static bool read_exact(int fd, void *buf, size_t len, uint64_t off, const char *path,
                       GError **error)
{
    ssize_t n = snap_pread_upto(fd, buf, len, off);
    if (n < 0)
        return bad_layer(error, SNAP_ERROR_IO, path, "read failed: %s", g_strerror((int)-n));
    if ((size_t)n < len)
        return bad_layer(error, SNAP_ERROR_FORMAT, path, "truncated (unexpected end of file)");
    return true;
}

static bool check_header(const struct snap_layer_header *h, uint64_t file_size, const char *path,
                         GError **error)
{
    if (memcmp(h->magic, SNAP_LAYER_MAGIC, 8) != 0)
        return bad_layer(error, SNAP_ERROR_FORMAT, path, "not a vsnap memory layer (bad magic)");
    if (h->version != SNAP_LAYER_VERSION)
        return bad_layer(error, SNAP_ERROR_FORMAT, path,
                         "format version %u is not supported (this vsnap reads version %u)",
                         h->version, SNAP_LAYER_VERSION);
    if (h->header_size != sizeof *h)
        return bad_layer(error, SNAP_ERROR_FORMAT, path, "header size %u, expected %zu",
                         h->header_size, sizeof *h);
    if (snap_layer_header_crc(h) != h->header_crc)
        return bad_layer(error, SNAP_ERROR_CHECKSUM, path, "header checksum mismatch (corrupt header)");
    if (h->page_size != SNAP_PAGE_SIZE || h->block_pages != SNAP_BLOCK_PAGES)
        return bad_layer(error, SNAP_ERROR_FORMAT, path,
                         "page size %u / block of %u pages not supported", h->page_size,
                         h->block_pages);
    if (h->flags & ~SNAP_LAYER_KNOWN_FLAGS)
        return bad_layer(error, SNAP_ERROR_FORMAT, path, "unknown flags %#x", h->flags);
    bool full = h->flags & SNAP_LAYER_FLAG_FULL, disk = h->flags & SNAP_LAYER_FLAG_DISK;
    uint64_t max_size = disk ? SNAP_MAX_DISK_SIZE : SNAP_MAX_RAM_SIZE;
    if (h->ram_size == 0 || h->ram_size % SNAP_PAGE_SIZE || h->ram_size > max_size)
        return bad_layer(error, SNAP_ERROR_FORMAT, path, "invalid %s size %" G_GUINT64_FORMAT,
                         disk ? "disk" : "RAM", h->ram_size);
    uint64_t ram_pages = h->ram_size / SNAP_PAGE_SIZE;
    /* A disk layer is never full: below its first layer is the base image. */
    if (disk ? full : full != snap_id_is_nil(&h->parent_id))
        return bad_layer(error, SNAP_ERROR_FORMAT, path, "full flag and parent id disagree");
    if (h->page_count > ram_pages || h->run_count > ram_pages ||
        h->block_count != snap_blocks_for_pages(h->page_count))
        return bad_layer(error, SNAP_ERROR_FORMAT, path, "page, run or block counts are inconsistent");
    uint64_t data_end = SNAP_LAYER_DATA_OFFSET + h->page_count * SNAP_PAGE_SIZE;
    if (h->index_offset != data_end ||
        h->csum_offset != h->index_offset + h->run_count * sizeof(struct snap_layer_run) ||
        h->file_size != h->csum_offset + h->block_count * sizeof(uint32_t))
        return bad_layer(error, SNAP_ERROR_FORMAT, path, "section offsets are inconsistent");
    if (file_size < h->file_size)
        return bad_layer(error, SNAP_ERROR_FORMAT, path,
                         "truncated: %" G_GUINT64_FORMAT " bytes, the header says %" G_GUINT64_FORMAT,
                         file_size, h->file_size);
    if (file_size > h->file_size)
        return bad_layer(error, SNAP_ERROR_FORMAT, path,
                         "%" G_GUINT64_FORMAT " bytes, the header says %" G_GUINT64_FORMAT
                         " (trailing garbage)", file_size, h->file_size);
    return true;
}

/* Runs sorted, non-overlapping, inside RAM, data runs adding up to page_count. */
static bool check_runs(struct snap_layer *l, GError **error)
{
    const struct snap_layer_header *h = &l->hdr;
    uint64_t ram_pages = h->ram_size / SNAP_PAGE_SIZE, next_free = 0, data_pages = 0;
    l->run_data_page = g_new0(uint64_t, h->run_count ? h->run_count : 1);
    for (uint64_t i = 0; i < h->run_count; i++) {
        const struct snap_layer_run *r = &l->runs[i];
        if (r->npages == 0 || r->kind > SNAP_RUN_ZERO || r->first_page < next_free ||
            r->first_page > ram_pages || r->npages > ram_pages - r->first_page)
            return bad_layer(error, SNAP_ERROR_FORMAT, l->path,
                             "index entry %" G_GUINT64_FORMAT " is invalid (page %" G_GUINT64_FORMAT
                             "+%u)", i, r->first_page, r->npages);
        if (r->kind == SNAP_RUN_ZERO && (h->flags & SNAP_LAYER_FLAG_FULL))
            return bad_layer(error, SNAP_ERROR_FORMAT, l->path, "zero run in a full layer");
        next_free = r->first_page + r->npages;
        l->run_data_page[i] = data_pages;
        if (r->kind == 0)
            data_pages += r->npages;
    }
    if (data_pages != h->page_count)
        return bad_layer(error, SNAP_ERROR_FORMAT, l->path,
                         "index covers %" G_GUINT64_FORMAT " data pages, header says %" G_GUINT64_FORMAT,
                         data_pages, h->page_count);
    return true;
}

static bool read_index(struct snap_layer *l, GError **error)
{
    const struct snap_layer_header *h = &l->hdr;
    l->runs = g_new(struct snap_layer_run, h->run_count ? h->run_count : 1);
    l->block_crc = g_new(uint32_t, h->block_count ? h->block_count : 1);
    l->block_state = g_new0(uint8_t, h->block_count ? h->block_count : 1);
    if (!read_exact(l->fd, l->runs, h->run_count * sizeof *l->runs, h->index_offset, l->path, error) ||
        !read_exact(l->fd, l->block_crc, h->block_count * sizeof(uint32_t), h->csum_offset, l->path,
                    error))
        return false;
    if (snap_layer_index_crc(l->runs, h->run_count, l->block_crc, h->block_count) != h->index_crc)
        return bad_layer(error, SNAP_ERROR_CHECKSUM, l->path, "index checksum mismatch (corrupt index)");
    return check_runs(l, error);
}

static bool map_data(struct snap_layer *l, GError **error)
{
    l->data_len = l->hdr.page_count * SNAP_PAGE_SIZE;
    if (!l->data_len)
        return true;
    void *p = mmap(NULL, l->data_len, PROT_READ, MAP_SHARED, l->fd, SNAP_LAYER_DATA_OFFSET);
    if (p == MAP_FAILED)
        return bad_layer(error, SNAP_ERROR_IO, l->path, "cannot map page data: %s", g_strerror(errno));
    l->data = p;
    return true;
}

struct snap_layer *snap_layer_open(const char *path, GError **error)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        bad_layer(error, SNAP_ERROR_IO, path, "cannot open: %s", g_strerror(errno));
        return NULL;
    }
    g_autoptr(snap_layer) l = g_new0(struct snap_layer, 1);
    l->path = g_strdup(path);
    l->fd = fd;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        bad_layer(error, SNAP_ERROR_IO, path, "cannot stat: %s", g_strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        bad_layer(error, SNAP_ERROR_FORMAT, path, "not a regular file");
        return NULL;
    }
    if ((uint64_t)st.st_size < SNAP_LAYER_DATA_OFFSET) {
        bad_layer(error, SNAP_ERROR_FORMAT, path, "truncated: %lld bytes, smaller than a header",
                  (long long)st.st_size);
        return NULL;
    }
    if (!read_exact(fd, &l->hdr, sizeof l->hdr, 0, path, error) ||
        !check_header(&l->hdr, (uint64_t)st.st_size, path, error) || !read_index(l, error) ||
        !map_data(l, error))
        return NULL;
    /* The mapping keeps the file; dropping the fd lets long chains stay far
     * below the process's file limit. */
    close(l->fd);
    l->fd = -1;
    return g_steal_pointer(&l);
}

void snap_layer_close(struct snap_layer *l)
{
    if (!l)
        return;
    if (l->data)
        munmap((void *)l->data, l->data_len);
    if (l->fd >= 0)
        close(l->fd);
    g_free(l->runs);
    g_free(l->run_data_page);
    g_free(l->block_crc);
    g_free(l->block_state);
    g_free(l->path);
    g_free(l);
}

int64_t snap_layer_find_run(const struct snap_layer *l, uint64_t page)
{
    uint64_t lo = 0, hi = l->hdr.run_count;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const struct snap_layer_run *r = &l->runs[mid];
        if (page < r->first_page)
            hi = mid;
        else if (page >= r->first_page + r->npages)
            lo = mid + 1;
        else
            return (int64_t)mid;
    }
    return -1;
}

enum snap_page_kind snap_layer_find(const struct snap_layer *l, uint64_t page, uint64_t *data_page)
{
    int64_t i = snap_layer_find_run(l, page);
    if (i < 0)
        return SNAP_PAGE_KIND_ABSENT;
    const struct snap_layer_run *r = &l->runs[i];
    if (r->kind == SNAP_RUN_ZERO)
        return SNAP_PAGE_KIND_ZERO;
    if (data_page)
        *data_page = l->run_data_page[i] + (page - r->first_page);
    return SNAP_PAGE_KIND_DATA;
}

static bool verify_block(struct snap_layer *l, uint64_t block, GError **error)
{
    uint8_t state = __atomic_load_n(&l->block_state[block], __ATOMIC_ACQUIRE);
    if (state == BLOCK_UNCHECKED) {
        uint64_t first = block * SNAP_BLOCK_PAGES;
        uint64_t pages = MIN((uint64_t)SNAP_BLOCK_PAGES, l->hdr.page_count - first);
        uint32_t crc;
        /* Left unchecked: the file, not the block, is what went wrong. */
        if (!snap_mapped_crc32c(snap_layer_data_page(l, first), pages * SNAP_PAGE_SIZE, &crc))
            return bad_layer(error, SNAP_ERROR_FORMAT, l->path,
                             "data block %" G_GUINT64_FORMAT " cannot be read: the file is shorter than "
                             "when it was opened (truncated while in use) or its storage failed", block);
        state = crc == l->block_crc[block] ? BLOCK_GOOD : BLOCK_BAD;
        __atomic_store_n(&l->block_state[block], state, __ATOMIC_RELEASE);
    }
    if (state == BLOCK_BAD)
        return bad_layer(error, SNAP_ERROR_CHECKSUM, l->path,
                         "data block %" G_GUINT64_FORMAT " (file offset %" G_GUINT64_FORMAT
                         ") fails its checksum: corrupt page data", block,
                         SNAP_LAYER_DATA_OFFSET + block * SNAP_BLOCK_PAGES * SNAP_PAGE_SIZE);
    return true;
}

bool snap_layer_verify_data(struct snap_layer *l, uint64_t data_page, uint64_t npages,
                            GError **error)
{
    if (npages == 0)
        return true;
    if (data_page >= l->hdr.page_count || npages > l->hdr.page_count - data_page)
        return bad_layer(error, SNAP_ERROR_INVALID, l->path, "data pages out of range");
    uint64_t last = (data_page + npages - 1) / SNAP_BLOCK_PAGES;
    for (uint64_t b = data_page / SNAP_BLOCK_PAGES; b <= last; b++)
        if (!verify_block(l, b, error))
            return false;
    return true;
}
