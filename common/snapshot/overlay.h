/* A disk's active overlay: the blocks written since the disk's last snapshot,
 * over the sealed disk layers (snapshot/disk.h) and the base image. Format
 * version 1 (README.md), integers little-endian:
 *
 *   [0, 4096)                 header page: struct snap_overlay_header, rest zero
 *   [bitmap_offset, +bytes)   written-block bitmap, bit b of 64-bit word b/64 set
 *                             once block b's data is in the file
 *   [data_offset + b * 4096)  block b's data (a sparse file: unwritten blocks are holes)
 *
 * The header changes after creation only when a block pull detaches the
 * overlay from its chain (snap_overlay_detach_lower); it is checked by its CRC-32C.
 * Bits only ever go from 0 to 1, and a bit reaches the file only after its
 * block's data was made durable (snap_overlay_sync: fdatasync, bitmap,
 * fdatasync), so a bitmap torn by a crash still names only blocks whose data
 * is there. Opening refuses bits beyond the capacity and a file too short for
 * the blocks its bitmap names.
 *
 * The format is the library's; the shim's overlay backend
 * (shim/block/blk-overlay.c) does the disk's I/O on the open file. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "snapshot/disk-identity.h"
#include "snapshot/layer.h"

#define SNAP_OVERLAY_MAGIC "VSNAPOVL"
#define SNAP_OVERLAY_VERSION 1u
#define SNAP_OVERLAY_BLOCK 4096u
#define SNAP_OVERLAY_DATA_ALIGN (1u << 20)

struct snap_overlay_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size;    /* sizeof(struct snap_overlay_header) */
    uint32_t block_size;     /* 4096 */
    uint32_t flags;          /* 0 */
    uint64_t capacity;       /* the disk's bytes, a multiple of 512 */
    uint64_t block_count;    /* ceil(capacity / 4096) */
    uint64_t bitmap_offset;  /* 4096 */
    uint64_t bitmap_bytes;   /* ceil(block_count / 64) * 8 */
    uint64_t data_offset;    /* bitmap's end rounded up to 1 MiB */
    snap_id lower_id;        /* the sealed disk layer below; nil: none (straight over the image) */
    uint64_t base_size;      /* the base image's identity (disk-identity.h) */
    uint64_t base_mtime_ns;
    uint32_t base_crc32c;
    uint32_t reserved;
    uint64_t created_ns;     /* CLOCK_REALTIME, for people */
    uint32_t header_crc;     /* CRC-32C of this struct with header_crc 0 */
    uint32_t reserved2;
};

struct snap_overlay {
    char *path;
    int fd;
    bool writable;
    struct snap_overlay_header hdr;
    uint64_t *bitmap;            /* block_count bits, as the disk sees it now */
    uint64_t dirty_lo, dirty_hi; /* bitmap words changed since they reached the file: [lo, hi) */
};

/* Create a new empty overlay at path (O_EXCL, 0600), durably. */
struct snap_overlay *snap_overlay_create(const char *path, uint64_t capacity, const snap_id *lower,
                                         const struct snap_disk_identity *base, GError **error);
/* Open and check one. Errors (SNAP_ERROR_FORMAT, _CHECKSUM) name the file. */
struct snap_overlay *snap_overlay_open(const char *path, bool writable, GError **error);
void snap_overlay_close(struct snap_overlay *ov);
typedef struct snap_overlay snap_overlay; /* for g_autoptr */
G_DEFINE_AUTOPTR_CLEANUP_FUNC(snap_overlay, snap_overlay_close)

static inline bool snap_overlay_has(const struct snap_overlay *ov, uint64_t block)
{
    return ov->bitmap[block / 64] >> (block % 64) & 1;
}

static inline uint64_t snap_overlay_block_offset(const struct snap_overlay *ov, uint64_t block)
{
    return ov->hdr.data_offset + block * SNAP_OVERLAY_BLOCK;
}

/* Blocks [first, first + n) hold data in the file now (written, not yet durable). */
void snap_overlay_mark(struct snap_overlay *ov, uint64_t first, uint64_t n);

/* Make every block written so far durable, data first, then the bitmap
 * words that changed: a guest FLUSH. 0 or -errno. */
int snap_overlay_sync(struct snap_overlay *ov);

/* Blocks the overlay holds. */
uint64_t snap_overlay_count(const struct snap_overlay *ov);

/* Write the overlay's blocks as a sealed disk layer at layer_path (id, parent
 * = the overlay's lower_id), all-zero blocks as zero runs; *blocks gets the
 * blocks it holds. Reads the file: written blocks need not be synced. */
bool snap_overlay_seal(struct snap_overlay *ov, const char *layer_path, const snap_id *id, uint64_t *blocks,
                       GError **error);
/* The same in steps (snapshot/layer-write.h): steps->go_on after every
 * SNAP_OVERLAY_SEAL_STEP_BLOCKS blocks read, with the blocks read so far. */
#define SNAP_OVERLAY_SEAL_STEP_BLOCKS 4096u /* 16 MiB */
struct snap_steps;
bool snap_overlay_seal_steps(struct snap_overlay *ov, const char *layer_path, const snap_id *id,
                             const struct snap_steps *steps, uint64_t *blocks, GError **error);

/* A block pull copied every block the chain's layers held into the overlay:
 * from now on it sits directly on the image. Makes the data and bitmap
 * durable first (snap_overlay_sync), then rewrites the header with lower_id
 * nil (and its checksum) and syncs again, so whatever a crash leaves, the
 * header names a lower the overlay's blocks are right over (the chain reads
 * the same as the pulled blocks). 0 or -errno. */
int snap_overlay_detach_lower(struct snap_overlay *ov);

/* The overlay belongs where it is put: made for a disk of capacity bytes, on
 * the layer top (nil: none), over image as it is now. SNAP_ERROR_CHAIN naming
 * the overlay (and the image) otherwise. */
bool snap_overlay_check_fits(const struct snap_overlay *ov, const snap_id *top, uint64_t capacity, const char *image,
                             GError **error);

/* The base image identity the overlay was created over. */
void snap_overlay_base(const struct snap_overlay *ov, struct snap_disk_identity *out);
