/* What a virtio-blk disk reads and writes: a store of `capacity` bytes behind
 * a small table of operations, so the device (devices/blk/virtio-blk.c) never
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

#include "snapshot/layer.h"

#define BLK_SECTOR_SIZE 512u

struct blk_backend;

struct blk_backend_ops {
    int (*readv)(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov);
    int (*writev)(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov);
    int (*flush)(struct blk_backend *b);
    int (*discard)(struct blk_backend *b, uint64_t offset, uint64_t len);
    int (*write_zeroes)(struct blk_backend *b, uint64_t offset, uint64_t len, bool may_unmap);
    /* Optional (blk-uring.h): the descriptor a plain preadv/pwritev of
     * [offset, offset + the iov's length) at the same offset reads or
     * writes, for a ring to do the transfer; -1 when the range needs this
     * backend's own op (layers, a bounce buffer). NULL: always -1. */
    int (*ring_fd)(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov, bool write);
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
    bool unlocked;     /* no lock taken at open: the caller takes it (blk_raw_share_lock) once
                        * the lock it replaces is gone (an active commit's pivot) */
    int adopt_fd;      /* > 0: this descriptor of path, opened by the caller with readonly's access
                        * mode (a confined shim cannot open an image for writing), is taken
                        * instead of opening path; 0: path is opened */
};

/* Open the image. capacity is its size rounded down to whole sectors;
 * block_size is 512 (or the device's logical block size, or O_DIRECT's
 * alignment). Errors name the path and say what failed. */
struct blk_backend *blk_raw_open(const struct blk_raw_options *opts, GError **error);
/* The image is locked while open (snapshot/image-lock.h): exclusively when
 * writable, shared when readonly; a lock held elsewhere fails the open with
 * SNAP_ERROR_BUSY naming the image. At a disk's first snapshot its image
 * becomes the read-only base of the new chain, which locks it shared: the
 * writable image's lock is made shared (true) in place first, and made
 * exclusive again (false) if the disk stays on the image. Nothing to do for
 * another backend or a readonly one. */
bool blk_raw_share_lock(struct blk_backend *b, bool shared, GError **error);
/* The image grew (blockresize): capacity follows its size now. Only a raw
 * backend (G_IO_ERROR_NOT_SUPPORTED for another, naming why), never
 * smaller (G_IO_ERROR_INVALID_ARGUMENT, capacity unchanged). With the disk
 * paused. */
bool blk_raw_refresh_capacity(struct blk_backend *b, GError **error);

/* ---- disks on snapshot layers (blk-chain.c, blk-overlay.c) ----
 *
 * Once a disk has a snapshot its store is an overlay (the blocks written
 * since the last snapshot, common/snapshot/overlay.h) over a chain (sealed
 * disk layers over the read-only base image, common/snapshot/disk.h). */

struct snap_overlay;

struct blk_chain_options {
    const char *image;          /* the base image, opened read-only */
    bool direct;                /* O_DIRECT on the image */
    const char *const *layers;  /* disk layers, base first */
    unsigned nlayers;           /* >= 1 */
};

/* The read-only chain: a block comes from the topmost layer holding it, else
 * from the image; layer blocks are checked against their CRC-32C when first
 * read (a bad one answers -EIO). Errors name the file. */
struct blk_backend *blk_chain_open(const struct blk_chain_options *opts, GError **error);
/* The chain's top layer id: what an overlay on it names. NULL for another backend. */
const snap_id *blk_chain_top_id(const struct blk_backend *b);
/* The layers of b (a chain, or an overlay over one) that were opened in
 * directory from are in directory to now (a snapshot's partial directory,
 * committed under its name): messages name them there. Nothing for other
 * backends. */
void blk_chain_layers_moved(struct blk_backend *b, const char *from, const char *to);

struct blk_overlay_options {
    const char *path;           /* the overlay file: opened if it exists, else created empty */
    const char *image;          /* the base image, whose identity an existing overlay must match */
    bool discard_unmap;         /* DISCARD records whole blocks as zeroes (libvirt's discard='unmap') */
};

/* A writable overlay over lower (a chain backend; taken, closed on failure
 * too). An existing overlay must have lower's capacity, name lower's top
 * layer and have been made over this image (errors name the file or image).
 * FLUSH: data fdatasync, bitmap, fdatasync. DISCARD is a no-op (the blocks below
 * keep showing through) unless discard_unmap: then its whole blocks are
 * recorded as zeroes, their data a hole in the overlay file. WRITE_ZEROES
 * records whole blocks so too. can_discard is the caller's to set. */
struct blk_backend *blk_overlay_open(const struct blk_overlay_options *opts, struct blk_backend *lower,
                                     GError **error);
/* The open overlay file of an overlay backend (NULL for another backend):
 * what a snapshot seals. Only while the disk is paused. */
struct snap_overlay *blk_overlay_file(struct blk_backend *b);
/* The backend an overlay backend is over (NULL for another backend). */
struct blk_backend *blk_overlay_lower(struct blk_backend *b);

/* ---- block pull (blk-overlay.c, blk-chain.c) ----
 *
 * virsh blockpull while the guest runs: every block a layer of the chain
 * holds (and the overlay does not) is copied into the overlay, a step at a
 * time from any thread; each step holds the overlay's lock, which the
 * guest's requests take too, so the two never see half a block. The image's
 * blocks are never copied: the overlay stays sparse, the image its base. */

/* From block *next on, at most max_blocks looked at; *next advances past
 * them, *copied grows by the blocks copied. b is an overlay backend. 0 or
 * -errno (the overlay keeps what was copied: the same bytes the chain has). */
int blk_overlay_pull_step(struct blk_backend *b, uint64_t *next, uint64_t max_blocks, uint64_t *copied);
/* Bytes a pull of overlay b would add to its file now (the data blocks of
 * the chain's layers the overlay does not hold; zero runs take none). */
uint64_t blk_overlay_pull_need(struct blk_backend *b);
/* The overlay file's descriptor (its file system's free space). */
int blk_overlay_fd(struct blk_backend *b);
/* The pull is done (every step through the last block): the overlay's
 * header no longer names a lower layer (snap_overlay_detach_lower) and the
 * overlay reads the image directly. Returns the chain backend it was on,
 * for the caller to close, or NULL with *err set (nothing changed). */
struct blk_backend *blk_overlay_detach_chain(struct blk_backend *b, int *err);
/* Blocks from `block` (at most max) with the same source in chain backend
 * b: *in_layers when a layer holds them (*zero: as zeros), else the image. */
uint64_t blk_chain_layer_run(struct blk_backend *b, uint64_t block, uint64_t max, bool *in_layers, bool *zero);
/* The image under chain b, which no longer closes it. */
struct blk_backend *blk_chain_steal_image(struct blk_backend *b);

/* ---- active commit (blk-overlay.c) ----
 *
 * virsh blockcommit --active: a block pull first (the image untouched, so
 * an abort or a crash leaves a disk and snapshots as they were), then the
 * pivot writes the overlay, which then holds every block the chain did, into
 * the image (image_fd, open for writing). */

/* Every block the overlay holds, into image_fd, then fdatasync: the pivot,
 * with the disk paused. 0 or -errno. */
int blk_overlay_commit_overlay(struct blk_backend *b, int image_fd);

/* ---- block copy (blk-mirror.c) ----
 *
 * virsh blockcopy while the guest runs: the disk's backend (source) is put
 * behind a mirror, which sends every request to it and every write whose
 * range the copy has passed to target (a new, sparse raw image) too. The
 * copy steps from the start, under the mirror's lock, which the guest's
 * writes take too; once it reached the end (READY) the target is the disk
 * as the guest has it, and stays so. */

/* Takes source and target (same capacity or more for target). */
struct blk_backend *blk_mirror_new(struct blk_backend *source, struct blk_backend *target);
/* The next at most max_bytes, from where the copy is; *copied_to: the
 * bytes the target holds now. 0 or -errno (the step not done). */
int blk_mirror_step(struct blk_backend *b, uint64_t max_bytes, uint64_t *copied_to);
/* The mirror ends (with the disk paused): to_target, the pivot, returns the
 * target, else (abort) the source; the mirror no longer holds it, and
 * closing the mirror then closes the other one. */
struct blk_backend *blk_mirror_end(struct blk_backend *b, bool to_target);
bool blk_mirror_is(const struct blk_backend *b);
