/* The zero runs of a chain that an on-demand restore leaves unregistered
 * (uffd.c): a first touch there is the kernel's own fresh zero page, with no
 * userfaultfd round trip. */
#pragma once

#include <glib.h>

#include "snapshot/chain.h"

struct uffd_hole {
    uint64_t first, n; /* 4 KiB pages */
};

/* The chain's zero runs over [0, npages), each shrunk to whole align_pages
 * (the RAM mapping's pages) and at least 4 pages long; the longest ones
 * only when there are more than a registration should split RAM into. An
 * array of struct uffd_hole in address order. */
GArray *uffd_holes_find(const struct snap_chain *chain, uint64_t npages, uint64_t align_pages);
