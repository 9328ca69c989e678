/* The guest's physical memory map, as the kernel reads it from the zero page.
 *
 *   [0, 0x9fc00)            RAM
 *   [0x9fc00, 1 MiB)        reserved: EBDA (MP table), VGA hole, BIOS area (ACPI tables)
 *   [1 MiB, low end)        RAM, low end = min(size, 3 GiB)
 *   [4 GiB, 4 GiB + rest)   RAM, only for guests bigger than 3 GiB
 *
 * The 32-bit hole [3 GiB, 4 GiB) holds the virtio-mmio window, IOAPIC and
 * LAPIC; it is not listed, so Linux treats it as MMIO.
 */
#include "boot-internal.h"

#define E820_TYPE_RAM 1
#define E820_TYPE_RESERVED 2
#define EBDA_START BOOT_MPTABLE_ADDR
#define ONE_MIB 0x100000ull

static void add_entry(struct boot_e820_entry *table, unsigned max, unsigned *n, uint64_t addr,
                      uint64_t size, uint32_t type)
{
    if (size == 0 || *n >= max)
        return;
    table[*n] = (struct boot_e820_entry){ .addr = addr, .size = size, .type = type };
    (*n)++;
}

unsigned e820_build(const struct guest_memory *mem, struct boot_e820_entry *table, unsigned max)
{
    unsigned n = 0;
    for (unsigned i = 0; i < mem->nregions; i++) {
        const struct guest_region *r = &mem->regions[i];
        if (r->gpa != 0) {
            add_entry(table, max, &n, r->gpa, r->size, E820_TYPE_RAM);
            continue;
        }
        /* The region at 0 always reaches past 1 MiB: VSNAP_MIN_MEMORY is 16 MiB. */
        add_entry(table, max, &n, 0, EBDA_START, E820_TYPE_RAM);
        add_entry(table, max, &n, EBDA_START, ONE_MIB - EBDA_START, E820_TYPE_RESERVED);
        if (r->size > ONE_MIB)
            add_entry(table, max, &n, ONE_MIB, r->size - ONE_MIB, E820_TYPE_RAM);
    }
    return n;
}
