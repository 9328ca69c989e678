/* The overlay file (see overlay.h): creating, opening and checking it, the
 * durable bitmap, and sealing it into a disk layer. */
#include "snapshot/overlay.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "layer-internal.h"
#include "snapshot/crc32c.h"
#include "snapshot/layer-write.h"

#define SEAL_CHUNK_BLOCKS 256u /* 1 MiB read at a time */

#define bad_overlay(error, code, path, ...) snap_file_error(error, code, "disk overlay", path, __VA_ARGS__)

static int io_code(int err)
{
    return err == ENOSPC || err == EDQUOT ? SNAP_ERROR_NO_SPACE : SNAP_ERROR_IO;
}

static uint32_t header_crc(const struct snap_overlay_header *h)
{
    struct snap_overlay_header copy = *h;
    copy.header_crc = 0;
    return crc32c(0, &copy, sizeof copy);
}

/* 0 or -errno; what lies past the end of the file (a hole at the end of a
 * sparse one) reads as zeros. */
static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    ssize_t n = snap_pread_upto(fd, buf, len, off);
    if (n < 0)
        return (int)n;
    memset((uint8_t *)buf + n, 0, len - (size_t)n);
    return 0;
}

static void sync_parent(const char *path)
{
    g_autofree char *dir = g_path_get_dirname(path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void layout(struct snap_overlay_header *h, uint64_t capacity)
{
    memcpy(h->magic, SNAP_OVERLAY_MAGIC, 8);
    h->version = SNAP_OVERLAY_VERSION;
    h->header_size = sizeof *h;
    h->block_size = SNAP_OVERLAY_BLOCK;
    h->capacity = capacity;
    h->block_count = (capacity + SNAP_OVERLAY_BLOCK - 1) / SNAP_OVERLAY_BLOCK;
    h->bitmap_offset = SNAP_OVERLAY_BLOCK;
    h->bitmap_bytes = (h->block_count + 63) / 64 * 8;
    uint64_t end = h->bitmap_offset + h->bitmap_bytes;
    h->data_offset = (end + SNAP_OVERLAY_DATA_ALIGN - 1) / SNAP_OVERLAY_DATA_ALIGN * SNAP_OVERLAY_DATA_ALIGN;
}

static struct snap_overlay *overlay_new(const char *path, int fd, bool writable)
{
    struct snap_overlay *ov = g_new0(struct snap_overlay, 1);
    ov->path = g_strdup(path);
    ov->fd = fd;
    ov->writable = writable;
    return ov;
}

struct snap_overlay *snap_overlay_create(const char *path, uint64_t capacity, const snap_id *lower,
                                         const struct snap_disk_identity *base, GError **error)
{
    if (capacity == 0 || capacity % 512 || capacity > SNAP_MAX_DISK_SIZE) {
        bad_overlay(error, SNAP_ERROR_INVALID, path, "capacity %" G_GUINT64_FORMAT " is not a whole number of "
                    "sectors up to %llu TiB", capacity, SNAP_MAX_DISK_SIZE >> 40);
        return NULL;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        bad_overlay(error, io_code(e), path, "cannot create it: %s", g_strerror(e));
        return NULL;
    }
    g_autoptr(snap_overlay) ov = overlay_new(path, fd, true);
    struct snap_overlay_header *h = &ov->hdr;
    layout(h, capacity);
    if (lower)
        h->lower_id = *lower;
    h->base_size = base->size;
    h->base_mtime_ns = base->mtime_ns;
    h->base_crc32c = base->crc32c;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    h->header_crc = header_crc(h);
    ov->bitmap = g_new0(uint64_t, h->bitmap_bytes / 8 + 1);
    uint8_t page[SNAP_OVERLAY_BLOCK] = { 0 };
    memcpy(page, h, sizeof *h);
    int err = snap_pwrite_all(fd, page, sizeof page, 0);
    if (!err && ftruncate(fd, (off_t)h->data_offset) != 0)
        err = -errno;
    if (!err && fsync(fd) != 0)
        err = -errno;
    if (err) {
        bad_overlay(error, io_code(-err), path, "cannot write it: %s", g_strerror(-err));
        unlink(path);
        return NULL;
    }
    sync_parent(path);
    return g_steal_pointer(&ov);
}

static bool check_header(const struct snap_overlay_header *h, uint64_t file_size, const char *path, GError **error)
{
    struct snap_overlay_header want;
    if (memcmp(h->magic, SNAP_OVERLAY_MAGIC, 8) != 0)
        return bad_overlay(error, SNAP_ERROR_FORMAT, path, "not a vsnap disk overlay (bad magic)");
    if (h->version != SNAP_OVERLAY_VERSION)
        return bad_overlay(error, SNAP_ERROR_FORMAT, path, "format version %u is not supported (this vsnap reads %u)",
                           h->version, SNAP_OVERLAY_VERSION);
    if (h->header_size != sizeof *h)
        return bad_overlay(error, SNAP_ERROR_FORMAT, path, "header size %u, expected %zu", h->header_size, sizeof *h);
    if (header_crc(h) != h->header_crc)
        return bad_overlay(error, SNAP_ERROR_CHECKSUM, path, "header checksum mismatch (corrupt header)");
    if (h->block_size != SNAP_OVERLAY_BLOCK || h->flags != 0)
        return bad_overlay(error, SNAP_ERROR_FORMAT, path, "block size %u or flags %#x not supported", h->block_size,
                           h->flags);
    if (h->capacity == 0 || h->capacity % 512 || h->capacity > SNAP_MAX_DISK_SIZE)
        return bad_overlay(error, SNAP_ERROR_FORMAT, path, "invalid capacity %" G_GUINT64_FORMAT, h->capacity);
    memset(&want, 0, sizeof want);
    layout(&want, h->capacity);
    if (h->block_count != want.block_count || h->bitmap_offset != want.bitmap_offset ||
        h->bitmap_bytes != want.bitmap_bytes || h->data_offset != want.data_offset)
        return bad_overlay(error, SNAP_ERROR_FORMAT, path, "block count or section offsets do not fit the capacity");
    if (file_size < h->bitmap_offset + h->bitmap_bytes)
        return bad_overlay(error, SNAP_ERROR_FORMAT, path, "truncated: %" G_GUINT64_FORMAT " bytes, its bitmap ends at %"
                           G_GUINT64_FORMAT, file_size, h->bitmap_offset + h->bitmap_bytes);
    return true;
}

/* No bit past the last block; the file long enough for the last block named. */
static bool check_bitmap(struct snap_overlay *ov, uint64_t file_size, GError **error)
{
    const struct snap_overlay_header *h = &ov->hdr;
    uint64_t words = h->bitmap_bytes / 8;
    if (h->block_count % 64 && words && ov->bitmap[words - 1] >> (h->block_count % 64))
        return bad_overlay(error, SNAP_ERROR_FORMAT, ov->path,
                           "its bitmap names blocks beyond the disk's %" G_GUINT64_FORMAT " blocks", h->block_count);
    for (uint64_t w = words; w-- > 0;) {
        if (!ov->bitmap[w])
            continue;
        uint64_t last = w * 64 + 63 - (uint64_t)__builtin_clzll(ov->bitmap[w]);
        if (file_size < snap_overlay_block_offset(ov, last) + SNAP_OVERLAY_BLOCK)
            return bad_overlay(error, SNAP_ERROR_FORMAT, ov->path,
                               "truncated: its bitmap names block %" G_GUINT64_FORMAT " but the file ends at %"
                               G_GUINT64_FORMAT, last, file_size);
        break;
    }
    return true;
}

struct snap_overlay *snap_overlay_open(const char *path, bool writable, GError **error)
{
    int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        bad_overlay(error, SNAP_ERROR_IO, path, "cannot open it: %s", g_strerror(e));
        return NULL;
    }
    g_autoptr(snap_overlay) ov = overlay_new(path, fd, writable);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        bad_overlay(error, SNAP_ERROR_FORMAT, path, "not a regular file");
        return NULL;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < SNAP_OVERLAY_BLOCK) {
        bad_overlay(error, SNAP_ERROR_FORMAT, path, "truncated: %" G_GUINT64_FORMAT " bytes, smaller than a header",
                    size);
        return NULL;
    }
    int err = pread_all(fd, &ov->hdr, sizeof ov->hdr, 0);
    if (err) {
        bad_overlay(error, SNAP_ERROR_IO, path, "cannot read it: %s", g_strerror(-err));
        return NULL;
    }
    if (!check_header(&ov->hdr, size, path, error))
        return NULL;
    ov->bitmap = g_new0(uint64_t, ov->hdr.bitmap_bytes / 8 + 1);
    err = pread_all(fd, ov->bitmap, ov->hdr.bitmap_bytes, ov->hdr.bitmap_offset);
    if (err) {
        bad_overlay(error, SNAP_ERROR_IO, path, "cannot read its bitmap: %s", g_strerror(-err));
        return NULL;
    }
    if (!check_bitmap(ov, size, error))
        return NULL;
    return g_steal_pointer(&ov);
}

void snap_overlay_close(struct snap_overlay *ov)
{
    if (!ov)
        return;
    if (ov->fd >= 0)
        close(ov->fd);
    g_free(ov->bitmap);
    g_free(ov->path);
    g_free(ov);
}

void snap_overlay_mark(struct snap_overlay *ov, uint64_t first, uint64_t n)
{
    for (uint64_t b = first; b < first + n; b++)
        ov->bitmap[b / 64] |= 1ull << (b % 64);
    if (!n)
        return;
    uint64_t lo = first / 64, hi = (first + n - 1) / 64 + 1;
    if (ov->dirty_lo == ov->dirty_hi) {
        ov->dirty_lo = lo;
        ov->dirty_hi = hi;
    } else {
        ov->dirty_lo = MIN(ov->dirty_lo, lo);
        ov->dirty_hi = MAX(ov->dirty_hi, hi);
    }
}

static int datasync(int fd)
{
    while (fdatasync(fd) != 0)
        if (errno != EINTR)
            return -errno;
    return 0;
}

int snap_overlay_sync(struct snap_overlay *ov)
{
    if (ov->dirty_lo == ov->dirty_hi)
        return datasync(ov->fd);
    uint64_t lo = ov->dirty_lo, hi = ov->dirty_hi;
    int err = datasync(ov->fd);
    if (!err)
        err = snap_pwrite_all(ov->fd, ov->bitmap + lo, (hi - lo) * 8, ov->hdr.bitmap_offset + lo * 8);
    if (!err)
        err = datasync(ov->fd);
    if (!err)
        ov->dirty_lo = ov->dirty_hi = 0;
    return err;
}

int snap_overlay_detach_lower(struct snap_overlay *ov)
{
    int err = snap_overlay_sync(ov);
    if (err)
        return err;
    ov->hdr.lower_id = (snap_id){ 0 };
    ov->hdr.header_crc = header_crc(&ov->hdr);
    uint8_t page[SNAP_OVERLAY_BLOCK] = { 0 };
    memcpy(page, &ov->hdr, sizeof ov->hdr);
    err = snap_pwrite_all(ov->fd, page, sizeof page, 0);
    return err ? err : datasync(ov->fd);
}

uint64_t snap_overlay_count(const struct snap_overlay *ov)
{
    uint64_t n = 0;
    for (uint64_t w = 0; w < ov->hdr.bitmap_bytes / 8; w++)
        n += (uint64_t)__builtin_popcountll(ov->bitmap[w]);
    return n;
}

void snap_overlay_base(const struct snap_overlay *ov, struct snap_disk_identity *out)
{
    out->size = ov->hdr.base_size;
    out->mtime_ns = ov->hdr.base_mtime_ns;
    out->crc32c = ov->hdr.base_crc32c;
}

/* Length of the run of set (or clear) bits from block b, at most max. */
static uint64_t bit_run(const struct snap_overlay *ov, uint64_t b, uint64_t max, bool set)
{
    uint64_t n = 0;
    while (n < max && b + n < ov->hdr.block_count) {
        uint64_t word = ov->bitmap[(b + n) / 64];
        if (!set && !word && (b + n) % 64 == 0) {
            n += 64;
            continue;
        }
        if (snap_overlay_has(ov, b + n) != set)
            break;
        n++;
    }
    return MIN(n, ov->hdr.block_count - b);
}

static bool is_zero(const uint8_t *p, size_t len)
{
    return p[0] == 0 && memcmp(p, p + 1, len - 1) == 0;
}

/* Blocks [b, b + n), read into buf, into the writer: zero blocks as zero runs. */
static bool seal_chunk(struct snap_overlay *ov, struct snap_layer_writer *w, uint64_t b, uint64_t n, uint8_t *buf,
                       GError **error)
{
    int err = pread_all(ov->fd, buf, n * SNAP_OVERLAY_BLOCK, snap_overlay_block_offset(ov, b));
    if (err)
        return bad_overlay(error, SNAP_ERROR_IO, ov->path, "cannot read it: %s", g_strerror(-err));
    for (uint64_t i = 0; i < n;) {
        bool zero = is_zero(buf + i * SNAP_OVERLAY_BLOCK, SNAP_OVERLAY_BLOCK);
        uint64_t j = i + 1;
        while (j < n && is_zero(buf + j * SNAP_OVERLAY_BLOCK, SNAP_OVERLAY_BLOCK) == zero)
            j++;
        if (!snap_layer_writer_add(w, b + i, j - i, zero ? NULL : buf + i * SNAP_OVERLAY_BLOCK, error))
            return false;
        i = j;
    }
    return true;
}

bool snap_overlay_seal(struct snap_overlay *ov, const char *layer_path, const snap_id *id, uint64_t *blocks,
                       GError **error)
{
    return snap_overlay_seal_steps(ov, layer_path, id, NULL, blocks, error);
}

bool snap_overlay_seal_steps(struct snap_overlay *ov, const char *layer_path, const snap_id *id,
                             const struct snap_steps *steps, uint64_t *blocks, GError **error)
{
    uint64_t size = ov->hdr.block_count * SNAP_OVERLAY_BLOCK, next_step = SNAP_OVERLAY_SEAL_STEP_BLOCKS;
    struct snap_layer_writer *w = snap_disk_layer_writer_new(layer_path, size, id, &ov->hdr.lower_id, error);
    if (!w)
        return false;
    g_autofree uint8_t *buf = g_malloc(SEAL_CHUNK_BLOCKS * SNAP_OVERLAY_BLOCK);
    uint64_t count = 0;
    for (uint64_t b = 0; b < ov->hdr.block_count;) {
        uint64_t n = bit_run(ov, b, SEAL_CHUNK_BLOCKS, true);
        if (n == 0) {
            b += bit_run(ov, b, UINT64_MAX, false);
            continue;
        }
        bool stepped = count + n >= next_step;
        if (stepped)
            next_step = count + n + SNAP_OVERLAY_SEAL_STEP_BLOCKS;
        if (!seal_chunk(ov, w, b, n, buf, error) ||
            (stepped && steps && !steps->go_on(steps->data, count + n, error))) {
            snap_layer_writer_abort(w);
            return false;
        }
        count += n;
        b += n;
    }
    if (!snap_layer_writer_commit(w, error))
        return false;
    if (blocks)
        *blocks = count;
    return true;
}

bool snap_overlay_check_fits(const struct snap_overlay *ov, const snap_id *top, uint64_t capacity, const char *image,
                             GError **error)
{
    static const snap_id nil;
    char want[37], have[37];
    if (ov->hdr.capacity != capacity)
        return bad_overlay(error, SNAP_ERROR_CHAIN, ov->path, "made for a disk of %" G_GUINT64_FORMAT " bytes, this one "
                           "holds %" G_GUINT64_FORMAT, ov->hdr.capacity, capacity);
    if (!snap_id_equal(top ? top : &nil, &ov->hdr.lower_id)) {
        snap_id_to_string(&ov->hdr.lower_id, have);
        snap_id_to_string(top ? top : &nil, want);
        return bad_overlay(error, SNAP_ERROR_CHAIN, ov->path, "was made on disk layer %s, but the chain's top layer "
                           "is %s", have, want);
    }
    struct snap_disk_identity base;
    snap_overlay_base(ov, &base);
    g_autoptr(GError) local = NULL;
    if (!snap_disk_identity_check(image, &base, &local))
        return bad_overlay(error, SNAP_ERROR_CHAIN, ov->path, "%s", local->message);
    return true;
}
