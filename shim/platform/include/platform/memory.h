/* Guest RAM: one contiguous host mapping, exposed to the guest as up to two
 * regions around the 32-bit MMIO hole.
 *
 *   RAM offset [0, low)         -> guest-physical [0, low)
 *   RAM offset [low, size)      -> guest-physical [4 GiB, 4 GiB + size - low)
 *
 * where low = min(size, MEM_32BIT_GAP_START). Keeping RAM as one mapping indexed
 * by "RAM offset" lets snapshot layers and the userfaultfd handler address pages
 * without caring about the hole.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "platform/layout.h"
/* The huge pages guest RAM can be backed by (hugetlbfs, x86-64's PMD size). */
#define GUEST_HUGE_PAGE_SIZE (2ull << 20)

struct guest_region {
    uint64_t gpa;        /* guest-physical start */
    uint64_t size;       /* bytes */
    uint64_t ram_offset; /* offset into guest_memory.host */
};

struct guest_memory {
    uint8_t *host;  /* size bytes; untouched pages cost nothing (MAP_NORESERVE, or only a huge page count) */
    uint64_t size;
    uint64_t page_size; /* the host pages behind it: GUEST_PAGE_SIZE, or GUEST_HUGE_PAGE_SIZE (hugetlbfs) */
    int fd;         /* backing memfd or /dev/shm file, or -1 for anonymous */
    bool private_file; /* host is a private (copy-on-write) mapping of fd, which is read-only */
    unsigned nregions;
    struct guest_region regions[2];
};

/* Allocate RAM of size bytes (not touched) on 4 KiB pages. */
bool guest_memory_init(struct guest_memory *mem, uint64_t size, GError **error);
/* The same on host pages of page_size: GUEST_PAGE_SIZE, or
 * GUEST_HUGE_PAGE_SIZE (a hugetlbfs memfd; size a multiple of 2 MiB; every
 * huge page reserved now, and a host with too few free fails with
 * G_IO_ERROR_NO_SPACE saying how many it has and needs). Dirty tracking
 * and snapshots still work in 4 KiB pages. */
bool guest_memory_init_paged(struct guest_memory *mem, uint64_t size, uint64_t page_size, GError **error);
void guest_memory_release(struct guest_memory *mem);
/* Take over a mapping made elsewhere (a restore's merged RAM image):
 * host is size bytes, fd backs it or is -1; released like RAM of init. */
bool guest_memory_adopt(struct guest_memory *mem, uint8_t *host, uint64_t size, int fd, GError **error);
/* The same for a private mapping of fd (a restore by sharing). */
bool guest_memory_adopt_private(struct guest_memory *mem, uint8_t *host, uint64_t size, int fd, GError **error);

/* Host pointer for [gpa, gpa + len) if it lies inside one RAM region, else NULL. */
void *guest_memory_ptr(const struct guest_memory *mem, uint64_t gpa, uint64_t len);

/* RAM offset of gpa, or UINT64_MAX if gpa is not RAM. */
uint64_t guest_memory_offset(const struct guest_memory *mem, uint64_t gpa);

/* Highest guest-physical address + 1 that is RAM. */
uint64_t guest_memory_end(const struct guest_memory *mem);
