/* mptable_write, read back by a parser of its own written from the MP
 * specification 1.4: floating pointer where Linux scans, checksums, one
 * enabled processor per vCPU (BSP = APIC id 0), the ISA bus, the IOAPIC, the
 * ISA interrupt assignments and the local interrupts.
 */
#include <glib.h>
#include <string.h>

#include "boot/boot.h"
#include "platform/memory.h"

struct parsed_mp {
    unsigned processors, bsp_count, bus_isa, ioapics, io_ints, local_ints;
    uint8_t apic_ids[256];
    uint8_t ioapic_id;
    uint32_t ioapic_addr;
    int isa_irq_pin[16];       /* IOAPIC pin of each ISA IRQ (INT type), -1 if none */
    int extint_pin;
    int lint_type[2];          /* interrupt type on LINT0 / LINT1 */
};

static uint8_t sum(const uint8_t *p, size_t n)
{
    uint8_t s = 0;
    while (n--)
        s += *p++;
    return s;
}

static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* Find "_MP_" on a 16-byte boundary in [start, start + len), as Linux does. */
static const uint8_t *scan_floating_pointer(const struct guest_memory *mem, uint64_t start, uint64_t len,
                                            uint64_t *found)
{
    const uint8_t *p = guest_memory_ptr(mem, start, len);
    g_assert_nonnull(p);
    for (uint64_t off = 0; off + 16 <= len; off += 16) {
        if (memcmp(p + off, "_MP_", 4) == 0 && p[off + 8] == 1 && sum(p + off, 16) == 0) {
            *found = start + off;
            return p + off;
        }
    }
    return NULL;
}

static void parse_entry(struct parsed_mp *mp, const uint8_t *e, size_t *len)
{
    switch (e[0]) {
    case 0: /* processor */
        *len = 20;
        g_assert_true(e[3] & 1); /* enabled */
        mp->apic_ids[mp->processors++] = e[1];
        if (e[3] & 2)
            mp->bsp_count++;
        g_assert_cmpuint((e[3] & 2) != 0, ==, e[1] == 0);
        break;
    case 1: /* bus */
        *len = 8;
        if (memcmp(e + 2, "ISA   ", 6) == 0)
            mp->bus_isa++;
        break;
    case 2: /* IOAPIC */
        *len = 8;
        g_assert_true(e[3] & 1);
        mp->ioapics++;
        mp->ioapic_id = e[1];
        mp->ioapic_addr = rd32(e + 4);
        break;
    case 3: /* I/O interrupt: type, int type, flags, src bus, src irq, dst ioapic, dst pin */
        *len = 8;
        mp->io_ints++;
        g_assert_cmpuint(e[6], ==, mp->ioapic_id);
        if (e[1] == 0 && e[5] < 16) {
            g_assert_cmpint(mp->isa_irq_pin[e[5]], ==, -1);
            mp->isa_irq_pin[e[5]] = e[7];
        } else if (e[1] == 3) {
            mp->extint_pin = e[7];
        }
        break;
    case 4: /* local interrupt */
        *len = 8;
        mp->local_ints++;
        g_assert_cmpuint(e[6], ==, 0xff);
        g_assert_cmpuint(e[7], <, 2);
        mp->lint_type[e[7]] = e[1];
        break;
    default:
        g_error("unknown MP entry type %u", e[0]);
    }
}

static void parse_mptable(const struct guest_memory *mem, struct parsed_mp *mp)
{
    memset(mp, 0, sizeof *mp);
    for (int i = 0; i < 16; i++)
        mp->isa_irq_pin[i] = -1;
    mp->extint_pin = mp->lint_type[0] = mp->lint_type[1] = -1;

    /* Linux looks in the last KiB of base memory (639 KiB) among others. */
    uint64_t fp_addr;
    const uint8_t *fp = scan_floating_pointer(mem, 639 * 1024, 1024, &fp_addr);
    g_assert_nonnull(fp);
    g_assert_cmpuint(fp[9], ==, 4);  /* spec 1.4 */
    g_assert_cmpuint(fp[11], ==, 0); /* a configuration table follows, no default config */
    uint32_t cfg_addr = rd32(fp + 4);
    const uint8_t *cfg = guest_memory_ptr(mem, cfg_addr, 44);
    g_assert_nonnull(cfg);
    g_assert_cmpmem(cfg, 4, "PCMP", 4);
    uint16_t len = rd16(cfg + 4);
    cfg = guest_memory_ptr(mem, cfg_addr, len);
    g_assert_cmpuint(sum(cfg, len), ==, 0);
    g_assert_cmphex(rd32(cfg + 36), ==, 0xfee00000);
    /* The whole table is in the e820-reserved area below the BIOS tables. */
    g_assert_cmphex(fp_addr, >=, 0x9fc00);
    g_assert_cmphex(cfg_addr + len, <=, 0xe0000);

    unsigned count = rd16(cfg + 34);
    size_t off = 44;
    for (unsigned i = 0; i < count; i++) {
        g_assert_cmpuint(off, <, len);
        size_t elen = 0;
        parse_entry(mp, cfg + off, &elen);
        off += elen;
    }
    g_assert_cmpuint(off, ==, len);
}

static void test_mptable(gconstpointer data)
{
    unsigned ncpus = GPOINTER_TO_UINT(data);
    struct guest_memory mem;
    GError *error = NULL;
    g_assert_true(guest_memory_init(&mem, 256ull << 20, &error));
    g_assert_true(mptable_write(&mem, ncpus, &error));
    g_assert_no_error(error);

    struct parsed_mp mp;
    parse_mptable(&mem, &mp);
    g_assert_cmpuint(mp.processors, ==, ncpus);
    for (unsigned i = 0; i < ncpus; i++)
        g_assert_cmpuint(mp.apic_ids[i], ==, i);
    g_assert_cmpuint(mp.bsp_count, ==, 1);
    g_assert_cmpuint(mp.bus_isa, ==, 1);
    g_assert_cmpuint(mp.ioapics, ==, 1);
    g_assert_cmpuint(mp.ioapic_id, ==, ncpus);
    g_assert_cmphex(mp.ioapic_addr, ==, 0xfec00000);
    /* Every ISA IRQ but the cascade (2) is wired; IRQ 0 on pin 2 as on PCs. */
    g_assert_cmpint(mp.isa_irq_pin[0], ==, 2);
    g_assert_cmpint(mp.isa_irq_pin[2], ==, -1);
    for (int irq = 1; irq < 16; irq++)
        if (irq != 2)
            g_assert_cmpint(mp.isa_irq_pin[irq], ==, irq);
    g_assert_cmpint(mp.extint_pin, ==, 0);
    g_assert_cmpint(mp.lint_type[0], ==, 3); /* ExtINT */
    g_assert_cmpint(mp.lint_type[1], ==, 1); /* NMI */
    guest_memory_release(&mem);
}

static void test_refuses_bad_counts(void)
{
    struct guest_memory mem;
    GError *error = NULL;
    g_assert_true(guest_memory_init(&mem, 64ull << 20, &error));
    g_assert_false(mptable_write(&mem, 0, &error));
    g_assert_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM);
    g_clear_error(&error);
    g_assert_false(mptable_write(&mem, 255, &error));
    g_assert_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM);
    g_clear_error(&error);
    guest_memory_release(&mem);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_data_func("/mptable/1-cpu", GUINT_TO_POINTER(1), test_mptable);
    g_test_add_data_func("/mptable/4-cpus", GUINT_TO_POINTER(4), test_mptable);
    g_test_add_data_func("/mptable/64-cpus", GUINT_TO_POINTER(64), test_mptable);
    g_test_add_func("/mptable/bad-counts", test_refuses_bad_counts);
    return g_test_run();
}
