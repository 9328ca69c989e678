/* Writing guest RAM as a layer: a full layer (every non-zero page) or a diff
 * layer (the pages of a dirty bitmap). The VM must be paused (nothing may write
 * RAM meanwhile). */
#pragma once

#include "snapshot/layer.h"
#include "snapshot/layer-write.h"

/* Guest RAM as the shim holds it (struct guest_memory's host, size, fd). */
struct snap_ram {
    const uint8_t *host; /* page aligned mapping of size bytes */
    uint64_t size;       /* multiple of 4 KiB */
    int fd;              /* memfd / shm file backing host, or -1 for anonymous memory */
    uint64_t page_size;  /* the host pages behind it: 0 or 4096, or 2 MiB (hugetlbfs, whose SEEK_DATA sees
                          * every page as data: populated pages are found with mincore() instead) */
    bool private_file;   /* a private mapping of fd (restore by sharing): the file's data, and the
                          * mapping's own pages that mincore() finds */
};

/* Set in bitmap (bit p of word p / 64 is RAM page p) the pages of ram that
 * are populated (pages never touched are holes of its memfd, or not
 * resident: mincore), without touching them (populated.c). */
bool snap_ram_populated(const struct snap_ram *ram, uint64_t *bitmap, GError **error);

struct snap_save_stats {
    uint64_t data_pages;   /* pages stored */
    uint64_t zero_pages;   /* candidate pages found zero (not stored, or a zero run in a diff) */
    uint64_t scanned_pages;/* pages read to decide (populated or dirty pages) */
    uint64_t file_bytes;
    uint64_t elapsed_ns;
};

/* Full layer at path with id `id`. Pages never populated are found without
 * touching them (SEEK_DATA/SEEK_HOLE on fd, or mincore() on anonymous memory
 * and on huge pages, where a touched page brings in its whole 2 MiB),
 * so untouched RAM costs nothing; populated pages that read as zero are left
 * out. Note: RAM still registered with an on-demand (userfaultfd) restore holds
 * pages not populated yet; call snap_uffd_fill_all() first. stats may be NULL. */
bool snap_save_full(const char *path, const struct snap_ram *ram, const snap_id *id,
                    struct snap_save_stats *stats, GError **error);

/* Diff layer at path: exactly the pages whose bit is set in dirty (bit p of
 * word p / 64 is RAM page p, KVM's dirty-log layout; size / 4096 bits), naming
 * parent. Dirty pages that are now zero become zero runs (they may hide older
 * non-zero data). */
bool snap_save_diff(const char *path, const struct snap_ram *ram, const uint64_t *dirty,
                    const snap_id *id, const snap_id *parent, struct snap_save_stats *stats,
                    GError **error);

/* The same two, written in steps (snapshot/layer-write.h): steps->go_on
 * after every SNAP_SAVE_STEP_PAGES pages read, with the pages read so far. */
#define SNAP_SAVE_STEP_PAGES 4096u /* 16 MiB */
bool snap_save_full_steps(const char *path, const struct snap_ram *ram, const snap_id *id,
                          const struct snap_steps *steps, struct snap_save_stats *stats, GError **error);
bool snap_save_diff_steps(const char *path, const struct snap_ram *ram, const uint64_t *dirty,
                          const snap_id *id, const snap_id *parent, const struct snap_steps *steps,
                          struct snap_save_stats *stats, GError **error);
