/* The parts of Linux's struct boot_params (the "zero page") this guest reads.
 * Offsets from Documentation/arch/x86/zero-page.rst; the shim fills them in.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define BP_EXT_CMD_LINE_PTR 0x0c8 /* u32: high 32 bits of the command line address */
#define BP_E820_ENTRIES 0x1e8     /* u8 */
#define BP_CMD_LINE_PTR 0x228     /* u32 */
#define BP_E820_TABLE 0x2d0       /* 20-byte entries */
#define BP_E820_MAX 128

#define E820_TYPE_RAM 1

struct e820_entry {
    uint64_t addr;
    uint64_t size;
    uint32_t type;
} __attribute__((packed));

static inline unsigned boot_params_e820_count(const uint8_t *bp)
{
    unsigned n = bp[BP_E820_ENTRIES];
    return n > BP_E820_MAX ? BP_E820_MAX : n;
}

static inline const struct e820_entry *boot_params_e820(const uint8_t *bp)
{
    return (const struct e820_entry *)(bp + BP_E820_TABLE);
}

static inline const char *boot_params_cmdline(const uint8_t *bp)
{
    uint64_t lo = *(const uint32_t *)(bp + BP_CMD_LINE_PTR);
    uint64_t hi = *(const uint32_t *)(bp + BP_EXT_CMD_LINE_PTR);
    uint64_t addr = (hi << 32) | lo;
    return addr ? (const char *)(uintptr_t)addr : "";
}

/* True if [start, start + len) lies inside one RAM entry of the e820 map. */
static inline bool boot_params_is_ram(const uint8_t *bp, uint64_t start, uint64_t len)
{
    const struct e820_entry *e = boot_params_e820(bp);
    unsigned n = boot_params_e820_count(bp);
    for (unsigned i = 0; i < n; i++) {
        if (e[i].type != E820_TYPE_RAM || e[i].size == 0)
            continue;
        if (start >= e[i].addr && len <= e[i].size && start - e[i].addr <= e[i].size - len)
            return true;
    }
    return false;
}
