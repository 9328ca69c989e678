/* boot_load_linux on kernels this test builds in memory (bzImage and ELF
 * vmlinux) and on bad inputs: where the kernel lands, the entry point, every
 * zero-page field the shim fills, e820 for small and big guests, initramfs
 * placement and the errors. The zero page is read back by raw offsets from
 * the boot protocol document, not through the shim's structs.
 */
#include <elf.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "boot/boot.h"
#include "platform/memory.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* Zero-page offsets (Documentation/arch/x86/boot.rst, zero-page.rst). */
#define ZP_ACPI_RSDP 0x070
#define ZP_EXT_RAMDISK_IMAGE 0x0c0
#define ZP_EXT_RAMDISK_SIZE 0x0c4
#define ZP_EXT_CMD_LINE_PTR 0x0c8
#define ZP_E820_ENTRIES 0x1e8
#define ZP_SETUP_SECTS 0x1f1
#define ZP_BOOT_FLAG 0x1fe
#define ZP_HEADER 0x202
#define ZP_VERSION 0x206
#define ZP_TYPE_OF_LOADER 0x210
#define ZP_LOADFLAGS 0x211
#define ZP_CODE32_START 0x214
#define ZP_RAMDISK_IMAGE 0x218
#define ZP_RAMDISK_SIZE 0x21c
#define ZP_HEAP_END_PTR 0x224
#define ZP_CMD_LINE_PTR 0x228
#define ZP_INITRD_ADDR_MAX 0x22c
#define ZP_KERNEL_ALIGNMENT 0x230
#define ZP_RELOCATABLE 0x234
#define ZP_XLOADFLAGS 0x236
#define ZP_CMDLINE_SIZE 0x238
#define ZP_PREF_ADDRESS 0x258
#define ZP_INIT_SIZE 0x260
#define ZP_E820_TABLE 0x2d0

struct fixture {
    char *dir;
    struct guest_memory mem;
};

static void fixture_setup(struct fixture *f, uint64_t ram)
{
    GError *error = NULL;
    f->dir = g_dir_make_tmp("test-bootparams-XXXXXX", &error);
    g_assert_no_error(error);
    g_assert_true(guest_memory_init(&f->mem, ram, &error));
    g_assert_no_error(error);
}

static void fixture_teardown(struct fixture *f)
{
    guest_memory_release(&f->mem);
    GDir *d = g_dir_open(f->dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *p = g_build_filename(f->dir, name, NULL);
        g_unlink(p);
    }
    if (d)
        g_dir_close(d);
    g_rmdir(f->dir);
    g_free(f->dir);
}

static char *write_file(struct fixture *f, const char *name, const void *data, size_t len)
{
    char *path = g_build_filename(f->dir, name, NULL);
    GError *error = NULL;
    g_assert_true(g_file_set_contents(path, data, len, &error));
    g_assert_no_error(error);
    return path;
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint8_t get8(const uint8_t *p) { return *p; }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* ---- a synthetic bzImage ---- */

struct bz_spec {
    uint16_t version;
    uint8_t setup_sects;     /* as stored: 0 means 4 */
    uint8_t relocatable;
    uint64_t pref_address;
    uint32_t init_size;
    uint32_t cmdline_size;
    uint32_t initrd_addr_max;
    uint16_t xloadflags;
    uint8_t loadflags;
    uint16_t boot_flag;
    size_t pm_size;          /* protected-mode code bytes */
    uint32_t syssize_extra;  /* declare this many more 16-byte units than present */
};

static struct bz_spec bz_default(void)
{
    return (struct bz_spec){
        .version = 0x020f, .setup_sects = 0, .relocatable = 1, .pref_address = 0x1000000,
        .init_size = 0x800000, .cmdline_size = 2047, .initrd_addr_max = 0x7fffffff,
        .xloadflags = 0x1 /* XLF_KERNEL_64 */, .loadflags = 0x1 /* LOADED_HIGH */,
        .boot_flag = 0xaa55, .pm_size = 64 * 1024,
    };
}

static uint8_t pm_byte(size_t i) { return (uint8_t)(i * 7 + 3); }

static GByteArray *bz_build(const struct bz_spec *s)
{
    size_t sects = s->setup_sects ? s->setup_sects : 4;
    size_t pm_off = (sects + 1) * 512;
    GByteArray *b = g_byte_array_new();
    g_byte_array_set_size(b, pm_off + s->pm_size);
    uint8_t *d = b->data;
    memset(d, 0, pm_off);
    d[ZP_SETUP_SECTS] = s->setup_sects;
    put32(d + 0x1f4, (s->pm_size + 15) / 16 + s->syssize_extra);
    put16(d + 0x1fa, 0xffff); /* vid_mode */
    put16(d + ZP_BOOT_FLAG, s->boot_flag);
    d[0x200] = 0xeb;
    d[0x201] = 0x6a; /* header ends at 0x26c */
    memcpy(d + ZP_HEADER, "HdrS", 4);
    put16(d + ZP_VERSION, s->version);
    d[ZP_LOADFLAGS] = s->loadflags;
    put32(d + ZP_CODE32_START, 0x100000);
    put32(d + ZP_INITRD_ADDR_MAX, s->initrd_addr_max);
    put32(d + ZP_KERNEL_ALIGNMENT, 0x200000);
    d[ZP_RELOCATABLE] = s->relocatable;
    put16(d + ZP_XLOADFLAGS, s->xloadflags);
    put32(d + ZP_CMDLINE_SIZE, s->cmdline_size);
    put64(d + ZP_PREF_ADDRESS, s->pref_address);
    put32(d + ZP_INIT_SIZE, s->init_size);
    for (size_t i = 0; i < s->pm_size; i++)
        d[pm_off + i] = pm_byte(i);
    return b;
}

static char *bz_file(struct fixture *f, const struct bz_spec *s)
{
    GByteArray *b = bz_build(s);
    char *path = write_file(f, "bzImage", b->data, b->len);
    g_byte_array_unref(b);
    return path;
}

static bool boot(struct fixture *f, const char *kernel, const char *initramfs, const char *cmdline,
                 struct boot_entry *out, GError **error)
{
    struct boot_input in = { .kernel_path = kernel, .initramfs_path = initramfs, .cmdline = cmdline, .ncpus = 2 };
    return boot_load_linux(&f->mem, &in, out, error);
}

static const uint8_t *zero_page(struct fixture *f)
{
    const uint8_t *zp = guest_memory_ptr(&f->mem, 0x7000, 4096);
    g_assert_nonnull(zp);
    return zp;
}

static void assert_pm_code_at(struct fixture *f, uint64_t gpa, size_t len)
{
    const uint8_t *p = guest_memory_ptr(&f->mem, gpa, len);
    g_assert_nonnull(p);
    for (size_t i = 0; i < len; i++)
        if (p[i] != pm_byte(i))
            g_error("protected-mode byte %zu at 0x%" G_GINT64_MODIFIER "x is %u, expected %u", i, gpa + i,
                    p[i], pm_byte(i));
}

static void test_bzimage_fields(void)
{
    struct fixture f;
    fixture_setup(&f, 512 * MiB);
    struct bz_spec s = bz_default();
    g_autofree char *kernel = bz_file(&f, &s);
    uint8_t initrd[10000];
    for (size_t i = 0; i < sizeof initrd; i++)
        initrd[i] = i ^ 0x5a;
    g_autofree char *initramfs = write_file(&f, "initrd", initrd, sizeof initrd);
    const char *cmdline = "console=ttyS0 root=/dev/vda quiet";
    struct boot_entry e;
    GError *error = NULL;
    g_assert_true(boot(&f, kernel, initramfs, cmdline, &e, &error));
    g_assert_no_error(error);

    /* Relocatable, fits at pref_address: loaded there, entry at +0x200. */
    g_assert_cmpint(e.format, ==, KERNEL_FORMAT_BZIMAGE);
    g_assert_cmphex(e.entry, ==, 0x1000000 + 0x200);
    g_assert_cmphex(e.boot_params, ==, 0x7000);
    g_assert_cmphex(e.stack, ==, BOOT_STACK_TOP);
    assert_pm_code_at(&f, 0x1000000, s.pm_size);

    const uint8_t *zp = zero_page(&f);
    g_assert_cmphex(get8(zp + ZP_SETUP_SECTS), ==, 0);        /* copied as stored */
    g_assert_cmphex(get16(zp + ZP_BOOT_FLAG), ==, 0xaa55);
    g_assert_cmpmem(zp + ZP_HEADER, 4, "HdrS", 4);
    g_assert_cmphex(get16(zp + ZP_VERSION), ==, 0x020f);
    g_assert_cmphex(get8(zp + ZP_TYPE_OF_LOADER), ==, 0xff);
    g_assert_cmphex(get8(zp + ZP_LOADFLAGS), ==, 0x01 | 0x80); /* LOADED_HIGH | CAN_USE_HEAP */
    g_assert_cmphex(get16(zp + ZP_HEAP_END_PTR), ==, 0xfe00);
    g_assert_cmphex(get32(zp + ZP_CMD_LINE_PTR), ==, BOOT_CMDLINE_ADDR);
    g_assert_cmphex(get32(zp + ZP_EXT_CMD_LINE_PTR), ==, 0);
    g_assert_cmpstr(guest_memory_ptr(&f.mem, get32(zp + ZP_CMD_LINE_PTR), strlen(cmdline) + 1), ==, cmdline);
    g_assert_cmphex(get32(zp + ZP_CMDLINE_SIZE), ==, 2047);
    g_assert_cmphex(get64(zp + ZP_PREF_ADDRESS), ==, 0x1000000);
    g_assert_cmphex(get32(zp + ZP_INIT_SIZE), ==, 0x800000);
    g_assert_cmphex(get32(zp + ZP_INITRD_ADDR_MAX), ==, 0x7fffffff);
    g_assert_cmphex(get64(zp + ZP_ACPI_RSDP), ==, BOOT_ACPI_RSDP);

    /* Initramfs: page-aligned, at the top of the 512 MiB of RAM, intact. */
    uint64_t rd = get32(zp + ZP_RAMDISK_IMAGE) | (uint64_t)get32(zp + ZP_EXT_RAMDISK_IMAGE) << 32;
    uint64_t rd_size = get32(zp + ZP_RAMDISK_SIZE) | (uint64_t)get32(zp + ZP_EXT_RAMDISK_SIZE) << 32;
    g_assert_cmphex(rd_size, ==, sizeof initrd);
    g_assert_cmphex(rd % 4096, ==, 0);
    g_assert_cmphex(rd + rd_size, <=, 512 * MiB);
    g_assert_cmphex(rd + rd_size, >, 512 * MiB - 4096);
    g_assert_cmphex(rd, ==, e.initramfs_addr);
    g_assert_cmphex(rd_size, ==, e.initramfs_size);
    g_assert_cmpmem(guest_memory_ptr(&f.mem, rd, rd_size), rd_size, initrd, sizeof initrd);
    fixture_teardown(&f);
}

static void test_bzimage_load_address(void)
{
    struct fixture f;
    fixture_setup(&f, 64 * MiB);
    struct boot_entry e;
    GError *error = NULL;

    /* Not relocatable: 1 MiB, whatever pref_address says. */
    struct bz_spec s = bz_default();
    s.relocatable = 0;
    s.setup_sects = 7; /* code starts at 8 * 512 */
    g_autofree char *k1 = bz_file(&f, &s);
    g_assert_true(boot(&f, k1, NULL, "", &e, &error));
    g_assert_no_error(error);
    g_assert_cmphex(e.entry, ==, 0x100000 + 0x200);
    assert_pm_code_at(&f, 0x100000, s.pm_size);
    g_assert_cmphex(get32(zero_page(&f) + ZP_CODE32_START), ==, 0x100000);

    /* Relocatable but init_size does not fit above pref_address in 64 MiB:
     * 1 MiB instead. */
    s = bz_default();
    s.init_size = 56 * MiB;
    g_autofree char *k2 = bz_file(&f, &s);
    g_assert_true(boot(&f, k2, NULL, NULL, &e, &error));
    g_assert_no_error(error);
    g_assert_cmphex(e.entry, ==, 0x100200);
    fixture_teardown(&f);
}

static void test_initramfs_below_initrd_addr_max(void)
{
    struct fixture f;
    fixture_setup(&f, 512 * MiB);
    struct bz_spec s = bz_default();
    s.initrd_addr_max = 0x0fffffff; /* 256 MiB - 1 */
    g_autofree char *kernel = bz_file(&f, &s);
    uint8_t initrd[5000] = { 1, 2, 3 };
    g_autofree char *initramfs = write_file(&f, "initrd", initrd, sizeof initrd);
    struct boot_entry e;
    GError *error = NULL;
    g_assert_true(boot(&f, kernel, initramfs, "", &e, &error));
    g_assert_no_error(error);
    g_assert_cmphex(e.initramfs_addr + e.initramfs_size, <=, 0x10000000);
    g_assert_cmphex(e.initramfs_addr, ==, (0x10000000 - sizeof initrd) & ~0xfffull);
    fixture_teardown(&f);
}

/* The e820 table as (addr, size, type) triples. */
static void assert_e820(struct fixture *f, const uint64_t (*expect)[3], unsigned n)
{
    const uint8_t *zp = zero_page(f);
    g_assert_cmpuint(get8(zp + ZP_E820_ENTRIES), ==, n);
    for (unsigned i = 0; i < n; i++) {
        const uint8_t *e = zp + ZP_E820_TABLE + 20 * i;
        g_assert_cmphex(get64(e), ==, expect[i][0]);
        g_assert_cmphex(get64(e + 8), ==, expect[i][1]);
        g_assert_cmphex(get32(e + 16), ==, expect[i][2]);
    }
}

static void test_e820(gconstpointer data)
{
    uint64_t ram = *(const uint64_t *)data;
    struct fixture f;
    fixture_setup(&f, ram);
    struct bz_spec s = bz_default();
    g_autofree char *kernel = bz_file(&f, &s);
    struct boot_entry e;
    GError *error = NULL;
    g_assert_true(boot(&f, kernel, NULL, "", &e, &error));
    g_assert_no_error(error);
    if (ram <= 3 * GiB) {
        const uint64_t expect[][3] = { { 0, 0x9fc00, 1 }, { 0x9fc00, 0x60400, 2 }, { 0x100000, ram - 0x100000, 1 } };
        assert_e820(&f, expect, G_N_ELEMENTS(expect));
    } else {
        const uint64_t expect[][3] = {
            { 0, 0x9fc00, 1 }, { 0x9fc00, 0x60400, 2 }, { 0x100000, 3 * GiB - 0x100000, 1 },
            { 4 * GiB, ram - 3 * GiB, 1 },
        };
        assert_e820(&f, expect, G_N_ELEMENTS(expect));
    }
    fixture_teardown(&f);
}

/* ---- a synthetic ELF vmlinux ---- */

static GByteArray *elf_build(uint16_t machine, uint64_t entry)
{
    /* Two segments like Linux's: text at 16 MiB, data+bss at 18 MiB; the
     * virtual addresses are the kernel map's. */
    const uint64_t vbase = 0xffffffff81000000ull;
    GByteArray *b = g_byte_array_new();
    g_byte_array_set_size(b, 0x3000);
    memset(b->data, 0, b->len);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)b->data;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_type = ET_EXEC;
    eh->e_machine = machine;
    eh->e_version = EV_CURRENT;
    eh->e_entry = entry;
    eh->e_phoff = sizeof *eh;
    eh->e_ehsize = sizeof *eh;
    eh->e_phentsize = sizeof(Elf64_Phdr);
    eh->e_phnum = 3;
    Elf64_Phdr *ph = (Elf64_Phdr *)(b->data + eh->e_phoff);
    ph[0] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = 0x1000, .p_vaddr = vbase, .p_paddr = 0x1000000,
                          .p_filesz = 0x1000, .p_memsz = 0x1000, .p_flags = PF_R | PF_X };
    ph[1] = (Elf64_Phdr){ .p_type = PT_NOTE, .p_offset = 0x100, .p_filesz = 0x10 };
    ph[2] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = 0x2000, .p_vaddr = vbase + 0x200000,
                          .p_paddr = 0x1200000, .p_filesz = 0x1000, .p_memsz = 0x5000, .p_flags = PF_R | PF_W };
    memset(b->data + 0x1000, 0xc3, 0x1000);
    memset(b->data + 0x2000, 0xd5, 0x1000);
    return b;
}

static char *elf_file(struct fixture *f, uint16_t machine, uint64_t entry)
{
    GByteArray *b = elf_build(machine, entry);
    char *path = write_file(f, "vmlinux", b->data, b->len);
    g_byte_array_unref(b);
    return path;
}

static void test_elf(void)
{
    struct fixture f;
    fixture_setup(&f, 128 * MiB);
    /* Make the bss dirty first: the loader must clear it. */
    memset(guest_memory_ptr(&f.mem, 0x1201000, 0x4000), 0xee, 0x4000);
    g_autofree char *kernel = elf_file(&f, EM_X86_64, 0x1000000);
    g_autofree char *initramfs = write_file(&f, "initrd", "0123456789", 10);
    struct boot_entry e;
    GError *error = NULL;
    g_assert_true(boot(&f, kernel, initramfs, "console=ttyS0", &e, &error));
    g_assert_no_error(error);
    g_assert_cmpint(e.format, ==, KERNEL_FORMAT_ELF);
    g_assert_cmphex(e.entry, ==, 0x1000000);
    const uint8_t *text = guest_memory_ptr(&f.mem, 0x1000000, 0x1000);
    const uint8_t *data = guest_memory_ptr(&f.mem, 0x1200000, 0x5000);
    for (unsigned i = 0; i < 0x1000; i++)
        g_assert_cmphex(text[i], ==, 0xc3);
    for (unsigned i = 0; i < 0x5000; i++)
        g_assert_cmphex(data[i], ==, i < 0x1000 ? 0xd5 : 0);

    const uint8_t *zp = zero_page(&f);
    g_assert_cmphex(get16(zp + ZP_BOOT_FLAG), ==, 0xaa55);
    g_assert_cmpmem(zp + ZP_HEADER, 4, "HdrS", 4);
    g_assert_cmphex(get16(zp + ZP_VERSION), >=, 0x0206);
    g_assert_cmphex(get8(zp + ZP_TYPE_OF_LOADER), ==, 0xff);
    g_assert_cmphex(get8(zp + ZP_LOADFLAGS) & 0x81, ==, 0x81);
    g_assert_cmphex(get32(zp + ZP_KERNEL_ALIGNMENT), ==, 0x1000000);
    g_assert_cmphex(get32(zp + ZP_CMD_LINE_PTR), ==, BOOT_CMDLINE_ADDR);
    g_assert_cmpstr(guest_memory_ptr(&f.mem, BOOT_CMDLINE_ADDR, 14), ==, "console=ttyS0");
    g_assert_cmphex(get32(zp + ZP_RAMDISK_SIZE), ==, 10);
    g_assert_cmphex(get32(zp + ZP_RAMDISK_IMAGE), ==, (128 * MiB - 10) & ~0xfffull);
    g_assert_cmpuint(get8(zp + ZP_E820_ENTRIES), ==, 3);

    /* A virtual e_entry is translated through its segment. */
    g_autofree char *kernel_v = elf_file(&f, EM_X86_64, 0xffffffff81000040ull);
    g_assert_true(boot(&f, kernel_v, NULL, NULL, &e, &error));
    g_assert_no_error(error);
    g_assert_cmphex(e.entry, ==, 0x1000040);
    fixture_teardown(&f);
}

/* ---- bad inputs ---- */

static void expect_error(struct fixture *f, const char *kernel, const char *initramfs, const char *cmdline,
                         int code, const char *words)
{
    struct boot_entry e;
    GError *error = NULL;
    g_assert_false(boot(f, kernel, initramfs, cmdline, &e, &error));
    g_assert_error(error, BOOT_ERROR, code);
    if (!strstr(error->message, words))
        g_error("error \"%s\" does not say \"%s\"", error->message, words);
    g_test_message("as expected: %s", error->message);
    g_error_free(error);
}

static void test_bad_files(void)
{
    struct fixture f;
    fixture_setup(&f, 64 * MiB);
    g_autofree char *missing = g_build_filename(f.dir, "no-such-kernel", NULL);
    expect_error(&f, missing, NULL, "", BOOT_ERROR_FILE, "No such file");
    g_autofree char *empty = write_file(&f, "empty", "", 0);
    expect_error(&f, empty, NULL, "", BOOT_ERROR_FILE, "is empty");
    expect_error(&f, f.dir, NULL, "", BOOT_ERROR_FILE, "not a regular file");
    g_autofree char *text = write_file(&f, "text", "#!/bin/sh\necho this is not a kernel\n", 37);
    expect_error(&f, text, NULL, "", BOOT_ERROR_FORMAT, "not a Linux kernel");
    GByteArray *zeros = g_byte_array_sized_new(8192);
    g_byte_array_set_size(zeros, 8192);
    memset(zeros->data, 0, zeros->len);
    g_autofree char *zero_kernel = write_file(&f, "zeros", zeros->data, zeros->len);
    g_byte_array_unref(zeros);
    expect_error(&f, zero_kernel, NULL, "", BOOT_ERROR_FORMAT, "not a Linux kernel");

    /* A good kernel with a missing or empty initramfs. */
    struct bz_spec s = bz_default();
    g_autofree char *kernel = bz_file(&f, &s);
    expect_error(&f, kernel, missing, "", BOOT_ERROR_FILE, "initramfs");
    expect_error(&f, kernel, empty, "", BOOT_ERROR_FILE, "is empty");
    fixture_teardown(&f);
}

static void test_bad_bzimages(void)
{
    struct fixture f;
    fixture_setup(&f, 64 * MiB);
    struct bz_spec s = bz_default();

    /* Truncated: the header promises more code than the file has. */
    GByteArray *b = bz_build(&s);
    g_autofree char *cut = write_file(&f, "cut", b->data, b->len / 2);
    expect_error(&f, cut, NULL, "", BOOT_ERROR_FORMAT, "truncated");
    g_autofree char *cut_header = write_file(&f, "cut-header", b->data, 0x210);
    expect_error(&f, cut_header, NULL, "", BOOT_ERROR_FORMAT, "truncated");
    g_byte_array_unref(b);

    s = bz_default();
    s.version = 0x0204;
    g_autofree char *old = bz_file(&f, &s);
    expect_error(&f, old, NULL, "", BOOT_ERROR_FORMAT, "too old");

    s = bz_default();
    s.xloadflags = 0;
    g_autofree char *k32 = bz_file(&f, &s);
    expect_error(&f, k32, NULL, "", BOOT_ERROR_FORMAT, "64-bit");

    s = bz_default();
    s.boot_flag = 0x1234;
    g_autofree char *noflag = bz_file(&f, &s);
    expect_error(&f, noflag, NULL, "", BOOT_ERROR_FORMAT, "0xaa55");

    s = bz_default();
    s.loadflags = 0;
    g_autofree char *zimage = bz_file(&f, &s);
    expect_error(&f, zimage, NULL, "", BOOT_ERROR_FORMAT, "zImage");

    /* Does not fit: needs 80 MiB in a 64 MiB guest. */
    s = bz_default();
    s.init_size = 80 * MiB;
    g_autofree char *huge = bz_file(&f, &s);
    expect_error(&f, huge, NULL, "", BOOT_ERROR_NO_ROOM, "does not fit");

    /* Command line longer than cmdline_size. */
    s = bz_default();
    s.cmdline_size = 16;
    g_autofree char *short_cmdline = bz_file(&f, &s);
    expect_error(&f, short_cmdline, NULL, "console=ttyS0 quiet", BOOT_ERROR_CMDLINE, "too long");
    struct boot_entry e;
    GError *error = NULL;
    g_assert_true(boot(&f, short_cmdline, NULL, "exactly16bytes!!", &e, &error));
    g_assert_no_error(error);
    fixture_teardown(&f);
}

static void test_initramfs_too_big(void)
{
    struct fixture f;
    fixture_setup(&f, 32 * MiB);
    struct bz_spec s = bz_default(); /* kernel at 16 MiB + 8 MiB init_size: 8 MiB left */
    g_autofree char *kernel = bz_file(&f, &s);
    GByteArray *big = g_byte_array_sized_new(9 * MiB);
    g_byte_array_set_size(big, 9 * MiB);
    g_autofree char *initramfs = write_file(&f, "big", big->data, big->len);
    g_byte_array_unref(big);
    expect_error(&f, kernel, initramfs, "", BOOT_ERROR_NO_ROOM, "initramfs");
    fixture_teardown(&f);
}

static void test_bad_elves(void)
{
    struct fixture f;
    fixture_setup(&f, 64 * MiB);
    g_autofree char *arm = elf_file(&f, EM_AARCH64, 0x1000000);
    expect_error(&f, arm, NULL, "", BOOT_ERROR_FORMAT, "another architecture");

    GByteArray *b = elf_build(EM_X86_64, 0x1000000);
    g_autofree char *cut = write_file(&f, "cut-elf", b->data, 0x1800);
    expect_error(&f, cut, NULL, "", BOOT_ERROR_FORMAT, "truncated");
    b->data[EI_CLASS] = ELFCLASS32;
    g_autofree char *elf32 = write_file(&f, "elf32", b->data, b->len);
    expect_error(&f, elf32, NULL, "", BOOT_ERROR_FORMAT, "64-bit");
    g_byte_array_unref(b);

    g_autofree char *bad_entry = elf_file(&f, EM_X86_64, 0x5000000);
    expect_error(&f, bad_entry, NULL, "", BOOT_ERROR_FORMAT, "entry point");

    g_autofree char *kernel = elf_file(&f, EM_X86_64, 0x1000000);
    g_autofree char *cmdline = g_strnfill(2048, 'x');
    expect_error(&f, kernel, NULL, cmdline, BOOT_ERROR_CMDLINE, "too long");
    fixture_teardown(&f);

    /* 16 MiB of RAM: the segment at 18 MiB is not RAM. */
    fixture_setup(&f, 16 * MiB);
    g_autofree char *kernel2 = elf_file(&f, EM_X86_64, 0x1000000);
    expect_error(&f, kernel2, NULL, "", BOOT_ERROR_NO_ROOM, "does not fit");
    fixture_teardown(&f);
}

/* Random corruption of the header bytes (deterministic seeds): every result
 * is a clean success or a GError with a message, never a crash or a write
 * outside guest RAM (ASan/valgrind runs would show the latter too). */
static void mutate_and_boot(struct fixture *f, GByteArray *image, size_t from, size_t to, GRand *rng,
                            const char *initramfs)
{
    GByteArray *copy = g_byte_array_new();
    g_byte_array_append(copy, image->data, image->len);
    unsigned n = g_rand_int_range(rng, 1, 9);
    for (unsigned i = 0; i < n; i++)
        copy->data[g_rand_int_range(rng, from, to)] = g_rand_int_range(rng, 0, 256);
    if (g_rand_boolean(rng)) /* sometimes a big value in a 32/64-bit field */
        memset(copy->data + g_rand_int_range(rng, from, to - 8), 0xff, 8);
    g_autofree char *path = write_file(f, "mutant", copy->data, copy->len);
    struct boot_entry e;
    GError *error = NULL;
    bool ok = boot(f, path, initramfs, "console=ttyS0", &e, &error);
    if (ok) {
        g_assert_no_error(error);
        g_assert_nonnull(guest_memory_ptr(&f->mem, e.entry, 1));
    } else {
        g_assert_nonnull(error);
        g_assert_cmpstr(error->message, !=, "");
        g_error_free(error);
    }
    g_byte_array_unref(copy);
}

static void test_mutations(void)
{
    struct fixture f;
    fixture_setup(&f, 64 * MiB);
    GRand *rng = g_rand_new_with_seed(20261130);
    g_autofree char *initramfs = write_file(&f, "initrd", "0123456789", 10);
    struct bz_spec s = bz_default();
    s.pm_size = 4096;
    GByteArray *bz = bz_build(&s);
    GByteArray *elf = elf_build(EM_X86_64, 0x1000000);
    for (unsigned i = 0; i < 300; i++) {
        mutate_and_boot(&f, bz, 0x1f0, 0x270, rng, i % 2 ? initramfs : NULL);
        mutate_and_boot(&f, elf, 0, sizeof(Elf64_Ehdr) + 3 * sizeof(Elf64_Phdr), rng, i % 2 ? initramfs : NULL);
    }
    g_byte_array_unref(bz);
    g_byte_array_unref(elf);
    g_rand_free(rng);
    fixture_teardown(&f);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    static const uint64_t ram_512m = 512 * MiB, ram_8g = 8 * GiB;
    g_test_add_func("/boot/bzimage/fields", test_bzimage_fields);
    g_test_add_func("/boot/bzimage/load-address", test_bzimage_load_address);
    g_test_add_func("/boot/bzimage/initrd-addr-max", test_initramfs_below_initrd_addr_max);
    g_test_add_data_func("/boot/e820/512M", &ram_512m, test_e820);
    g_test_add_data_func("/boot/e820/8G", &ram_8g, test_e820);
    g_test_add_func("/boot/elf/load", test_elf);
    g_test_add_func("/boot/errors/files", test_bad_files);
    g_test_add_func("/boot/errors/bzimage", test_bad_bzimages);
    g_test_add_func("/boot/errors/initramfs-too-big", test_initramfs_too_big);
    g_test_add_func("/boot/errors/elf", test_bad_elves);
    g_test_add_func("/boot/errors/mutations", test_mutations);
    return g_test_run();
}
