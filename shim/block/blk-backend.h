/* What a virtio-blk disk reads and writes: a store of `capacity` bytes behind
 * a small table of operations, so the device (devices/virtio-blk.c) never
 * knows whether it sits on a raw image (blk-raw.c) or on something that
 * chains stores, such as a writable overlay over read-only layers (an
 * overlay's ops would serve blocks it holds itself and pass the rest to a
 * lower struct blk_backend, for example a raw base image opened readonly).
 *
 * Contract, for every implementation:
 *  - Offsets and lengths are multiples of BLK_SECTOR_SIZE and lie inside
 *    [0, capacity): the device checks every request before it calls.
 *  - Calls come from one thread at a time: the disk's I/O thread while the
 *    disk runs, the main thread while it is paused (virtio_blk_pause).
 *  - Each op returns 0 or a negative errno (-ENOSPC, -EIO, ...); the device
 *    answers any failure with VIRTIO_BLK_S_IOERR and the VM goes on.
 *  - readv/writev move every byte or fail; iov points into guest RAM.
 *  - flush: every write that returned 0 before it is durable when it returns.
 *  - discard is a hint (returning 0 without doing anything is allowed);
 *    write_zeroes must make the range read as zeros.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define BLK_SECTOR_SIZE 512u

struct blk_backend;

struct blk_backend_ops {
    int (*readv)(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov);
    int (*writev)(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov);
    int (*flush)(struct blk_backend *b);
    int (*discard)(struct blk_backend *b, uint64_t offset, uint64_t len);
    int (*write_zeroes)(struct blk_backend *b, uint64_t offset, uint64_t len, bool may_unmap);
    /* Release everything; b is freed. */
    void (*close)(struct blk_backend *b);
};

struct blk_backend {
    const struct blk_backend_ops *ops;
    uint64_t capacity;    /* bytes, a multiple of BLK_SECTOR_SIZE, at least one sector */
    uint32_t block_size;  /* the smallest write the store does well (virtio-blk's blk_size) */
    bool readonly;        /* writev, discard and write_zeroes are never called */
    bool can_discard;     /* discard frees space: offer VIRTIO_BLK_F_DISCARD */
    char *name;           /* for messages: the image's path */
};

static inline int blk_backend_readv(struct blk_backend *b, uint64_t offset, const struct iovec *iov,
                                    unsigned niov)
{
    return b->ops->readv(b, offset, iov, niov);
}

static inline int blk_backend_writev(struct blk_backend *b, uint64_t offset, const struct iovec *iov,
                                     unsigned niov)
{
    return b->ops->writev(b, offset, iov, niov);
}

static inline int blk_backend_flush(struct blk_backend *b)
{
    return b->ops->flush(b);
}

static inline int blk_backend_discard(struct blk_backend *b, uint64_t offset, uint64_t len)
{
    return b->ops->discard(b, offset, len);
}

static inline int blk_backend_write_zeroes(struct blk_backend *b, uint64_t offset, uint64_t len, bool may_unmap)
{
    return b->ops->write_zeroes(b, offset, len, may_unmap);
}

/* NULL is fine. */
void blk_backend_close(struct blk_backend *b);

/* ---- raw images (blk-raw.c) ---- */

struct blk_raw_options {
    const char *path;  /* a regular file or a block device */
    bool readonly;     /* opened O_RDONLY */
    bool direct;       /* O_DIRECT; unaligned guest buffers go through a bounce buffer */
    bool sparse;       /* discard punches holes and write_zeroes may unmap; off: no discard */
};

/* Open the image. capacity is its size rounded down to whole sectors;
 * block_size is 512 (or the device's logical block size, or O_DIRECT's
 * alignment). Errors name the path and say what failed. */
struct blk_backend *blk_raw_open(const struct blk_raw_options *opts, GError **error);
