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

struct guest_region {
    uint64_t gpa;        /* guest-physical start */
    uint64_t size;       /* bytes */
    uint64_t ram_offset; /* offset into guest_memory.host */
};

struct guest_memory {
    uint8_t *host;  /* size bytes, MAP_NORESERVE: untouched pages cost nothing */
    uint64_t size;
    int fd;         /* backing memfd or /dev/shm file, or -1 for anonymous */
    unsigned nregions;
    struct guest_region regions[2];
};

/* Allocate RAM of size bytes (not touched). */
bool guest_memory_init(struct guest_memory *mem, uint64_t size, GError **error);
void guest_memory_release(struct guest_memory *mem);
/* Take over a mapping made elsewhere (a restore's merged RAM image):
 * host is size bytes, fd backs it or is -1; released like RAM of init. */
bool guest_memory_adopt(struct guest_memory *mem, uint8_t *host, uint64_t size, int fd, GError **error);

/* Host pointer for [gpa, gpa + len) if it lies inside one RAM region, else NULL. */
void *guest_memory_ptr(const struct guest_memory *mem, uint64_t gpa, uint64_t len);

/* RAM offset of gpa, or UINT64_MAX if gpa is not RAM. */
uint64_t guest_memory_offset(const struct guest_memory *mem, uint64_t gpa);

/* Highest guest-physical address + 1 that is RAM. */
uint64_t guest_memory_end(const struct guest_memory *mem);
