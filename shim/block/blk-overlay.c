/* The writable overlay of a layered disk: written blocks go into the
 * overlay file (common/snapshot/overlay.h), the rest is read from the chain
 * below (see blk-backend.h). */
#define G_LOG_DOMAIN "vsnap-shim"

#include "block/blk-backend.h"
#include "blk-iov.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <string.h>
#include <unistd.h>

#include "snapshot/image-lock.h"
#include "snapshot/overlay.h"

#define BLOCK SNAP_OVERLAY_BLOCK
#define ZERO_CHUNK (256u * 1024u)

struct blk_overlay {
    struct blk_backend base; /* first */
    struct blk_backend *lower;
    struct snap_overlay *ov;
    bool discard_unmap;      /* a DISCARD records its whole blocks as zeroes */
    GMutex lock;             /* the guest's I/O against a block job's steps (blk_overlay_pull_step) */
    uint8_t block[BLOCK];    /* a partial-block write's read-modify-write */
};

static struct blk_overlay *overlay_of(struct blk_backend *b)
{
    return (struct blk_overlay *)b;
}

/* preadv/pwritev of every byte at the overlay's data for disk offset off. */
static int file_transfer(struct blk_overlay *o, uint64_t off, struct iovec *iov, unsigned niov, bool write)
{
    size_t total = blk_iov_total(iov, niov), done = 0;
    uint64_t at = o->ov->hdr.data_offset + off;
    struct iovec rest[IOV_MAX];
    while (done < total) {
        unsigned n = blk_iov_advance(iov, niov, done, rest);
        ssize_t got = write ? pwritev(o->ov->fd, rest, (int)n, (off_t)(at + done))
                            : preadv(o->ov->fd, rest, (int)n, (off_t)(at + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -errno;
        if (got == 0 && write)
            return -EIO;
        if (got == 0) { /* a hole at the file's end reads as zeros */
            blk_iov_zero(iov, niov, done, total - done);
            return 0;
        }
        done += (size_t)got;
    }
    return 0;
}

/* Length of the run of blocks from b with the same presence as b. */
static uint64_t presence_run(const struct snap_overlay *ov, uint64_t b, uint64_t last)
{
    bool has = snap_overlay_has(ov, b);
    uint64_t n = 1;
    while (b + n <= last && snap_overlay_has(ov, b + n) == has)
        n++;
    return n;
}

static int overlay_readv(struct blk_backend *bk, uint64_t offset, const struct iovec *iov, unsigned niov)
{
    struct blk_overlay *o = overlay_of(bk);
    uint64_t end = offset + blk_iov_total(iov, niov);
    if (end == offset)
        return 0;
    uint64_t last = (end - 1) / BLOCK;
    for (uint64_t pos = offset; pos < end;) {
        uint64_t b = pos / BLOCK, n = presence_run(o->ov, b, last);
        uint64_t run_end = MIN(end, (b + n) * BLOCK);
        struct iovec piece[IOV_MAX];
        unsigned np = blk_iov_slice(iov, niov, (size_t)(pos - offset), (size_t)(run_end - pos), piece);
        int err = snap_overlay_has(o->ov, b) ? file_transfer(o, pos, piece, np, false)
                                             : blk_backend_readv(o->lower, pos, piece, np);
        if (err)
            return err;
        pos = run_end;
    }
    return 0;
}

/* Part of block b, bytes [pos, piece_end), from iov at `at`: a block the
 * overlay does not hold yet is read from below first, then written whole. */
static int write_partial(struct blk_overlay *o, uint64_t b, uint64_t pos, uint64_t piece_end,
                         const struct iovec *iov, unsigned niov, size_t at)
{
    uint64_t start = b * BLOCK;
    if (snap_overlay_has(o->ov, b)) {
        struct iovec piece[IOV_MAX];
        unsigned np = blk_iov_slice(iov, niov, at, (size_t)(piece_end - pos), piece);
        return file_transfer(o, pos, piece, np, true);
    }
    memset(o->block, 0, BLOCK);
    struct iovec below = { o->block, (size_t)(MIN(start + BLOCK, o->base.capacity) - start) };
    int err = blk_backend_readv(o->lower, start, &below, 1);
    if (err)
        return err;
    blk_iov_copy(iov, niov, at, o->block + (pos - start), (size_t)(piece_end - pos), false);
    struct iovec whole = { o->block, BLOCK };
    err = file_transfer(o, start, &whole, 1, true);
    if (!err)
        snap_overlay_mark(o->ov, b, 1);
    return err;
}

static int overlay_writev(struct blk_backend *bk, uint64_t offset, const struct iovec *iov, unsigned niov)
{
    struct blk_overlay *o = overlay_of(bk);
    uint64_t end = offset + blk_iov_total(iov, niov);
    for (uint64_t pos = offset; pos < end;) {
        size_t at = (size_t)(pos - offset);
        int err;
        if (pos % BLOCK == 0 && end - pos >= BLOCK) {
            uint64_t n = (end - pos) / BLOCK;
            struct iovec piece[IOV_MAX];
            unsigned np = blk_iov_slice(iov, niov, at, (size_t)(n * BLOCK), piece);
            err = file_transfer(o, pos, piece, np, true);
            if (!err)
                snap_overlay_mark(o->ov, pos / BLOCK, n);
            pos += n * BLOCK;
        } else {
            uint64_t b = pos / BLOCK, piece_end = MIN(end, (b + 1) * BLOCK);
            err = write_partial(o, b, pos, piece_end, iov, niov, at);
            pos = piece_end;
        }
        if (err)
            return err;
    }
    return 0;
}

static int overlay_flush(struct blk_backend *bk)
{
    return snap_overlay_sync(overlay_of(bk)->ov);
}

/* Whole blocks [b, b + n) now read as zeros: written, with their data a
 * hole in the overlay file (which a seal reads as zeros and keeps as a zero
 * run). The blocks below stop showing through; nothing below is written. */
static int record_zero_blocks(struct blk_overlay *o, uint64_t b, uint64_t n)
{
    off_t at = (off_t)(o->ov->hdr.data_offset + b * BLOCK);
    if (fallocate(o->ov->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at, (off_t)(n * BLOCK)) != 0)
        return -errno;
    snap_overlay_mark(o->ov, b, n);
    return 0;
}

/* The whole blocks inside [offset, offset + len), as [*first, *first + *n). */
static bool whole_blocks(const struct blk_overlay *o, uint64_t offset, uint64_t len, uint64_t *first, uint64_t *n)
{
    uint64_t end = MIN(offset + len, o->base.capacity);
    *first = (offset + BLOCK - 1) / BLOCK;
    /* The last block may be short of BLOCK at the end of the disk: still whole. */
    uint64_t last = end == o->base.capacity ? (end + BLOCK - 1) / BLOCK : end / BLOCK;
    *n = last > *first ? last - *first : 0;
    return *n > 0;
}

static int overlay_discard(struct blk_backend *bk, uint64_t offset, uint64_t len)
{
    struct blk_overlay *o = overlay_of(bk);
    uint64_t b, n;
    /* A hint: without discard_unmap (and for partial blocks) the blocks
     * below keep showing through unchanged. */
    if (!o->discard_unmap || !whole_blocks(o, offset, len, &b, &n))
        return 0;
    int err = record_zero_blocks(o, b, n);
    return err == -EOPNOTSUPP ? 0 : err;
}

static int write_zero_buffers(struct blk_backend *bk, uint64_t offset, uint64_t len)
{
    static const uint8_t zeros[ZERO_CHUNK];
    for (uint64_t done = 0; done < len;) {
        struct iovec iov = { (void *)zeros, (size_t)MIN(ZERO_CHUNK, len - done) };
        int err = overlay_writev(bk, offset + done, &iov, 1);
        if (err)
            return err;
        done += iov.iov_len;
    }
    return 0;
}

/* Whole blocks are recorded as zeros without writing data; the partial
 * blocks at either end are written. */
static int overlay_write_zeroes(struct blk_backend *bk, uint64_t offset, uint64_t len, bool may_unmap)
{
    (void)may_unmap; /* the overlay's zero blocks take no space either way */
    struct blk_overlay *o = overlay_of(bk);
    uint64_t b, n, end = offset + len;
    if (!whole_blocks(o, offset, len, &b, &n) || record_zero_blocks(o, b, n) != 0)
        return write_zero_buffers(bk, offset, len);
    uint64_t head_end = MIN(b * BLOCK, end), tail = MIN((b + n) * BLOCK, end);
    int err = head_end > offset ? write_zero_buffers(bk, offset, head_end - offset) : 0;
    return err || tail >= end ? err : write_zero_buffers(bk, tail, end - tail);
}

static void overlay_close(struct blk_backend *bk)
{
    struct blk_overlay *o = overlay_of(bk);
    blk_backend_close(o->lower);
    snap_overlay_close(o->ov);
    g_mutex_clear(&o->lock);
    g_free(o->base.name);
    g_free(o);
}

/* Every guest operation holds the overlay's lock, uncontended unless a
 * block job runs: its steps then take turns with the guest's requests. */
static int locked_readv(struct blk_backend *bk, uint64_t offset, const struct iovec *iov, unsigned niov)
{
    g_mutex_lock(&overlay_of(bk)->lock);
    int err = overlay_readv(bk, offset, iov, niov);
    g_mutex_unlock(&overlay_of(bk)->lock);
    return err;
}

static int locked_writev(struct blk_backend *bk, uint64_t offset, const struct iovec *iov, unsigned niov)
{
    g_mutex_lock(&overlay_of(bk)->lock);
    int err = overlay_writev(bk, offset, iov, niov);
    g_mutex_unlock(&overlay_of(bk)->lock);
    return err;
}

static int locked_flush(struct blk_backend *bk)
{
    g_mutex_lock(&overlay_of(bk)->lock);
    int err = overlay_flush(bk);
    g_mutex_unlock(&overlay_of(bk)->lock);
    return err;
}

static int locked_discard(struct blk_backend *bk, uint64_t offset, uint64_t len)
{
    g_mutex_lock(&overlay_of(bk)->lock);
    int err = overlay_discard(bk, offset, len);
    g_mutex_unlock(&overlay_of(bk)->lock);
    return err;
}

static int locked_write_zeroes(struct blk_backend *bk, uint64_t offset, uint64_t len, bool may_unmap)
{
    g_mutex_lock(&overlay_of(bk)->lock);
    int err = overlay_write_zeroes(bk, offset, len, may_unmap);
    g_mutex_unlock(&overlay_of(bk)->lock);
    return err;
}

static const struct blk_backend_ops overlay_ops = {
    .readv = locked_readv,
    .writev = locked_writev,
    .flush = locked_flush,
    .discard = locked_discard,
    .write_zeroes = locked_write_zeroes,
    .close = overlay_close,
};

/* ---- block pull (blk_overlay_pull_step) ---- */

#define PULL_RUN 256u

/* Blocks [b, b + n), none in the overlay, copied from the chain below. */
static int pull_copy(struct blk_overlay *o, uint64_t b, uint64_t n, uint8_t *buf)
{
    uint64_t start = b * BLOCK, end = MIN((b + n) * BLOCK, o->base.capacity);
    struct iovec below = { buf, (size_t)(end - start) };
    memset(buf, 0, (size_t)(n * BLOCK));
    int err = blk_backend_readv(o->lower, start, &below, 1);
    struct iovec whole = { buf, (size_t)(n * BLOCK) };
    if (!err)
        err = file_transfer(o, start, &whole, 1, true);
    if (!err)
        snap_overlay_mark(o->ov, b, n);
    return err;
}

/* One run from block b: the blocks a chain layer holds and the overlay does
 * not are copied (zero runs recorded as zeros); *copied counts them. */
static int pull_run(struct blk_overlay *o, uint64_t b, uint64_t n, bool zero, uint8_t *buf, uint64_t *copied)
{
    for (uint64_t k = b; k < b + n;) {
        uint64_t m = MIN(presence_run(o->ov, k, b + n - 1), b + n - k);
        if (!snap_overlay_has(o->ov, k)) {
            int err = zero ? record_zero_blocks(o, k, m) : pull_copy(o, k, m, buf);
            if (err == -EOPNOTSUPP)
                err = pull_copy(o, k, m, buf);
            if (err)
                return err;
            *copied += m;
        }
        k += m;
    }
    return 0;
}

/* ---- active commit ---- */

static int image_write(int fd, const uint8_t *buf, size_t len, uint64_t at)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = pwrite(fd, buf + done, len - done, (off_t)(at + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        done += (size_t)n;
    }
    return 0;
}

/* Blocks [b, b + n) from `from` (the lower chain, or the overlay itself) into the image. */
static int commit_copy(struct blk_overlay *o, struct blk_backend *from, int fd, uint64_t b, uint64_t n,
                       uint8_t *buf)
{
    uint64_t start = b * BLOCK, end = MIN((b + n) * BLOCK, o->base.capacity);
    struct iovec iov = { buf, (size_t)(end - start) };
    int err = from ? blk_backend_readv(from, start, &iov, 1) : file_transfer(o, start, &iov, 1, false);
    return err ? err : image_write(fd, buf, iov.iov_len, start);
}

int blk_overlay_commit_overlay(struct blk_backend *b, int image_fd)
{
    struct blk_overlay *o = overlay_of(b);
    uint64_t count = o->ov->hdr.block_count;
    g_autofree uint8_t *buf = g_malloc(PULL_RUN * BLOCK);
    int err = 0;
    g_mutex_lock(&o->lock);
    for (uint64_t k = 0; !err && k < count;) {
        uint64_t m = MIN(presence_run(o->ov, k, MIN(count, k + PULL_RUN) - 1), PULL_RUN);
        if (snap_overlay_has(o->ov, k))
            err = commit_copy(o, NULL, image_fd, k, m, buf);
        k += m;
    }
    g_mutex_unlock(&o->lock);
    while (!err && fdatasync(image_fd) != 0)
        if (errno != EINTR)
            err = -errno;
    return err;
}

int blk_overlay_pull_step(struct blk_backend *b, uint64_t *next, uint64_t max_blocks, uint64_t *copied)
{
    struct blk_overlay *o = overlay_of(b);
    uint64_t count = o->ov->hdr.block_count;
    g_autofree uint8_t *buf = g_malloc(PULL_RUN * BLOCK);
    int err = 0;
    g_mutex_lock(&o->lock);
    for (uint64_t seen = 0; !err && *next < count && seen < max_blocks;) {
        bool in_layers = false, zero = false;
        uint64_t n = blk_chain_layer_run(o->lower, *next, MIN(PULL_RUN, count - *next), &in_layers, &zero);
        if (in_layers)
            err = pull_run(o, *next, n, zero, buf, copied);
        *next += n;
        seen += n;
    }
    g_mutex_unlock(&o->lock);
    return err;
}

uint64_t blk_overlay_pull_need(struct blk_backend *b)
{
    struct blk_overlay *o = overlay_of(b);
    uint64_t count = o->ov->hdr.block_count, need = 0;
    g_mutex_lock(&o->lock);
    for (uint64_t k = 0; k < count;) {
        bool in_layers = false, zero = false;
        uint64_t n = blk_chain_layer_run(o->lower, k, MIN(PULL_RUN, count - k), &in_layers, &zero);
        for (uint64_t j = k; in_layers && !zero && j < k + n; j++)
            need += !snap_overlay_has(o->ov, j);
        k += n;
    }
    g_mutex_unlock(&o->lock);
    return need * BLOCK;
}

int blk_overlay_fd(struct blk_backend *b)
{
    return overlay_of(b)->ov->fd;
}

struct blk_backend *blk_overlay_detach_chain(struct blk_backend *b, int *err)
{
    struct blk_overlay *o = overlay_of(b);
    g_mutex_lock(&o->lock);
    *err = snap_overlay_detach_lower(o->ov);
    struct blk_backend *chain = NULL;
    if (!*err) {
        chain = o->lower;
        o->lower = blk_chain_steal_image(chain);
    }
    g_mutex_unlock(&o->lock);
    return chain;
}

struct snap_overlay *blk_overlay_file(struct blk_backend *b)
{
    return b && b->ops == &overlay_ops ? overlay_of(b)->ov : NULL;
}

struct blk_backend *blk_overlay_lower(struct blk_backend *b)
{
    return b && b->ops == &overlay_ops ? overlay_of(b)->lower : NULL;
}

static struct snap_overlay *open_or_create(const struct blk_overlay_options *opts, struct blk_backend *lower,
                                           GError **error)
{
    g_autoptr(GError) local = NULL;
    struct snap_overlay *ov = NULL;
    if (g_file_test(opts->path, G_FILE_TEST_EXISTS)) {
        ov = snap_overlay_open(opts->path, true, &local);
        /* Before its header is trusted: another VM may be writing it. */
        if (ov && !snap_image_lock(ov->fd, "disk overlay", opts->path, true, &local))
            g_clear_pointer(&ov, snap_overlay_close);
        if (ov && !snap_overlay_check_fits(ov, blk_chain_top_id(lower), lower->capacity, opts->image, &local))
            g_clear_pointer(&ov, snap_overlay_close);
    } else {
        struct snap_disk_identity base;
        if (snap_disk_identity_read(opts->image, &base, &local))
            ov = snap_overlay_create(opts->path, lower->capacity, blk_chain_top_id(lower), &base, &local);
        if (ov && !snap_image_lock(ov->fd, "disk overlay", opts->path, true, &local))
            g_clear_pointer(&ov, snap_overlay_close);
    }
    if (!ov && local)
        g_set_error_literal(error, G_IO_ERROR,
                            local->code == SNAP_ERROR_NO_SPACE ? G_IO_ERROR_NO_SPACE
                            : local->code == SNAP_ERROR_BUSY   ? G_IO_ERROR_BUSY
                                                               : G_IO_ERROR_INVALID_DATA,
                            local->message);
    return ov;
}

struct blk_backend *blk_overlay_open(const struct blk_overlay_options *opts, struct blk_backend *lower,
                                     GError **error)
{
    struct snap_overlay *ov = open_or_create(opts, lower, error);
    if (!ov) {
        blk_backend_close(lower);
        return NULL;
    }
    struct blk_overlay *o = g_new0(struct blk_overlay, 1);
    o->base.ops = &overlay_ops;
    o->base.capacity = lower->capacity;
    o->base.block_size = lower->block_size;
    o->base.name = g_strdup(opts->image);
    o->lower = lower;
    o->ov = ov;
    o->discard_unmap = opts->discard_unmap;
    g_mutex_init(&o->lock);
    return &o->base;
}
