/* Dirty bitmap helpers (see dirty-bitmap.h). */
#include "ram-snapshot/dirty-bitmap.h"

#include "snapshot/layer.h"

uint64_t snap_dirty_bitmap_words(uint64_t ram_size)
{
    return (ram_size / SNAP_PAGE_SIZE + 63) / 64;
}

uint64_t *snap_dirty_bitmap_new(uint64_t ram_size)
{
    return g_new0(uint64_t, snap_dirty_bitmap_words(ram_size) + 1);
}

void snap_dirty_bitmap_or_slot(uint64_t *ram_bitmap, uint64_t ram_offset,
                               const uint64_t *slot_bitmap, uint64_t slot_pages)
{
    uint64_t first = ram_offset / SNAP_PAGE_SIZE;
    unsigned shift = first % 64;
    uint64_t *dst = ram_bitmap + first / 64;
    uint64_t words = (slot_pages + 63) / 64;
    for (uint64_t w = 0; w < words; w++) {
        uint64_t bits = slot_bitmap[w];
        if (w == words - 1 && slot_pages % 64)
            bits &= (1ull << (slot_pages % 64)) - 1; /* ignore bits past the slot */
        if (!bits)
            continue;
        dst[w] |= bits << shift;
        if (shift)
            dst[w + 1] |= bits >> (64 - shift);
    }
}

void snap_dirty_bitmap_mark(uint64_t *ram_bitmap, uint64_t ram_offset, uint64_t len)
{
    if (!len)
        return;
    uint64_t last = (ram_offset + len - 1) / SNAP_PAGE_SIZE;
    for (uint64_t p = ram_offset / SNAP_PAGE_SIZE; p <= last; p++)
        __atomic_fetch_or(&ram_bitmap[p / 64], 1ull << (p % 64), __ATOMIC_RELAXED);
}

bool snap_dirty_bitmap_test(const uint64_t *ram_bitmap, uint64_t page)
{
    return ram_bitmap[page / 64] >> (page % 64) & 1;
}

uint64_t snap_dirty_bitmap_count(const uint64_t *ram_bitmap, uint64_t ram_size)
{
    uint64_t n = 0, words = snap_dirty_bitmap_words(ram_size);
    for (uint64_t w = 0; w < words; w++)
        n += (uint64_t)__builtin_popcountll(ram_bitmap[w]);
    return n;
}
