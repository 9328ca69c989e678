/* smbios_write, read back as a guest does: scan 0xf0000-0xfffff for the
 * 64-bit entry point, check it, walk the structure table to its end, check
 * every structure's header, strings and the fields the shim fills in. The
 * layouts are SMBIOS 3.0's (DSP0134), written out here independently; then
 * dmidecode (when installed) decodes the same bytes from a dump file.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "boot/boot.h"
#include "platform/memory.h"

static uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static uint8_t sum(const uint8_t *p, size_t n)
{
    uint8_t s = 0;
    while (n--)
        s += *p++;
    return s;
}

/* One structure as read: where its formatted area is and its strings. */
struct found {
    const uint8_t *s;
    const char *strings[64];
    unsigned nstrings;
};

struct table {
    struct found items[16];
    unsigned n;
    const uint8_t *start;
    uint32_t len;
};

static const char *string_of(const struct found *f, unsigned offset)
{
    unsigned index = f->s[offset];
    if (index == 0)
        return NULL;
    g_assert_cmpuint(index, <=, f->nstrings);
    return f->strings[index - 1];
}

static const struct found *find_type(const struct table *t, uint8_t type)
{
    for (unsigned i = 0; i < t->n; i++)
        if (t->items[i].s[0] == type)
            return &t->items[i];
    return NULL;
}

/* Walk from start: each structure, then its string set ending in a double NUL. */
static void walk(struct table *t, const uint8_t *start, uint32_t max_len)
{
    const uint8_t *p = start, *end = start + max_len;
    t->start = start;
    for (;;) {
        g_assert_cmpuint(t->n, <, G_N_ELEMENTS(t->items));
        g_assert_true(p + 4 <= end);
        struct found *f = &t->items[t->n++];
        f->s = p;
        g_assert_cmpuint(p[1], >=, 4);
        for (unsigned i = 0; i + 1 < t->n; i++)
            g_assert_cmpuint(rd16(t->items[i].s + 2), !=, rd16(p + 2)); /* unique handles */
        const uint8_t *q = p + p[1];
        if (q[0] == 0 && q[1] == 0) {
            q += 2;
        } else {
            while (*q) {
                g_assert_cmpuint(f->nstrings, <, G_N_ELEMENTS(f->strings));
                f->strings[f->nstrings++] = (const char *)q;
                q += strlen((const char *)q) + 1;
                g_assert_true(q < end);
            }
            q++;
        }
        g_assert_true(q <= end);
        p = q;
        if (f->s[0] == 127)
            break;
    }
    t->len = (uint32_t)(p - start);
}

static void read_tables(struct guest_memory *mem, struct table *t, uint64_t *ep_addr)
{
    const uint8_t *area = guest_memory_ptr(mem, 0xf0000, 0x10000);
    const uint8_t *ep = NULL;
    for (unsigned off = 0; off + 24 <= 0x10000 && !ep; off += 16)
        if (memcmp(area + off, "_SM3_", 5) == 0)
            ep = area + off;
    g_assert_nonnull(ep);
    *ep_addr = 0xf0000 + (uint64_t)(ep - area);
    g_assert_cmpuint(ep[6], ==, 0x18);           /* entry point length */
    g_assert_cmpuint(sum(ep, ep[6]), ==, 0);
    g_assert_cmpuint(ep[7], ==, 3);              /* SMBIOS 3.0 */
    g_assert_cmpuint(ep[8], ==, 0);
    g_assert_cmpuint(ep[10], ==, 1);             /* entry point revision */
    uint32_t max = rd32(ep + 12);
    uint64_t addr = rd64(ep + 16);
    g_assert_cmphex(addr, >=, *ep_addr + 24);
    g_assert_cmphex(addr + max, <=, 0x100000);
    walk(t, guest_memory_ptr(mem, addr, max), max);
    g_assert_cmpuint(t->len, ==, max);           /* the table ends exactly where it says */
}

static void check_defaults(void)
{
    struct guest_memory mem;
    GError *error = NULL;
    g_assert_true(guest_memory_init(&mem, 64ull << 20, &error));
    struct boot_smbios in = { .ncpus = 2 };
    g_assert_true(smbios_write(&mem, &in, &error));
    g_assert_no_error(error);
    struct table t = { 0 };
    uint64_t ep;
    read_tables(&mem, &t, &ep);
    g_assert_cmphex(ep, ==, BOOT_SMBIOS_ENTRY);
    const struct found *bios = find_type(&t, 0), *sys = find_type(&t, 1), *chassis = find_type(&t, 3),
                       *cpu = find_type(&t, 4);
    g_assert_nonnull(bios);
    g_assert_nonnull(sys);
    g_assert_nonnull(chassis);
    g_assert_nonnull(cpu);
    g_assert_null(find_type(&t, 11));              /* no OEM strings, no type 11 */
    g_assert_cmpstr(string_of(bios, 4), ==, "vsnap");
    g_assert_true(bios->s[0x13] & 0x10);             /* a virtual machine */
    g_assert_cmpstr(string_of(sys, 4), ==, "vsnap");
    g_assert_cmpstr(string_of(sys, 5), ==, "vsnap microVM");
    g_assert_null(string_of(sys, 7));              /* no serial */
    static const uint8_t zero[16];
    g_assert_cmpmem(sys->s + 8, 16, zero, 16);
    g_assert_cmpuint(cpu->s[1], ==, 0x30);
    g_assert_cmpuint(cpu->s[0x23], ==, 2);           /* cores */
    g_assert_cmpuint(rd16(cpu->s + 0x2a), ==, 2);
    g_assert_cmpuint(t.items[t.n - 1].s[0], ==, 127);
    guest_memory_release(&mem);
}

static const char uuid_text[] = "4dea22b3-1d52-d8f3-2516-782e98ab3fa0";
static const uint8_t uuid[16] = { 0x4d, 0xea, 0x22, 0xb3, 0x1d, 0x52, 0xd8, 0xf3,
                                  0x25, 0x16, 0x78, 0x2e, 0x98, 0xab, 0x3f, 0xa0 };
static char *oem[] = { "io.systemd.credential:vmm.notify_socket=vsock-stream:2:1025", "second string", NULL };

static struct boot_smbios full_input(void)
{
    struct boot_smbios in = {
        .manufacturer = "ACME", .product_name = "Road Runner", .version = "7",
        .serial_number = "ds=nocloud;s=http://192.0.2.1/seed/", .sku_number = "SKU-1", .family = "Birds",
        .oem_strings = oem, .ncpus = 300,
    };
    memcpy(in.uuid, uuid, 16);
    return in;
}

/* A dump dmidecode reads back (--dump-bin's layout: the entry point at 0,
 * pointing at the table at offset 32). */
static char *write_dump(struct guest_memory *mem, uint64_t ep_addr, const struct table *t, const char *dir)
{
    uint8_t header[32] = { 0 };
    memcpy(header, guest_memory_ptr(mem, ep_addr, 24), 24);
    uint64_t at = 32;
    memcpy(header + 16, &at, 8);
    header[5] = 0;
    header[5] = (uint8_t)-sum(header, 24);
    g_autoptr(GByteArray) file = g_byte_array_new();
    g_byte_array_append(file, header, sizeof header);
    g_byte_array_append(file, t->start, t->len);
    char *path = g_build_filename(dir, "smbios.bin", NULL);
    GError *error = NULL;
    g_assert_true(g_file_set_contents(path, (const char *)file->data, file->len, &error));
    return path;
}

static void check_with_dmidecode(struct guest_memory *mem, uint64_t ep_addr, const struct table *t)
{
    if (!g_file_test("/usr/sbin/dmidecode", G_FILE_TEST_IS_EXECUTABLE)) {
        g_test_message("no dmidecode: the independent decoder part is left out");
        return;
    }
    g_autofree char *dir = g_dir_make_tmp("vsnap-smbios-XXXXXX", NULL);
    g_autofree char *dump = write_dump(mem, ep_addr, t, dir);
    const char *argv[] = { "/usr/sbin/dmidecode", "--from-dump", dump, NULL };
    g_autofree char *out = NULL, *err = NULL;
    int status = 0;
    GError *error = NULL;
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error));
    g_assert_no_error(error);
    g_test_message("dmidecode:\n%s", out);
    g_assert_cmpint(status, ==, 0);
    const char *expected[] = {
        "SMBIOS 3.0.0 present.", "Vendor: vsnap", "Manufacturer: ACME", "Product Name: Road Runner",
        "Version: 7", "Serial Number: ds=nocloud;s=http://192.0.2.1/seed/", "UUID: 4dea22b3-1d52-d8f3-2516-782e98ab3fa0",
        "SKU Number: SKU-1", "Family: Birds", "String 1: io.systemd.credential:vmm.notify_socket=vsock-stream:2:1025",
        "String 2: second string", "Core Count: 300", "System is a virtual machine", "End Of Table",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(expected); i++)
        if (!strstr(out, expected[i]))
            g_error("dmidecode's output lacks '%s':\n%s\n%s", expected[i], out, err);
    g_unlink(dump);
    g_rmdir(dir);
}

static void check_full(void)
{
    struct guest_memory mem;
    GError *error = NULL;
    g_assert_true(guest_memory_init(&mem, 64ull << 20, &error));
    struct boot_smbios in = full_input();
    g_assert_true(smbios_write(&mem, &in, &error));
    g_assert_no_error(error);
    struct table t = { 0 };
    uint64_t ep;
    read_tables(&mem, &t, &ep);
    const struct found *sys = find_type(&t, 1), *oems = find_type(&t, 11), *cpu = find_type(&t, 4);
    g_assert_cmpuint(sys->s[1], ==, 0x1b);
    g_assert_cmpstr(string_of(sys, 4), ==, "ACME");
    g_assert_cmpstr(string_of(sys, 5), ==, "Road Runner");
    g_assert_cmpstr(string_of(sys, 6), ==, "7");
    g_assert_cmpstr(string_of(sys, 7), ==, "ds=nocloud;s=http://192.0.2.1/seed/");
    g_assert_cmpstr(string_of(sys, 0x19), ==, "SKU-1");
    g_assert_cmpstr(string_of(sys, 0x1a), ==, "Birds");
    /* SMBIOS 2.6+: time_low, time_mid and time_hi little-endian, the rest as written. */
    static const uint8_t wire[16] = { 0xb3, 0x22, 0xea, 0x4d, 0x52, 0x1d, 0xf3, 0xd8,
                                      0x25, 0x16, 0x78, 0x2e, 0x98, 0xab, 0x3f, 0xa0 };
    g_assert_cmpmem(sys->s + 8, 16, wire, 16);
    g_assert_nonnull(oems);
    g_assert_cmpuint(oems->s[1], ==, 5);
    g_assert_cmpuint(oems->s[4], ==, 2);
    g_assert_cmpuint(oems->nstrings, ==, 2);
    g_assert_cmpstr(oems->strings[0], ==, oem[0]);
    g_assert_cmpstr(oems->strings[1], ==, oem[1]);
    g_assert_cmpuint(cpu->s[0x23], ==, 0xff);        /* more than 254 cores: see the 16-bit count */
    g_assert_cmpuint(rd16(cpu->s + 0x2a), ==, 300);
    g_test_message("uuid %s checked in SMBIOS byte order", uuid_text);
    check_with_dmidecode(&mem, ep, &t);
    guest_memory_release(&mem);
}

static void check_too_big(void)
{
    struct guest_memory mem;
    GError *error = NULL;
    g_assert_true(guest_memory_init(&mem, 64ull << 20, &error));
    g_autofree char *big = g_strnfill(70000, 'x');
    char *strings[] = { big, NULL };
    struct boot_smbios in = { .oem_strings = strings, .ncpus = 1 };
    g_assert_false(smbios_write(&mem, &in, &error));
    g_assert_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM);
    g_clear_error(&error);
    guest_memory_release(&mem);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/smbios/defaults", check_defaults);
    g_test_add_func("/smbios/platform", check_full);
    g_test_add_func("/smbios/too-big", check_too_big);
    return g_test_run();
}
