/* Snapshot memory layers: the on-disk format and reading one layer.
 *
 * A layer holds some pages of guest RAM, addressed by RAM offset (shim/platform/include/platform/memory.h:
 * one flat range [0, ram_size)). A full (base) layer holds every non-zero page;
 * a diff layer holds the pages written since its parent and names the parent by
 * id. Ids are random UUIDs chosen when a snapshot is taken; rewriting a layer's
 * data (compaction) keeps its id, so children still name it.
 *
 * File layout, format version 1 (integers little-endian):
 *
 *   [0, 4096)                     header page: struct snap_layer_header, rest zero
 *   [4096, 4096 + page_count*4K)  page data, in index order, so data is page aligned
 *                                 and can be mmapped and served straight from the file
 *   [index_offset, +run_count*16) index: struct snap_layer_run, sorted by first_page,
 *                                 non-overlapping
 *   [csum_offset, +block_count*4) one CRC-32C per data block
 *
 * Data blocks: the data area is cut into blocks of block_pages pages (16 pages =
 * 64 KiB in this version; the last block may be shorter). Each block has its own
 * CRC-32C, checked the first time any page of the block is read (copy, merge,
 * or served on demand), never up front. 64 KiB keeps the checksum cost per 4 KiB
 * fault small while a 2 MiB fault block needs only 32 checks.
 * header_crc covers the header struct (with header_crc = 0); index_crc covers
 * the index and the checksum table. The index is written after the data so a
 * layer is written in one pass; file_size in the header lets a reader notice
 * truncation before anything else.
 *
 * A run is either data (npages pages stored in the data area) or a zero run
 * (SNAP_RUN_ZERO: the pages are zero, nothing stored). Diff layers use zero runs
 * for pages the guest wrote to zero over older non-zero data; full layers simply
 * leave zero pages out.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "limits/vsnap-limits.h"

#define SNAP_LAYER_MAGIC "VSNAPLYR"
#define SNAP_LAYER_VERSION 1u
#define SNAP_PAGE_SIZE 4096u
#define SNAP_BLOCK_PAGES 16u
#define SNAP_LAYER_DATA_OFFSET 4096u
#define SNAP_RUN_ZERO 1u
#define SNAP_LAYER_FLAG_FULL 1u /* no parent: absent pages are zero */
/* A disk layer (snapshot/disk.h): "pages" are 4 KiB disk blocks, ram_size is
 * the disk's capacity rounded up to 4 KiB, and a layer without a parent is
 * never full: absent blocks come from the disk's base image. */
#define SNAP_LAYER_FLAG_DISK 2u
#define SNAP_LAYER_KNOWN_FLAGS (SNAP_LAYER_FLAG_FULL | SNAP_LAYER_FLAG_DISK)

/* The largest RAM a layer may describe: the shim's largest VM. Readers size
 * things by it before they can check it against anything else (a chain's
 * page index is 2 bytes a page: 32 MiB), so a header claiming more is
 * refused, not believed. */
#define SNAP_MAX_RAM_SIZE VSNAP_MAX_MEMORY
/* The largest disk a disk layer may describe. */
#define SNAP_MAX_DISK_SIZE VSNAP_MAX_DISK_SIZE

#define SNAP_ERROR (snap_error_quark())
GQuark snap_error_quark(void);

enum snap_error_code {
    SNAP_ERROR_IO,          /* read/write/open failed (errno in message) */
    SNAP_ERROR_NO_SPACE,    /* destination full: temp file removed */
    SNAP_ERROR_FORMAT,      /* not a layer, wrong version, truncated, bad index */
    SNAP_ERROR_CHECKSUM,    /* header, index or data block checksum mismatch */
    SNAP_ERROR_CHAIN,       /* parent ids, page or RAM size do not match */
    SNAP_ERROR_INVALID,     /* bad argument from the caller */
    SNAP_ERROR_BUSY,        /* a disk image or overlay is locked by another open (image-lock.h) */
};

/* Whose fault: true when the snapshot on disk or the caller's argument is
 * wrong (format, checksum, chain, invalid), false when the host failed (I/O,
 * no space) or another process holds the file (busy). */
bool snap_error_is_bad_input(const GError *error);

typedef struct {
    uint8_t bytes[16];
} snap_id;

void snap_id_random(snap_id *id);
bool snap_id_is_nil(const snap_id *id);
bool snap_id_equal(const snap_id *a, const snap_id *b);
/* 36 characters + NUL, 8-4-4-4-12 lowercase hex. */
void snap_id_to_string(const snap_id *id, char out[37]);
bool snap_id_parse(const char *text, snap_id *id);

struct snap_layer_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size;  /* sizeof(struct snap_layer_header) */
    uint32_t page_size;
    uint32_t block_pages;
    uint64_t ram_size;
    snap_id id;
    snap_id parent_id;     /* nil for a full layer */
    uint64_t page_count;   /* data pages stored */
    uint64_t run_count;
    uint64_t block_count;
    uint64_t index_offset;
    uint64_t csum_offset;
    uint64_t file_size;
    uint64_t created_ns;   /* CLOCK_REALTIME when written, for people */
    uint32_t flags;        /* SNAP_LAYER_FLAG_* */
    uint32_t index_crc;
    uint32_t header_crc;
    uint32_t reserved;
};

struct snap_layer_run {
    uint64_t first_page;
    uint32_t npages;
    uint32_t kind; /* 0 data, SNAP_RUN_ZERO */
};

/* One open, verified (header + index) layer. Fields are read-only for users. */
struct snap_layer {
    char *path;
    int fd;                    /* -1 once open: data is reached through the mapping */
    struct snap_layer_header hdr;
    struct snap_layer_run *runs;
    uint64_t *run_data_page;   /* data page where each data run starts */
    uint32_t *block_crc;
    uint8_t *block_state;      /* per block: 0 unchecked, 1 good, 2 bad (atomic) */
    const uint8_t *data;       /* mmap of the data area (NULL if no data) */
    uint64_t data_len;
};

/* Open a layer and check everything but the data: magic, version, page size,
 * sizes against the file (truncation), header and index checksums, index
 * ordering and bounds. Errors name the file. */
struct snap_layer *snap_layer_open(const char *path, GError **error);
void snap_layer_close(struct snap_layer *layer);
typedef struct snap_layer snap_layer; /* for g_autoptr */
G_DEFINE_AUTOPTR_CLEANUP_FUNC(snap_layer, snap_layer_close)

bool snap_layer_is_full(const struct snap_layer *layer);
bool snap_layer_is_disk(const struct snap_layer *layer);

enum snap_page_kind {
    SNAP_PAGE_KIND_ABSENT, /* this layer does not hold the page */
    SNAP_PAGE_KIND_ZERO,   /* the page is zero at this layer */
    SNAP_PAGE_KIND_DATA,   /* stored; *data_page says where */
};

/* What the layer says about RAM page `page` (binary search in the index). */
enum snap_page_kind snap_layer_find(const struct snap_layer *layer, uint64_t page,
                                    uint64_t *data_page);

/* Index of the run holding `page`, or -1. */
int64_t snap_layer_find_run(const struct snap_layer *layer, uint64_t page);

/* Check the checksum of every block covering data pages
 * [data_page, data_page + npages), once per block for the layer's lifetime
 * (thread-safe). On a mismatch the error names the file and block and the
 * block stays bad. */
bool snap_layer_verify_data(struct snap_layer *layer, uint64_t data_page, uint64_t npages,
                            GError **error);

/* Pointer to stored data page `data_page` (not verified: call
 * snap_layer_verify_data first). It points into the file's mapping: read it
 * with snapshot/mapped-read.h where the file may be truncated meanwhile. */
static inline const uint8_t *snap_layer_data_page(const struct snap_layer *layer,
                                                  uint64_t data_page)
{
    return layer->data + data_page * SNAP_PAGE_SIZE;
}
