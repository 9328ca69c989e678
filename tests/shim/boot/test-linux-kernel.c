/* boot_load_linux on Debian's real kernel, when scripts/fetch-linux.sh has
 * cached it ($VSNAP_LINUX_CACHE or /var/cache/vsnap/linux); exit code 77
 * (meson's "skipped") when it has not. The expected values are read from the
 * files here, independently of the shim's parser.
 */
#include <elf.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

#include "boot/boot.h"
#include "platform/memory.h"

#define RAM_SIZE (512ull << 20)
#define SKIP 77

static char *bzimage_path, *vmlinux_path;

static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

static bool find_cached_kernel(void)
{
    const char *dir = g_getenv("VSNAP_LINUX_CACHE") ? g_getenv("VSNAP_LINUX_CACHE") : "/var/cache/vsnap/linux";
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        if (g_str_has_prefix(name, "vmlinuz-") && !bzimage_path) {
            g_autofree char *elf_name = g_strconcat("vmlinux-", name + strlen("vmlinuz-"), NULL);
            g_autofree char *elf = g_build_filename(dir, elf_name, NULL);
            if (g_file_test(elf, G_FILE_TEST_IS_REGULAR)) {
                bzimage_path = g_build_filename(dir, name, NULL);
                vmlinux_path = g_steal_pointer(&elf);
            }
        }
    }
    if (d)
        g_dir_close(d);
    return bzimage_path != NULL;
}

static void test_bzimage(void)
{
    gchar *file;
    gsize size;
    g_assert_true(g_file_get_contents(bzimage_path, &file, &size, NULL));
    const uint8_t *k = (const uint8_t *)file;
    size_t setup_sects = k[0x1f1] ? k[0x1f1] : 4;
    size_t pm_off = (setup_sects + 1) * 512;
    uint64_t pref = rd64(k + 0x258);
    uint32_t init_size = rd32(k + 0x260);
    g_test_message("%s: protocol %x, setup_sects %zu, pref_address 0x%" G_GINT64_MODIFIER "x, init_size %u MiB",
                   bzimage_path, rd16(k + 0x206), setup_sects, pref, init_size >> 20);

    struct guest_memory mem;
    GError *error = NULL;
    g_assert_true(guest_memory_init(&mem, RAM_SIZE, &error));
    /* A made-up initramfs: it must land above everything init_size covers. */
    g_autofree char *initrd = g_build_filename(g_get_tmp_dir(), "test-linux-kernel-initrd", NULL);
    g_assert_true(g_file_set_contents(initrd, "070701 not really a cpio", -1, NULL));
    struct boot_input in = { .kernel_path = bzimage_path, .initramfs_path = initrd, .cmdline = "console=ttyS0",
                             .ncpus = 1 };
    struct boot_entry e;
    g_assert_true(boot_load_linux(&mem, &in, &e, &error));
    g_assert_no_error(error);
    g_unlink(initrd);

    uint64_t load = k[0x234] ? pref : 0x100000; /* relocatable: at pref_address */
    g_assert_cmpint(e.format, ==, KERNEL_FORMAT_BZIMAGE);
    g_assert_cmphex(e.entry, ==, load + 0x200);
    g_assert_cmpmem(guest_memory_ptr(&mem, load, size - pm_off), size - pm_off, k + pm_off, size - pm_off);
    g_assert_cmphex(e.initramfs_addr, >=, load + init_size);
    const uint8_t *zp = guest_memory_ptr(&mem, BOOT_ZERO_PAGE, 4096);
    /* The header as the file has it, except the fields a loader fills in
     * (0x210-0x22b: loader type, loadflags, code32_start, ramdisk, heap, cmdline). */
    size_t hdr_end = 0x202 + k[0x201];
    g_assert_cmpmem(zp + 0x1f1, 0x210 - 0x1f1, k + 0x1f1, 0x210 - 0x1f1);
    g_assert_cmpmem(zp + 0x22c, hdr_end - 0x22c, k + 0x22c, hdr_end - 0x22c);
    g_assert_cmphex(zp[0x210], ==, 0xff);
    g_assert_cmphex(rd32(zp + 0x218), ==, e.initramfs_addr);

    /* The same kernel cut short is refused. */
    g_autofree char *cut = g_build_filename(g_get_tmp_dir(), "test-linux-kernel-cut", NULL);
    g_assert_true(g_file_set_contents(cut, file, size - 4096, NULL));
    in.kernel_path = cut;
    in.initramfs_path = NULL;
    g_assert_false(boot_load_linux(&mem, &in, &e, &error));
    g_assert_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT);
    g_test_message("truncated: %s", error->message);
    g_clear_error(&error);
    g_unlink(cut);
    guest_memory_release(&mem);
    g_free(file);
}

static void test_vmlinux(void)
{
    gchar *file;
    gsize size;
    g_assert_true(g_file_get_contents(vmlinux_path, &file, &size, NULL));
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)file;
    g_assert_cmpuint(eh->e_machine, ==, EM_X86_64);

    struct guest_memory mem;
    GError *error = NULL;
    g_assert_true(guest_memory_init(&mem, RAM_SIZE, &error));
    struct boot_input in = { .kernel_path = vmlinux_path, .cmdline = "console=ttyS0", .ncpus = 1 };
    struct boot_entry e;
    g_assert_true(boot_load_linux(&mem, &in, &e, &error));
    g_assert_no_error(error);
    g_assert_cmpint(e.format, ==, KERNEL_FORMAT_ELF);
    g_assert_cmphex(e.entry, ==, eh->e_entry); /* Linux's e_entry is physical startup_64 */
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(file + eh->e_phoff);
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD)
            continue;
        g_assert_cmpmem(guest_memory_ptr(&mem, ph[i].p_paddr, ph[i].p_filesz), ph[i].p_filesz,
                        file + ph[i].p_offset, ph[i].p_filesz);
    }
    guest_memory_release(&mem);
    g_free(file);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    if (!find_cached_kernel()) {
        printf("skip: no Debian kernel cached (run scripts/fetch-linux.sh)\n");
        return SKIP;
    }
    g_test_add_func("/linux-kernel/bzimage", test_bzimage);
    g_test_add_func("/linux-kernel/vmlinux", test_vmlinux);
    return g_test_run();
}
