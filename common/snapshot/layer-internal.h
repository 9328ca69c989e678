/* Inside the snapshot library only (not a public header): the checksums of a
 * layer's header and index, shared by the writer and the reader, and the
 * building of a chain's page index. */
#pragma once

#include "snapshot/chain.h"

/* CRC-32C of the header with header_crc taken as 0. */
uint32_t snap_layer_header_crc(const struct snap_layer_header *hdr);
/* CRC-32C of the index followed by the block checksum table. */
uint32_t snap_layer_index_crc(const struct snap_layer_run *runs, uint64_t run_count,
                              const uint32_t *block_crc, uint64_t block_count);

static inline uint64_t snap_blocks_for_pages(uint64_t pages)
{
    return (pages + SNAP_BLOCK_PAGES - 1) / SNAP_BLOCK_PAGES;
}

/* Fill chain->page_layer from the layers' indexes (page-index.c). */
void snap_page_index_build(struct snap_chain *chain);
