/* Intel MultiProcessor Specification 1.4 tables: the MP floating pointer and
 * the configuration table it points to, in the EBDA where Linux looks for
 * them. Linux prefers ACPI's MADT; the MP table is what it uses with acpi=off.
 *
 * Wiring described (the same as the MADT's, see boot.h):
 *   one processor per vCPU, APIC id = vCPU index, vCPU 0 is the BSP;
 *   one ISA bus; one IOAPIC (id = ncpus) at IOAPIC_BASE;
 *   ISA IRQ 0 (PIT) on IOAPIC pin 2, the 8259's ExtINT on pin 0,
 *   ISA IRQs 1 and 3-15 on the pin of the same number;
 *   LINT0 = ExtINT, LINT1 = NMI on every local APIC.
 */
#include <string.h>

#include "boot-internal.h"

#define MP_SPEC_REV 4
#define MP_ENTRY_PROCESSOR 0
#define MP_ENTRY_BUS 1
#define MP_ENTRY_IOAPIC 2
#define MP_ENTRY_IO_INTERRUPT 3
#define MP_ENTRY_LOCAL_INTERRUPT 4
#define MP_INT_TYPE_INT 0
#define MP_INT_TYPE_NMI 1
#define MP_INT_TYPE_EXTINT 3
#define MP_CPU_ENABLED 0x01
#define MP_CPU_BSP 0x02
#define MP_IOAPIC_ENABLED 0x01
#define LAPIC_VERSION 0x14
#define IOAPIC_VERSION 0x11
#define CPU_SIGNATURE 0x600        /* family 6 */
#define CPU_FEATURES 0x201         /* FPU | APIC */
#define ALL_LAPICS 0xff
#define ISA_BUS_ID 0
#define ISA_IRQS 16
#define MAX_APIC_ID 254            /* 0xff is "all"; the IOAPIC takes ncpus */

struct mp_floating_pointer {
    char signature[4];  /* "_MP_" */
    uint32_t config_table;
    uint8_t length;     /* in 16-byte units */
    uint8_t spec_rev;
    uint8_t checksum;
    uint8_t features[5];
} __attribute__((packed));

struct mp_config_header {
    char signature[4];  /* "PCMP" */
    uint16_t length;    /* header and all entries */
    uint8_t spec_rev;
    uint8_t checksum;
    char oem_id[8];
    char product_id[12];
    uint32_t oem_table;
    uint16_t oem_table_size;
    uint16_t entry_count;
    uint32_t lapic_address;
    uint16_t extended_length;
    uint8_t extended_checksum;
    uint8_t reserved;
} __attribute__((packed));

struct mp_processor {
    uint8_t type, lapic_id, lapic_version, flags;
    uint32_t signature, features;
    uint32_t reserved[2];
} __attribute__((packed));

struct mp_bus {
    uint8_t type, bus_id;
    char bus_type[6];
} __attribute__((packed));

struct mp_ioapic {
    uint8_t type, id, version, flags;
    uint32_t address;
} __attribute__((packed));

/* I/O and local interrupt assignment entries share one layout. */
struct mp_interrupt {
    uint8_t type, int_type;
    uint16_t flags; /* 0: polarity and trigger conform to the bus (ISA: high, edge) */
    uint8_t src_bus, src_irq, dst_id, dst_pin;
} __attribute__((packed));

G_STATIC_ASSERT(sizeof(struct mp_floating_pointer) == 16);
G_STATIC_ASSERT(sizeof(struct mp_config_header) == 44);
G_STATIC_ASSERT(sizeof(struct mp_processor) == 20);
G_STATIC_ASSERT(sizeof(struct mp_bus) == 8 && sizeof(struct mp_ioapic) == 8 && sizeof(struct mp_interrupt) == 8);

/* A growing byte buffer for the configuration table's entries. */
struct mp_writer {
    GByteArray *bytes;
    uint16_t count;
};

static void mp_add(struct mp_writer *w, const void *entry, size_t len)
{
    g_byte_array_append(w->bytes, entry, len);
    w->count++;
}

static void add_processors(struct mp_writer *w, unsigned ncpus)
{
    for (unsigned i = 0; i < ncpus; i++) {
        struct mp_processor p = {
            .type = MP_ENTRY_PROCESSOR,
            .lapic_id = i,
            .lapic_version = LAPIC_VERSION,
            .flags = MP_CPU_ENABLED | (i == 0 ? MP_CPU_BSP : 0),
            .signature = CPU_SIGNATURE,
            .features = CPU_FEATURES,
        };
        mp_add(w, &p, sizeof p);
    }
}

static void add_io_interrupts(struct mp_writer *w, uint8_t ioapic_id)
{
    struct mp_interrupt extint = { MP_ENTRY_IO_INTERRUPT, MP_INT_TYPE_EXTINT, 0, ISA_BUS_ID, 0, ioapic_id, 0 };
    mp_add(w, &extint, sizeof extint);
    for (unsigned irq = 0; irq < ISA_IRQS; irq++) {
        if (irq == 2)
            continue; /* the cascade: pin 2 carries IRQ 0 */
        struct mp_interrupt e = {
            .type = MP_ENTRY_IO_INTERRUPT,
            .int_type = MP_INT_TYPE_INT,
            .src_bus = ISA_BUS_ID,
            .src_irq = irq,
            .dst_id = ioapic_id,
            .dst_pin = irq == 0 ? BOOT_PIT_IOAPIC_PIN : irq,
        };
        mp_add(w, &e, sizeof e);
    }
}

static void add_local_interrupts(struct mp_writer *w)
{
    struct mp_interrupt lint0 = { MP_ENTRY_LOCAL_INTERRUPT, MP_INT_TYPE_EXTINT, 0, ISA_BUS_ID, 0, ALL_LAPICS, 0 };
    struct mp_interrupt lint1 = { MP_ENTRY_LOCAL_INTERRUPT, MP_INT_TYPE_NMI, 0, ISA_BUS_ID, 0, ALL_LAPICS, 1 };
    mp_add(w, &lint0, sizeof lint0);
    mp_add(w, &lint1, sizeof lint1);
}

static void build_entries(struct mp_writer *w, unsigned ncpus)
{
    uint8_t ioapic_id = ncpus;
    add_processors(w, ncpus);
    struct mp_bus bus = { .type = MP_ENTRY_BUS, .bus_id = ISA_BUS_ID, .bus_type = { 'I', 'S', 'A', ' ', ' ', ' ' } };
    mp_add(w, &bus, sizeof bus);
    struct mp_ioapic ioapic = { MP_ENTRY_IOAPIC, ioapic_id, IOAPIC_VERSION, MP_IOAPIC_ENABLED, IOAPIC_BASE };
    mp_add(w, &ioapic, sizeof ioapic);
    add_io_interrupts(w, ioapic_id);
    add_local_interrupts(w);
}

/* Floating pointer first, configuration table right after it. */
static GByteArray *build_mptable(unsigned ncpus)
{
    struct mp_writer w = { .bytes = g_byte_array_new(), .count = 0 };
    struct mp_floating_pointer fp = { .signature = "_MP_", .length = 1, .spec_rev = MP_SPEC_REV };
    struct mp_config_header hdr = { .signature = "PCMP", .spec_rev = MP_SPEC_REV, .oem_id = "VSNAP   ",
                                     .product_id = "MICROVM     ", .lapic_address = LAPIC_BASE };
    g_byte_array_append(w.bytes, (const uint8_t *)&fp, sizeof fp);
    g_byte_array_append(w.bytes, (const uint8_t *)&hdr, sizeof hdr);
    build_entries(&w, ncpus);

    struct mp_floating_pointer *fpp = (void *)w.bytes->data;
    struct mp_config_header *hdrp = (void *)(w.bytes->data + sizeof fp);
    fpp->config_table = BOOT_MPTABLE_ADDR + sizeof fp;
    fpp->checksum = -boot_byte_sum(fpp, sizeof *fpp);
    hdrp->length = w.bytes->len - sizeof fp;
    hdrp->entry_count = w.count;
    hdrp->checksum = -boot_byte_sum(hdrp, hdrp->length);
    return w.bytes;
}

bool mptable_write(struct guest_memory *mem, unsigned ncpus, GError **error)
{
    if (ncpus == 0 || ncpus > MAX_APIC_ID) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM,
                    "cannot describe %u vCPUs in the MP table: 1 to %u are possible", ncpus, MAX_APIC_ID);
        return false;
    }
    GByteArray *table = build_mptable(ncpus);
    /* With many vCPUs the table runs past the 1 KiB EBDA into the VGA hole:
     * still RAM here and still e820-reserved up to 1 MiB. */
    bool ok = table->len <= BOOT_ACPI_RSDP - BOOT_MPTABLE_ADDR &&
              boot_copy_to_guest(mem, BOOT_MPTABLE_ADDR, table->data, table->len, "MP table", error);
    if (!ok && error && !*error)
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM, "MP table for %u vCPUs is too big", ncpus);
    g_byte_array_unref(table);
    return ok;
}
