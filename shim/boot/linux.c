/* boot_load_linux: read the kernel, let the bzImage or ELF loader put it in
 * RAM, then place the command line and initramfs and write the zero page, the
 * MP table, the ACPI tables, the boot GDT and the page tables.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boot-internal.h"

G_DEFINE_QUARK(vsnap-boot-error-quark, boot_error)

/* A read-only view of a whole file. */
struct file_view {
    const uint8_t *data;
    size_t size;
};

static bool file_view_open(struct file_view *view, const char *path, const char *what, GError **error)
{
    view->data = NULL;
    view->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FILE, "cannot open %s '%s': %s", what, path,
                    g_strerror(errno));
        return false;
    }
    struct stat st;
    bool ok = false;
    if (fstat(fd, &st) < 0) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FILE, "cannot stat %s '%s': %s", what, path,
                    g_strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FILE, "%s '%s' is not a regular file", what, path);
    } else if (st.st_size == 0) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FILE, "%s '%s' is empty", what, path);
    } else {
        void *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            g_set_error(error, BOOT_ERROR, BOOT_ERROR_FILE, "cannot map %s '%s': %s", what, path,
                        g_strerror(errno));
        } else {
            view->data = p;
            view->size = st.st_size;
            ok = true;
        }
    }
    close(fd);
    return ok;
}

static void file_view_close(struct file_view *view)
{
    if (view->data)
        munmap((void *)view->data, view->size);
    view->data = NULL;
}

uint64_t boot_low_ram_end(const struct guest_memory *mem)
{
    return MIN(mem->size, MEM_32BIT_GAP_START);
}

bool boot_copy_to_guest(struct guest_memory *mem, uint64_t gpa, const void *src, uint64_t len,
                        const char *what, GError **error)
{
    void *dst = guest_memory_ptr(mem, gpa, len);
    if (!dst) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM,
                    "%s does not fit in guest RAM: [0x%" PRIx64 ", 0x%" PRIx64 ") is not RAM (guest has %" PRIu64
                    " MiB)",
                    what, gpa, gpa + len, mem->size >> 20);
        return false;
    }
    memcpy(dst, src, len);
    return true;
}

uint8_t boot_byte_sum(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint8_t sum = 0;
    for (size_t i = 0; i < len; i++)
        sum += p[i];
    return sum;
}

static bool load_kernel(struct guest_memory *mem, const char *path, struct linux_kernel *kernel,
                        GError **error)
{
    struct file_view view;
    if (!file_view_open(&view, path, "kernel", error))
        return false;
    bool ok;
    if (kernel_is_elf(view.data, view.size)) {
        ok = elf_kernel_load(mem, path, view.data, view.size, kernel, error);
    } else if (kernel_is_bzimage(view.data, view.size)) {
        ok = bzimage_load(mem, path, view.data, view.size, kernel, error);
    } else {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT,
                    "kernel '%s' is not a Linux kernel: neither a bzImage (no \"HdrS\" setup header "
                    "at 0x202) nor an ELF vmlinux",
                    path);
        ok = false;
    }
    file_view_close(&view);
    return ok;
}

static bool write_cmdline(struct guest_memory *mem, const struct linux_kernel *kernel,
                          const char *cmdline, GError **error)
{
    size_t len = strlen(cmdline);
    uint64_t limit = MIN((uint64_t)kernel->cmdline_max, BOOT_CMDLINE_MAX - 1);
    if (len > limit) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_CMDLINE,
                    "kernel command line is too long: %zu bytes, this kernel accepts at most %" PRIu64,
                    len, limit);
        return false;
    }
    return boot_copy_to_guest(mem, BOOT_CMDLINE_ADDR, cmdline, len + 1, "kernel command line", error);
}

/* The initramfs goes page-aligned at the top of low RAM, below what the kernel
 * declares it can reach, and above everything the kernel needs while it
 * decompresses and starts (init_size), so neither overwrites the other. */
static bool load_initramfs(struct guest_memory *mem, const struct linux_kernel *kernel,
                           const char *path, uint64_t *addr, uint64_t *size, GError **error)
{
    struct file_view view;
    if (!file_view_open(&view, path, "initramfs", error))
        return false;
    uint64_t top = MIN(boot_low_ram_end(mem), kernel->initrd_end_max);
    uint64_t start = top >= view.size ? (top - view.size) & ~(GUEST_PAGE_SIZE - 1) : 0;
    bool ok = false;
    if (top < view.size || start < kernel->end) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM,
                    "initramfs '%s' (%zu bytes) does not fit in guest RAM between the end of the "
                    "kernel (0x%" PRIx64 ") and 0x%" PRIx64,
                    path, view.size, kernel->end, top);
    } else {
        ok = boot_copy_to_guest(mem, start, view.data, view.size, "initramfs", error);
        *addr = start;
        *size = view.size;
    }
    file_view_close(&view);
    return ok;
}

bool boot_load_linux(struct guest_memory *mem, const struct boot_input *in,
                     struct boot_entry *out, GError **error)
{
    struct linux_kernel kernel;
    uint64_t initramfs_addr = 0, initramfs_size = 0;

    if (!in->kernel_path || !*in->kernel_path) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FILE, "no kernel given");
        return false;
    }
    if (!load_kernel(mem, in->kernel_path, &kernel, error))
        return false;
    if (!write_cmdline(mem, &kernel, in->cmdline ? in->cmdline : "", error))
        return false;
    if (in->initramfs_path &&
        !load_initramfs(mem, &kernel, in->initramfs_path, &initramfs_addr, &initramfs_size, error))
        return false;
    if (!bootparams_write(mem, &kernel, initramfs_addr, initramfs_size, error))
        return false;
    struct boot_smbios defaults = { .ncpus = in->ncpus };
    const struct boot_smbios *smbios = in->smbios ? in->smbios : &defaults;
    if (!mptable_write(mem, in->ncpus, error) || !acpi_write_tables(mem, in->ncpus, error) ||
        !smbios_write(mem, smbios, error))
        return false;
    boot_write_gdt_and_page_tables(mem);

    *out = (struct boot_entry){
        .format = kernel.format,
        .entry = kernel.entry,
        .boot_params = BOOT_ZERO_PAGE,
        .stack = BOOT_STACK_TOP,
        .initramfs_addr = initramfs_addr,
        .initramfs_size = initramfs_size,
    };
    return true;
}
