#include "vmgenid.h"

#include <stddef.h>

#include "io.h"
#include "libc.h"

#define BIOS_AREA 0xe0000u
#define BIOS_AREA_END 0x100000u

static struct {
    bool found;
    uint64_t addr;
    uint16_t gpe0_port;
} gen;

static uint32_t rd32(const volatile uint8_t *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const volatile uint8_t *p)
{
    return rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static bool same(const volatile uint8_t *p, const char *text, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (uint8_t)text[i])
            return false;
    return true;
}

static const volatile uint8_t *find_rsdp(void)
{
    for (uint32_t a = BIOS_AREA; a < BIOS_AREA_END; a += 16) {
        const volatile uint8_t *p = (const volatile uint8_t *)(uintptr_t)a;
        if (same(p, "RSD PTR ", 8))
            return p;
    }
    return NULL;
}

static const volatile uint8_t *find_table(const volatile uint8_t *xsdt, const char *signature)
{
    uint32_t entries = (rd32(xsdt + 4) - 36) / 8;
    for (uint32_t i = 0; i < entries; i++) {
        const volatile uint8_t *t = (const volatile uint8_t *)(uintptr_t)rd64(xsdt + 36 + 8 * i);
        if (same(t, signature, 4))
            return t;
    }
    return NULL;
}

/* Method (ADDR, 0) { Return (Package (2) { DWord low, DWord high }) }, as the
 * shim encodes it: "ADDR" 00 A4 12 <len> 02 0C <low> 0C <high>. */
static bool find_addr(const volatile uint8_t *dsdt, uint64_t *addr)
{
    uint32_t len = rd32(dsdt + 4);
    for (uint32_t i = 36; i + 19 <= len; i++) {
        const volatile uint8_t *p = dsdt + i;
        if (same(p, "ADDR", 4) && p[4] == 0 && p[5] == 0xa4 && p[6] == 0x12 && p[8] == 2 && p[9] == 0x0c &&
            p[14] == 0x0c) {
            *addr = rd32(p + 10) | (uint64_t)rd32(p + 15) << 32;
            return true;
        }
    }
    return false;
}

bool vmgenid_find(void)
{
    if (gen.found)
        return true;
    const volatile uint8_t *rsdp = find_rsdp();
    if (!rsdp)
        return false;
    const volatile uint8_t *xsdt = (const volatile uint8_t *)(uintptr_t)rd64(rsdp + 24);
    const volatile uint8_t *fadt = find_table(xsdt, "FACP");
    if (!fadt)
        return false;
    const volatile uint8_t *dsdt = (const volatile uint8_t *)(uintptr_t)rd64(fadt + 140);
    if (!same(dsdt, "DSDT", 4) || !find_addr(dsdt, &gen.addr))
        return false;
    gen.gpe0_port = (uint16_t)rd32(fadt + 80);
    gen.found = true;
    return true;
}

void vmgenid_read_hex(char out[33])
{
    static const char digits[] = "0123456789abcdef";
    const volatile uint8_t *id = (const volatile uint8_t *)(uintptr_t)gen.addr;
    for (unsigned i = 0; i < 16; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[32] = '\0';
}

bool vmgenid_take_event(void)
{
    if (!gen.gpe0_port)
        return false;
    bool pending = inb(gen.gpe0_port) & 1;
    if (pending)
        outb(gen.gpe0_port, 1); /* write 1 to clear */
    return pending;
}
