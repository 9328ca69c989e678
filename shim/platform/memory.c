/* Guest RAM: one memfd, mapped once, shared by KVM memory slots.
 *
 * memfd rather than anonymous memory so the snapshot code can later map the
 * same pages elsewhere (or hand the fd to a userfaultfd MINOR handler), and
 * MAP_NORESERVE plus ftruncate on a sparse file means an 8 GiB guest costs
 * nothing until the guest touches its pages.
 *
 * On huge pages the memfd is hugetlbfs's (MFD_HUGETLB | MFD_HUGE_2MB) and
 * is mapped without MAP_NORESERVE: the kernel then reserves a huge page for
 * every 2 MiB of RAM at mmap, from the pool the host set aside
 * (vm.nr_hugepages), so a host with too few fails here, with the numbers,
 * rather than with a SIGBUS at the guest's first touch of a page it cannot
 * have. Untouched RAM still allocates nothing: a reservation is a count.
 */
#include "platform/memory.h"

#include <errno.h>
#include <gio/gio.h>
#include <inttypes.h>
#include <linux/memfd.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void layout_regions(struct guest_memory *mem)
{
    uint64_t low = MIN(mem->size, MEM_32BIT_GAP_START);
    mem->nregions = 0;
    mem->regions[mem->nregions++] = (struct guest_region){ .gpa = 0, .size = low, .ram_offset = 0 };
    if (mem->size > low) {
        mem->regions[mem->nregions++] = (struct guest_region){
            .gpa = MEM_32BIT_GAP_END, .size = mem->size - low, .ram_offset = low,
        };
    }
}

/* HugePages_Free - HugePages_Rsvd and HugePages_Total of /proc/meminfo, if
 * its default huge page size is 2 MiB (the counts are of that size). */
static bool read_hugepage_pool(uint64_t *available, uint64_t *total)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return false;
    uint64_t free_pages = 0, reserved = 0, kib = 0, value;
    char line[128];
    *total = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "HugePages_Total: %" SCNu64, &value) == 1)
            *total = value;
        else if (sscanf(line, "HugePages_Free: %" SCNu64, &value) == 1)
            free_pages = value;
        else if (sscanf(line, "HugePages_Rsvd: %" SCNu64, &value) == 1)
            reserved = value;
        else if (sscanf(line, "Hugepagesize: %" SCNu64, &value) == 1)
            kib = value;
    }
    fclose(f);
    *available = free_pages > reserved ? free_pages - reserved : 0;
    return kib == GUEST_HUGE_PAGE_SIZE >> 10;
}

static void set_hugepage_shortage(GError **error, uint64_t size)
{
    uint64_t need = size / GUEST_HUGE_PAGE_SIZE, available, total;
    g_autofree char *have = read_hugepage_pool(&available, &total)
        ? g_strdup_printf("the host has %" G_GUINT64_FORMAT " free of the %" G_GUINT64_FORMAT " it reserved "
                          "(vm.nr_hugepages)", available, total)
        : g_strdup("the host has fewer free (vm.nr_hugepages)");
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_NO_SPACE,
                "guest RAM of %" G_GUINT64_FORMAT " MiB on huge pages needs %" G_GUINT64_FORMAT " huge pages of "
                "2 MiB, but %s: reserve more (echo N > /proc/sys/vm/nr_hugepages, or hugepages=N on the host's "
                "kernel command line), or run the VM without huge pages", size >> 20, need, have);
}

static int create_ram_fd(uint64_t page_size, GError **error)
{
    unsigned flags = MFD_CLOEXEC | (page_size == GUEST_HUGE_PAGE_SIZE ? MFD_HUGETLB | MFD_HUGE_2MB : 0);
    int fd = memfd_create("vsnap-guest-ram", flags);
    if (fd < 0)
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "cannot create the guest RAM memfd%s: %s",
                    flags & MFD_HUGETLB ? " on 2 MiB huge pages (MFD_HUGETLB)" : "", g_strerror(errno));
    return fd;
}

bool guest_memory_init_paged(struct guest_memory *mem, uint64_t size, uint64_t page_size, GError **error)
{
    memset(mem, 0, sizeof(*mem));
    mem->fd = -1;
    if (page_size != GUEST_PAGE_SIZE && page_size != GUEST_HUGE_PAGE_SIZE) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "guest RAM pages of %" G_GUINT64_FORMAT " bytes: only 4 KiB and 2 MiB", page_size);
        return false;
    }
    if (size == 0 || size % page_size != 0) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "guest memory size %" G_GUINT64_FORMAT " is not a positive multiple of %s", size,
                    page_size == GUEST_PAGE_SIZE ? "4 KiB" : "2 MiB (huge pages)");
        return false;
    }
    mem->fd = create_ram_fd(page_size, error);
    if (mem->fd < 0)
        return false;
    if (ftruncate(mem->fd, (off_t)size) < 0) {
        int e = errno;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e),
                    "cannot size guest RAM to %" G_GUINT64_FORMAT " bytes: %s", size, g_strerror(e));
        guest_memory_release(mem);
        return false;
    }
    int flags = MAP_SHARED | (page_size == GUEST_PAGE_SIZE ? MAP_NORESERVE : 0);
    void *host = mmap(NULL, size, PROT_READ | PROT_WRITE, flags, mem->fd, 0);
    if (host == MAP_FAILED) {
        int e = errno;
        if (e == ENOMEM && page_size == GUEST_HUGE_PAGE_SIZE)
            set_hugepage_shortage(error, size);
        else
            g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e),
                        "cannot map %" G_GUINT64_FORMAT " bytes of guest RAM: %s", size, g_strerror(e));
        guest_memory_release(mem);
        return false;
    }
    /* Guest RAM never belongs in a core dump of the shim. */
    madvise(host, size, MADV_DONTDUMP);
    mem->host = host;
    mem->size = size;
    mem->page_size = page_size;
    layout_regions(mem);
    return true;
}

bool guest_memory_init(struct guest_memory *mem, uint64_t size, GError **error)
{
    return guest_memory_init_paged(mem, size, GUEST_PAGE_SIZE, error);
}

bool guest_memory_adopt(struct guest_memory *mem, uint8_t *host, uint64_t size, int fd, GError **error)
{
    memset(mem, 0, sizeof(*mem));
    mem->fd = -1;
    if (!host || size == 0 || size % GUEST_PAGE_SIZE != 0) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "guest memory of %" G_GUINT64_FORMAT " bytes is not a positive multiple of 4 KiB", size);
        return false;
    }
    madvise(host, size, MADV_DONTDUMP);
    mem->host = host;
    mem->size = size;
    mem->page_size = GUEST_PAGE_SIZE;
    mem->fd = fd;
    layout_regions(mem);
    return true;
}

bool guest_memory_adopt_private(struct guest_memory *mem, uint8_t *host, uint64_t size, int fd, GError **error)
{
    if (!guest_memory_adopt(mem, host, size, fd, error))
        return false;
    mem->private_file = true;
    return true;
}

void guest_memory_release(struct guest_memory *mem)
{
    if (mem->host)
        munmap(mem->host, mem->size);
    if (mem->fd >= 0)
        close(mem->fd);
    memset(mem, 0, sizeof(*mem));
    mem->fd = -1;
}

uint64_t guest_memory_offset(const struct guest_memory *mem, uint64_t gpa)
{
    for (unsigned i = 0; i < mem->nregions; i++) {
        const struct guest_region *r = &mem->regions[i];
        if (gpa >= r->gpa && gpa - r->gpa < r->size)
            return r->ram_offset + (gpa - r->gpa);
    }
    return UINT64_MAX;
}

void *guest_memory_ptr(const struct guest_memory *mem, uint64_t gpa, uint64_t len)
{
    for (unsigned i = 0; i < mem->nregions; i++) {
        const struct guest_region *r = &mem->regions[i];
        if (gpa < r->gpa || gpa - r->gpa >= r->size)
            continue;
        if (len > r->size - (gpa - r->gpa))
            return NULL;
        return mem->host + r->ram_offset + (gpa - r->gpa);
    }
    return NULL;
}

uint64_t guest_memory_end(const struct guest_memory *mem)
{
    if (mem->nregions == 0)
        return 0;
    const struct guest_region *last = &mem->regions[mem->nregions - 1];
    return last->gpa + last->size;
}
