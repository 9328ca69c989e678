/* ACPI tables (ACPI 6.x layouts): RSDP -> XSDT -> { FADT -> (FACS, DSDT), MADT }.
 *
 * The RSDP sits at BOOT_ACPI_RSDP, inside 0xe0000-0xfffff where Linux scans for
 * it (it is also passed as boot_params.acpi_rsdp_addr). The other tables follow
 * from BOOT_ACPI_TABLES. That whole area is e820-reserved (see e820.c).
 *
 * Not hardware-reduced: the FADT declares the PM1a event/control blocks, the
 * PM timer and the reset register at the ports in boot.h, which
 * devices/legacy/acpi-pm.c serves; SCI on IRQ ACPI_SCI_IRQ.
 */
#include <string.h>

#include "boot-internal.h"

#define ACPI_TABLES_END BOOT_ACPI_TABLES_END
#define OEM_ID "VSNAP "
#define OEM_TABLE_ID "MICROVM "
#define CREATOR_ID "VSNP"

#define GAS_SYSTEM_IO 1
#define GAS_ACCESS_BYTE 1
#define GAS_ACCESS_WORD 2
#define GAS_ACCESS_DWORD 3

#define FADT_REVISION 6
#define FADT_WBINVD (1u << 0)
#define FADT_PROC_C1 (1u << 2)
#define FADT_SLP_BUTTON (1u << 5)     /* no fixed-feature sleep button */
#define FADT_RESET_REG_SUP (1u << 10)
#define BOOT_ARCH_8042 (1u << 1)
#define BOOT_ARCH_NO_VGA (1u << 2)

#define MADT_PCAT_COMPAT 1u
#define MADT_LOCAL_APIC 0
#define MADT_IOAPIC 1
#define MADT_INT_OVERRIDE 2
#define MADT_LOCAL_APIC_NMI 4
#define MADT_CPU_ENABLED 1u
#define MPS_INTI_ACTIVE_HIGH 0x1
#define MPS_INTI_LEVEL 0xc
#define ALL_PROCESSORS 0xff
#define LINT1 1
#define MPS_INTI_CONFORMING 0

struct acpi_header {
    char signature[4];
    uint32_t length;
    uint8_t revision;
    uint8_t checksum;
    char oem_id[6];
    char oem_table_id[8];
    uint32_t oem_revision;
    char creator_id[4];
    uint32_t creator_revision;
} __attribute__((packed));

struct acpi_rsdp {
    char signature[8]; /* "RSD PTR " */
    uint8_t checksum;  /* first 20 bytes */
    char oem_id[6];
    uint8_t revision;  /* 2: has the XSDT fields */
    uint32_t rsdt_address;
    uint32_t length;
    uint64_t xsdt_address;
    uint8_t extended_checksum; /* all 36 bytes */
    uint8_t reserved[3];
} __attribute__((packed));

struct acpi_gas {
    uint8_t space_id, bit_width, bit_offset, access_size;
    uint64_t address;
} __attribute__((packed));

struct acpi_fadt {
    struct acpi_header header;
    uint32_t firmware_ctrl, dsdt;
    uint8_t reserved0, preferred_pm_profile;
    uint16_t sci_int;
    uint32_t smi_cmd;
    uint8_t acpi_enable, acpi_disable, s4bios_req, pstate_cnt;
    uint32_t pm1a_evt_blk, pm1b_evt_blk, pm1a_cnt_blk, pm1b_cnt_blk, pm2_cnt_blk, pm_tmr_blk;
    uint32_t gpe0_blk, gpe1_blk;
    uint8_t pm1_evt_len, pm1_cnt_len, pm2_cnt_len, pm_tmr_len, gpe0_blk_len, gpe1_blk_len, gpe1_base, cst_cnt;
    uint16_t p_lvl2_lat, p_lvl3_lat, flush_size, flush_stride;
    uint8_t duty_offset, duty_width, day_alrm, mon_alrm, century;
    uint16_t iapc_boot_arch;
    uint8_t reserved1;
    uint32_t flags;
    struct acpi_gas reset_reg;
    uint8_t reset_value;
    uint16_t arm_boot_arch;
    uint8_t minor_version;
    uint64_t x_firmware_ctrl, x_dsdt;
    struct acpi_gas x_pm1a_evt_blk, x_pm1b_evt_blk, x_pm1a_cnt_blk, x_pm1b_cnt_blk, x_pm2_cnt_blk,
        x_pm_tmr_blk, x_gpe0_blk, x_gpe1_blk, sleep_control_reg, sleep_status_reg;
    uint64_t hypervisor_vendor_id;
} __attribute__((packed));

struct acpi_facs {
    char signature[4];
    uint32_t length;
    uint32_t hardware_signature, firmware_waking_vector, global_lock, flags;
    uint64_t x_firmware_waking_vector;
    uint8_t version;
    uint8_t reserved[3];
    uint32_t ospm_flags;
    uint8_t reserved2[24];
} __attribute__((packed));

struct madt_local_apic {
    uint8_t type, length, processor_uid, apic_id;
    uint32_t flags;
} __attribute__((packed));

struct madt_ioapic {
    uint8_t type, length, id, reserved;
    uint32_t address, gsi_base;
} __attribute__((packed));

struct madt_int_override {
    uint8_t type, length, bus, source;
    uint32_t gsi;
    uint16_t flags;
} __attribute__((packed));

struct madt_local_apic_nmi {
    uint8_t type, length, processor_uid;
    uint16_t flags;
    uint8_t lint;
} __attribute__((packed));

G_STATIC_ASSERT(sizeof(struct acpi_header) == 36);
G_STATIC_ASSERT(sizeof(struct acpi_rsdp) == 36);
G_STATIC_ASSERT(sizeof(struct acpi_fadt) == 276);
G_STATIC_ASSERT(sizeof(struct acpi_facs) == 64);
G_STATIC_ASSERT(sizeof(struct madt_local_apic) == 8 && sizeof(struct madt_ioapic) == 12);
G_STATIC_ASSERT(sizeof(struct madt_int_override) == 10 && sizeof(struct madt_local_apic_nmi) == 6);

/* The table area being filled: bytes for guest-physical BOOT_ACPI_TABLES onwards. */
struct acpi_area {
    GByteArray *bytes;
};

/* Append a table aligned to align; returns its guest-physical address. */
static uint64_t area_add(struct acpi_area *area, const void *data, size_t len, size_t align)
{
    static const uint8_t zeros[64];
    while (area->bytes->len % align)
        g_byte_array_append(area->bytes, zeros, MIN(sizeof zeros, align - area->bytes->len % align));
    uint64_t gpa = BOOT_ACPI_TABLES + area->bytes->len;
    g_byte_array_append(area->bytes, data, len);
    return gpa;
}

static void header_init(struct acpi_header *h, const char signature[4], uint32_t length, uint8_t revision)
{
    memset(h, 0, sizeof *h);
    memcpy(h->signature, signature, 4);
    h->length = length;
    h->revision = revision;
    memcpy(h->oem_id, OEM_ID, 6);
    memcpy(h->oem_table_id, OEM_TABLE_ID, 8);
    h->oem_revision = 1;
    memcpy(h->creator_id, CREATOR_ID, 4);
    h->creator_revision = 1;
}

/* Set the checksum of a finished table (header->length bytes). */
static void table_checksum(void *table)
{
    struct acpi_header *h = table;
    h->checksum = 0;
    h->checksum = -boot_byte_sum(table, h->length);
}

static uint64_t add_facs(struct acpi_area *area)
{
    struct acpi_facs facs = { .signature = "FACS", .length = sizeof facs, .version = 2 };
    return area_add(area, &facs, sizeof facs, 64); /* the FACS must be 64-byte aligned */
}

static uint64_t add_dsdt(struct acpi_area *area)
{
    GByteArray *aml = acpi_dsdt_aml();
    size_t len = sizeof(struct acpi_header) + aml->len;
    uint8_t *table = g_malloc0(len);
    header_init((struct acpi_header *)table, "DSDT", len, 2);
    memcpy(table + sizeof(struct acpi_header), aml->data, aml->len);
    table_checksum(table);
    uint64_t gpa = area_add(area, table, len, 8);
    g_free(table);
    g_byte_array_unref(aml);
    return gpa;
}

static struct acpi_gas io_register(uint16_t port, unsigned bytes, uint8_t access_size)
{
    return (struct acpi_gas){ .space_id = GAS_SYSTEM_IO, .bit_width = bytes * 8,
                              .access_size = access_size, .address = port };
}

static void fadt_fixed_hardware(struct acpi_fadt *f)
{
    f->sci_int = ACPI_SCI_IRQ;
    f->smi_cmd = 0; /* no SMI command port: the machine is always in ACPI mode */
    f->pm1a_evt_blk = ACPI_PM1A_EVT_PORT;
    f->pm1a_cnt_blk = ACPI_PM1A_CNT_PORT;
    f->pm_tmr_blk = ACPI_PM_TMR_PORT;
    f->pm1_evt_len = 4;
    f->pm1_cnt_len = 2;
    f->pm_tmr_len = 4;
    f->x_pm1a_evt_blk = io_register(ACPI_PM1A_EVT_PORT, 4, GAS_ACCESS_WORD);
    f->x_pm1a_cnt_blk = io_register(ACPI_PM1A_CNT_PORT, 2, GAS_ACCESS_WORD);
    f->x_pm_tmr_blk = io_register(ACPI_PM_TMR_PORT, 4, GAS_ACCESS_DWORD);
    f->gpe0_blk = ACPI_GPE0_PORT;
    f->gpe0_blk_len = ACPI_GPE0_LEN;
    f->x_gpe0_blk = io_register(ACPI_GPE0_PORT, ACPI_GPE0_LEN, GAS_ACCESS_BYTE);
    f->reset_reg = io_register(ACPI_RESET_PORT, 1, GAS_ACCESS_BYTE);
    f->reset_value = ACPI_RESET_VALUE;
}

static uint64_t add_fadt(struct acpi_area *area, uint64_t facs, uint64_t dsdt)
{
    struct acpi_fadt f;
    memset(&f, 0, sizeof f);
    header_init(&f.header, "FACP", sizeof f, FADT_REVISION);
    f.firmware_ctrl = facs; /* the spec wants X_FIRMWARE_CTRL zero when this is set */
    f.dsdt = dsdt;
    f.x_dsdt = dsdt;
    fadt_fixed_hardware(&f);
    f.flags = FADT_WBINVD | FADT_PROC_C1 | FADT_SLP_BUTTON | FADT_RESET_REG_SUP;
    f.iapc_boot_arch = BOOT_ARCH_8042 | BOOT_ARCH_NO_VGA;
    f.minor_version = 0;
    table_checksum(&f);
    return area_add(area, &f, sizeof f, 8);
}

static void madt_add_entries(GByteArray *t, unsigned ncpus)
{
    for (unsigned i = 0; i < ncpus; i++) {
        struct madt_local_apic lapic = { MADT_LOCAL_APIC, sizeof lapic, i, i, MADT_CPU_ENABLED };
        g_byte_array_append(t, (const uint8_t *)&lapic, sizeof lapic);
    }
    struct madt_ioapic ioapic = { MADT_IOAPIC, sizeof ioapic, ncpus, 0, IOAPIC_BASE, 0 };
    g_byte_array_append(t, (const uint8_t *)&ioapic, sizeof ioapic);
    struct madt_int_override overrides[] = {
        { MADT_INT_OVERRIDE, sizeof overrides[0], 0, 0, BOOT_PIT_IOAPIC_PIN, MPS_INTI_CONFORMING },
        { MADT_INT_OVERRIDE, sizeof overrides[0], 0, ACPI_SCI_IRQ, ACPI_SCI_IRQ,
          MPS_INTI_ACTIVE_HIGH | MPS_INTI_LEVEL },
    };
    g_byte_array_append(t, (const uint8_t *)overrides, sizeof overrides);
    struct madt_local_apic_nmi nmi = { MADT_LOCAL_APIC_NMI, sizeof nmi, ALL_PROCESSORS, MPS_INTI_CONFORMING, LINT1 };
    g_byte_array_append(t, (const uint8_t *)&nmi, sizeof nmi);
}

static uint64_t add_madt(struct acpi_area *area, unsigned ncpus)
{
    GByteArray *t = g_byte_array_new();
    struct acpi_header h = { 0 };
    uint32_t lapic_and_flags[2] = { LAPIC_BASE, MADT_PCAT_COMPAT };
    g_byte_array_append(t, (const uint8_t *)&h, sizeof h);
    g_byte_array_append(t, (const uint8_t *)lapic_and_flags, sizeof lapic_and_flags);
    madt_add_entries(t, ncpus);
    header_init((struct acpi_header *)t->data, "APIC", t->len, 5);
    table_checksum(t->data);
    uint64_t gpa = area_add(area, t->data, t->len, 8);
    g_byte_array_unref(t);
    return gpa;
}

static uint64_t add_xsdt(struct acpi_area *area, const uint64_t *entries, unsigned n)
{
    size_t len = sizeof(struct acpi_header) + n * sizeof(uint64_t);
    uint8_t *table = g_malloc0(len);
    header_init((struct acpi_header *)table, "XSDT", len, 1);
    memcpy(table + sizeof(struct acpi_header), entries, n * sizeof(uint64_t));
    table_checksum(table);
    uint64_t gpa = area_add(area, table, len, 8);
    g_free(table);
    return gpa;
}

static struct acpi_rsdp make_rsdp(uint64_t xsdt)
{
    struct acpi_rsdp r;
    memset(&r, 0, sizeof r);
    memcpy(r.signature, "RSD PTR ", 8);
    memcpy(r.oem_id, OEM_ID, 6);
    r.revision = 2;
    r.length = sizeof r;
    r.xsdt_address = xsdt;
    r.checksum = -boot_byte_sum(&r, 20);
    r.extended_checksum = -boot_byte_sum(&r, sizeof r);
    return r;
}

bool acpi_write_tables(struct guest_memory *mem, unsigned ncpus, GError **error)
{
    if (ncpus == 0 || ncpus > 254) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM,
                    "cannot describe %u vCPUs in the MADT: 1 to 254 are possible", ncpus);
        return false;
    }
    struct acpi_area area = { g_byte_array_new() };
    uint64_t facs = add_facs(&area);
    uint64_t dsdt = add_dsdt(&area);
    uint64_t sdt[2] = { add_fadt(&area, facs, dsdt), add_madt(&area, ncpus) };
    uint64_t xsdt = add_xsdt(&area, sdt, G_N_ELEMENTS(sdt));
    struct acpi_rsdp rsdp = make_rsdp(xsdt);

    bool ok = true;
    if (BOOT_ACPI_TABLES + area.bytes->len > ACPI_TABLES_END) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM,
                    "ACPI tables for %u vCPUs (%u bytes) do not fit below 0x%llx", ncpus, area.bytes->len,
                    ACPI_TABLES_END);
        ok = false;
    }
    ok = ok && boot_copy_to_guest(mem, BOOT_ACPI_TABLES, area.bytes->data, area.bytes->len, "ACPI tables", error) &&
         boot_copy_to_guest(mem, BOOT_ACPI_RSDP, &rsdp, sizeof rsdp, "ACPI RSDP", error);
    g_byte_array_unref(area.bytes);
    return ok;
}
