/* SMBIOS 3.0 tables: what the guest reads as its machine's identity (dmidecode,
 * /sys/class/dmi/id, systemd's credentials in type 11, cloud-init's NoCloud
 * seed in the system serial number).
 *
 * The 64-bit entry point sits at BOOT_SMBIOS_ENTRY (0xf0000), where Linux
 * looks for "_SM3_" on machines without EFI; the structure table follows it.
 * Structures, each a formatted area then its strings (NUL-terminated, the set
 * ended by one more NUL; string number 0 means "none"):
 *   type 0   BIOS        vendor, version, release date; "is a virtual machine"
 *   type 1   system      manufacturer, product, version, serial, UUID, SKU, family
 *   type 3   chassis     manufacturer, type "other"
 *   type 4   processor   one socket with every vCPU as a core
 *   type 11  OEM strings when there are any
 *   type 127 end of table
 * Layouts are SMBIOS 3.0's (DSP0134); offsets below are the spec's.
 */
#include <string.h>

#include "boot-internal.h"

#define SMBIOS_AREA_END 0x100000ull
#define SMBIOS_TABLE_ADDR (BOOT_SMBIOS_ENTRY + 0x20)

#define TYPE_BIOS 0
#define TYPE_SYSTEM 1
#define TYPE_CHASSIS 3
#define TYPE_PROCESSOR 4
#define TYPE_OEM_STRINGS 11
#define TYPE_END 127

#define BIOS_CHARACTERISTICS_NOT_SUPPORTED (1ull << 3)
#define BIOS_EXT1_ACPI 0x01
#define BIOS_EXT2_VIRTUAL_MACHINE 0x10
#define WAKEUP_POWER_SWITCH 6
#define CHASSIS_OTHER 0x01
#define STATE_SAFE 0x03
#define SECURITY_NONE 0x03
#define PROCESSOR_CENTRAL 0x03
#define PROCESSOR_FAMILY_OTHER 0x01
#define PROCESSOR_POPULATED_ENABLED 0x41
#define PROCESSOR_UPGRADE_OTHER 0x01
#define PROCESSOR_64BIT (1u << 2)
#define NO_CACHE_HANDLE 0xffff

struct smbios_entry_point {
    char anchor[5]; /* "_SM3_" */
    uint8_t checksum;
    uint8_t length;
    uint8_t major, minor, docrev;
    uint8_t revision;
    uint8_t reserved;
    uint32_t table_max_size;
    uint64_t table_address;
} __attribute__((packed));
G_STATIC_ASSERT(sizeof(struct smbios_entry_point) == 24);

/* One structure being built: the formatted area, then its strings. */
struct structure {
    GByteArray *formatted;
    GPtrArray *strings;
};

static struct structure structure_begin(uint8_t type, uint8_t length, uint16_t handle)
{
    struct structure s = { g_byte_array_sized_new(length), g_ptr_array_new() };
    uint8_t header[4] = { type, length, (uint8_t)handle, (uint8_t)(handle >> 8) };
    g_byte_array_append(s.formatted, header, sizeof header);
    g_byte_array_set_size(s.formatted, length);
    memset(s.formatted->data + sizeof header, 0, length - sizeof header);
    return s;
}

static void put8(struct structure *s, unsigned offset, uint8_t value)
{
    s->formatted->data[offset] = value;
}

static void put16(struct structure *s, unsigned offset, uint16_t value)
{
    memcpy(s->formatted->data + offset, &value, 2);
}

static void put64(struct structure *s, unsigned offset, uint64_t value)
{
    memcpy(s->formatted->data + offset, &value, 8);
}

/* Store string number n (1-based) at offset; NULL or "" stores 0 (none). */
static void put_string(struct structure *s, unsigned offset, const char *text)
{
    if (!text || !*text) {
        put8(s, offset, 0);
        return;
    }
    g_ptr_array_add(s->strings, (gpointer)text);
    put8(s, offset, (uint8_t)s->strings->len);
}

static void structure_end(struct structure *s, GByteArray *table)
{
    g_byte_array_append(table, s->formatted->data, s->formatted->len);
    for (guint i = 0; i < s->strings->len; i++) {
        const char *text = g_ptr_array_index(s->strings, i);
        g_byte_array_append(table, (const uint8_t *)text, (guint)strlen(text) + 1);
    }
    if (s->strings->len == 0) /* an empty string set is two NULs */
        g_byte_array_append(table, (const uint8_t *)"", 1);
    g_byte_array_append(table, (const uint8_t *)"", 1);
    g_byte_array_unref(s->formatted);
    g_ptr_array_unref(s->strings);
}

static const char *or_default(const char *value, const char *fallback)
{
    return value && *value ? value : fallback;
}

static void add_bios(GByteArray *table)
{
    struct structure s = structure_begin(TYPE_BIOS, 0x18, 0x0000);
    put_string(&s, 0x04, SMBIOS_VENDOR);
    put_string(&s, 0x05, VSNAP_VERSION);
    put16(&s, 0x06, 0xe800);                      /* starting segment, meaningless without a BIOS */
    put_string(&s, 0x08, SMBIOS_BIOS_DATE);
    put8(&s, 0x09, 0);                            /* ROM size: 64 KiB */
    put64(&s, 0x0a, BIOS_CHARACTERISTICS_NOT_SUPPORTED);
    put8(&s, 0x12, BIOS_EXT1_ACPI);
    put8(&s, 0x13, BIOS_EXT2_VIRTUAL_MACHINE);
    put8(&s, 0x14, 0);                            /* system BIOS major, minor release */
    put8(&s, 0x15, 1);
    put8(&s, 0x16, 0xff);                         /* no embedded controller firmware */
    put8(&s, 0x17, 0xff);
    structure_end(&s, table);
}

static void add_system(GByteArray *table, const struct boot_smbios *in)
{
    struct structure s = structure_begin(TYPE_SYSTEM, 0x1b, 0x0100);
    put_string(&s, 0x04, or_default(in->manufacturer, SMBIOS_VENDOR));
    put_string(&s, 0x05, or_default(in->product_name, SMBIOS_PRODUCT));
    put_string(&s, 0x06, or_default(in->version, VSNAP_VERSION));
    put_string(&s, 0x07, in->serial_number);
    /* The UUID's first three fields are little-endian (SMBIOS 2.6 and later),
     * so dmidecode and Linux print the same text the config gave. */
    static const unsigned order[16] = { 3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15 };
    for (unsigned i = 0; i < 16; i++)
        put8(&s, 0x08 + i, in->uuid[order[i]]);
    put8(&s, 0x18, WAKEUP_POWER_SWITCH);
    put_string(&s, 0x19, in->sku_number);
    put_string(&s, 0x1a, or_default(in->family, SMBIOS_VENDOR));
    structure_end(&s, table);
}

static void add_chassis(GByteArray *table)
{
    struct structure s = structure_begin(TYPE_CHASSIS, 0x16, 0x0300);
    put_string(&s, 0x04, SMBIOS_VENDOR);
    put8(&s, 0x05, CHASSIS_OTHER);
    put8(&s, 0x09, STATE_SAFE);                   /* boot-up, power supply, thermal */
    put8(&s, 0x0a, STATE_SAFE);
    put8(&s, 0x0b, STATE_SAFE);
    put8(&s, 0x0c, SECURITY_NONE);
    structure_end(&s, table);
}

static void add_processor(GByteArray *table, unsigned ncpus)
{
    struct structure s = structure_begin(TYPE_PROCESSOR, 0x30, 0x0400);
    put_string(&s, 0x04, "CPU 0");
    put8(&s, 0x05, PROCESSOR_CENTRAL);
    put8(&s, 0x06, PROCESSOR_FAMILY_OTHER);
    put8(&s, 0x18, PROCESSOR_POPULATED_ENABLED);
    put8(&s, 0x19, PROCESSOR_UPGRADE_OTHER);
    put16(&s, 0x1a, NO_CACHE_HANDLE);
    put16(&s, 0x1c, NO_CACHE_HANDLE);
    put16(&s, 0x1e, NO_CACHE_HANDLE);
    uint8_t count8 = ncpus < 0xff ? (uint8_t)ncpus : 0xff; /* 0xff: see the 16-bit counts */
    put8(&s, 0x23, count8);                       /* cores, cores enabled, threads */
    put8(&s, 0x24, count8);
    put8(&s, 0x25, count8);
    put16(&s, 0x26, PROCESSOR_64BIT);
    put16(&s, 0x28, PROCESSOR_FAMILY_OTHER);
    put16(&s, 0x2a, (uint16_t)ncpus);
    put16(&s, 0x2c, (uint16_t)ncpus);
    put16(&s, 0x2e, (uint16_t)ncpus);
    structure_end(&s, table);
}

static void add_oem_strings(GByteArray *table, char *const *strings)
{
    unsigned n = 0;
    while (strings && strings[n])
        n++;
    if (n == 0)
        return;
    struct structure s = structure_begin(TYPE_OEM_STRINGS, 0x05, 0x0b00);
    put8(&s, 0x04, (uint8_t)n);
    for (unsigned i = 0; i < n; i++)
        g_ptr_array_add(s.strings, strings[i]);
    structure_end(&s, table);
}

static void add_end(GByteArray *table)
{
    struct structure s = structure_begin(TYPE_END, 0x04, 0x7f00);
    structure_end(&s, table);
}

static bool check_input(const struct boot_smbios *in, GError **error)
{
    unsigned n = 0;
    while (in->oem_strings && in->oem_strings[n])
        n++;
    if (n > 255) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM, "SMBIOS holds at most 255 OEM strings, not %u", n);
        return false;
    }
    if (in->ncpus == 0 || in->ncpus > 0xfffe) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM, "cannot describe %u vCPUs in SMBIOS", in->ncpus);
        return false;
    }
    return true;
}

GByteArray *smbios_build_table(const struct boot_smbios *in, GError **error)
{
    if (!check_input(in, error))
        return NULL;
    GByteArray *table = g_byte_array_new();
    add_bios(table);
    add_system(table, in);
    add_chassis(table);
    add_processor(table, in->ncpus);
    add_oem_strings(table, in->oem_strings);
    add_end(table);
    return table;
}

bool smbios_write(struct guest_memory *mem, const struct boot_smbios *in, GError **error)
{
    GByteArray *table = smbios_build_table(in, error);
    if (!table)
        return false;
    bool ok = false;
    if (SMBIOS_TABLE_ADDR + table->len > SMBIOS_AREA_END) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM,
                    "SMBIOS tables (%u bytes, with the OEM strings and serial number given) do not fit in "
                    "the %llu bytes below 1 MiB", table->len, SMBIOS_AREA_END - SMBIOS_TABLE_ADDR);
    } else {
        struct smbios_entry_point ep = {
            .anchor = { '_', 'S', 'M', '3', '_' },
            .length = sizeof ep, .major = 3, .minor = 0, .docrev = 0, .revision = 1,
            .table_max_size = table->len, .table_address = SMBIOS_TABLE_ADDR,
        };
        ep.checksum = -boot_byte_sum(&ep, sizeof ep);
        ok = boot_copy_to_guest(mem, SMBIOS_TABLE_ADDR, table->data, table->len, "SMBIOS tables", error) &&
             boot_copy_to_guest(mem, BOOT_SMBIOS_ENTRY, &ep, sizeof ep, "SMBIOS entry point", error);
    }
    g_byte_array_unref(table);
    return ok;
}
