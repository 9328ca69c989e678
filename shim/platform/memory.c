/* Guest RAM: one memfd, mapped once, shared by KVM memory slots.
 *
 * memfd rather than anonymous memory so the snapshot code can later map the
 * same pages elsewhere (or hand the fd to a userfaultfd MINOR handler), and
 * MAP_NORESERVE plus ftruncate on a sparse file means an 8 GiB guest costs
 * nothing until the guest touches its pages.
 */
#include "platform/memory.h"

#include <errno.h>
#include <gio/gio.h>
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

bool guest_memory_init(struct guest_memory *mem, uint64_t size, GError **error)
{
    memset(mem, 0, sizeof(*mem));
    mem->fd = -1;
    if (size == 0 || size % GUEST_PAGE_SIZE != 0) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "guest memory size %" G_GUINT64_FORMAT " is not a positive multiple of 4 KiB", size);
        return false;
    }
    mem->fd = memfd_create("vsnap-guest-ram", MFD_CLOEXEC);
    if (mem->fd < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
                    "cannot create the guest RAM memfd: %s", g_strerror(errno));
        return false;
    }
    if (ftruncate(mem->fd, (off_t)size) < 0) {
        int e = errno;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e),
                    "cannot size guest RAM to %" G_GUINT64_FORMAT " bytes: %s", size, g_strerror(e));
        guest_memory_release(mem);
        return false;
    }
    void *host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, mem->fd, 0);
    if (host == MAP_FAILED) {
        int e = errno;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e),
                    "cannot map %" G_GUINT64_FORMAT " bytes of guest RAM: %s", size, g_strerror(e));
        guest_memory_release(mem);
        return false;
    }
    /* Guest RAM never belongs in a core dump of the shim. */
    madvise(host, size, MADV_DONTDUMP);
    mem->host = host;
    mem->size = size;
    layout_regions(mem);
    return true;
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
    mem->fd = fd;
    layout_regions(mem);
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
