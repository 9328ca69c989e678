/* Dirty bitmaps in RAM-offset space, the input of snap_save_diff(): bit p of
 * word p / 64 is RAM page p (KVM's dirty-log layout). KVM reports one bitmap
 * per memory slot and the shim's slots map to RAM offsets (shim/platform/include/platform/memory.h), and
 * the VMM's own writes into guest RAM are not in KVM's log at all: these
 * helpers gather both into one bitmap. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Zeroed bitmap for ram_size bytes of RAM; free with g_free(). */
uint64_t *snap_dirty_bitmap_new(uint64_t ram_size);
uint64_t snap_dirty_bitmap_words(uint64_t ram_size);

/* OR a slot's bitmap (slot_pages bits, KVM_GET_DIRTY_LOG layout) into the RAM
 * bitmap, the slot starting at RAM offset ram_offset (page aligned). */
void snap_dirty_bitmap_or_slot(uint64_t *ram_bitmap, uint64_t ram_offset,
                               const uint64_t *slot_bitmap, uint64_t slot_pages);

/* Mark [ram_offset, ram_offset + len) dirty (the VMM wrote there). Thread-safe
 * (atomic OR), so device threads may call it while vCPUs run. */
void snap_dirty_bitmap_mark(uint64_t *ram_bitmap, uint64_t ram_offset, uint64_t len);

bool snap_dirty_bitmap_test(const uint64_t *ram_bitmap, uint64_t page);
uint64_t snap_dirty_bitmap_count(const uint64_t *ram_bitmap, uint64_t ram_size);
