/* bzImage loader: check the real-mode setup header (Documentation/arch/x86/
 * boot.rst), copy the protected-mode code into RAM and note where its 64-bit
 * entry (load address + 0x200) is. The setup code itself is never run: the
 * shim enters the kernel in long mode directly.
 */
#include <inttypes.h>
#include <string.h>

#include "boot-internal.h"

#define SETUP_HEADER_OFFSET 0x1f1
#define BOOT_FLAG_MAGIC 0xaa55
#define HDRS_MAGIC "HdrS"
#define HDRS_OFFSET 0x202
#define JUMP_LEN_OFFSET 0x201    /* the setup header ends at 0x202 + this byte */
#define ENTRY64_OFFSET 0x200     /* 64-bit entry, from the start of the protected-mode code */
#define PROTOCOL_MIN 0x0206      /* 64-bit entry and cmdline_size exist from here */
#define PROTOCOL_XLOADFLAGS 0x020c
#define PROTOCOL_INIT_SIZE 0x020a
#define DEFAULT_SETUP_SECTS 4    /* setup_sects == 0 means 4 */

bool kernel_is_bzimage(const uint8_t *data, size_t size)
{
    return size >= HDRS_OFFSET + 4 && memcmp(data + HDRS_OFFSET, HDRS_MAGIC, 4) == 0;
}

static bool check_header(const char *path, const struct setup_header *hdr, GError **error)
{
    if (hdr->boot_flag != BOOT_FLAG_MAGIC) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT,
                    "kernel '%s' is not a Linux kernel: \"HdrS\" present but boot flag at 0x1fe is "
                    "0x%04x, not 0xaa55", path, hdr->boot_flag);
        return false;
    }
    if (hdr->version < PROTOCOL_MIN) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT,
                    "kernel '%s' uses boot protocol %u.%02u, too old: 2.06 or newer is needed for "
                    "the 64-bit entry", path, hdr->version >> 8, hdr->version & 0xff);
        return false;
    }
    if (hdr->version >= PROTOCOL_XLOADFLAGS && !(hdr->xloadflags & XLF_KERNEL_64)) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT,
                    "kernel '%s' has no 64-bit entry (XLF_KERNEL_64 not set): is it a 32-bit kernel?",
                    path);
        return false;
    }
    if (!(hdr->loadflags & LOADED_HIGH)) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT,
                    "kernel '%s' is a zImage (loaded low), only bzImage is supported", path);
        return false;
    }
    return true;
}

/* Copy the part of the header the file really has (it ends at 0x202 + the
 * byte at 0x201); fields past it stay zero, as for an older protocol. */
static size_t read_header(const uint8_t *data, size_t size, struct setup_header *hdr)
{
    size_t end = HDRS_OFFSET + data[JUMP_LEN_OFFSET];
    size_t len = MIN(end, size) - SETUP_HEADER_OFFSET;
    len = MIN(len, sizeof *hdr);
    memset(hdr, 0, sizeof *hdr);
    memcpy(hdr, data + SETUP_HEADER_OFFSET, len);
    return len;
}

/* Where the protected-mode code goes: at pref_address when the kernel is
 * relocatable and fits there (it then runs in place, no self-copy), else at
 * 1 MiB as the protocol always allowed. */
static uint64_t choose_load_addr(const struct guest_memory *mem, const struct setup_header *hdr,
                                 uint64_t need)
{
    uint64_t pref = hdr->version >= PROTOCOL_INIT_SIZE ? hdr->pref_address : 0;
    bool relocatable = hdr->relocatable_kernel != 0;
    uint64_t low_end = boot_low_ram_end(mem);
    if (relocatable && pref >= BOOT_KERNEL_ADDR && pref <= low_end && need <= low_end - pref)
        return pref;
    return BOOT_KERNEL_ADDR;
}

bool bzimage_load(struct guest_memory *mem, const char *path, const uint8_t *data, size_t size,
                  struct linux_kernel *out, GError **error)
{
    struct setup_header *hdr = &out->hdr;
    if (size < SETUP_HEADER_OFFSET + offsetof(struct setup_header, cmdline_size)) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT,
                    "kernel '%s' is truncated: %zu bytes cannot hold a bzImage setup header", path, size);
        return false;
    }
    out->hdr_len = read_header(data, size, hdr);
    if (!check_header(path, hdr, error))
        return false;

    size_t setup_sects = hdr->setup_sects ? hdr->setup_sects : DEFAULT_SETUP_SECTS;
    size_t pm_offset = (setup_sects + 1) * 512;
    if (size <= pm_offset || (uint64_t)hdr->syssize * 16 > size - pm_offset) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT,
                    "kernel '%s' is truncated: its header declares %zu bytes of setup and %" PRIu64
                    " bytes of kernel, the file has %zu bytes", path, pm_offset,
                    (uint64_t)hdr->syssize * 16, size);
        return false;
    }
    size_t pm_size = size - pm_offset;
    /* init_size covers the decompressor, the decompressed kernel and its
     * early allocations: nothing else may be placed there. */
    uint64_t need = MAX((uint64_t)hdr->init_size, (uint64_t)pm_size);
    uint64_t load = choose_load_addr(mem, hdr, need);
    if (need > boot_low_ram_end(mem) - load) { /* load <= low end: 1 MiB or a checked pref */
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM,
                    "kernel '%s' does not fit in guest RAM: it needs %" PRIu64 " MiB from 0x%" PRIx64
                    " and the guest has %" PRIu64 " MiB below 3 GiB",
                    path, (need + (1 << 20) - 1) >> 20, load, boot_low_ram_end(mem) >> 20);
        return false;
    }
    if (!boot_copy_to_guest(mem, load, data + pm_offset, pm_size, "kernel", error))
        return false;

    hdr->code32_start = load;
    out->format = KERNEL_FORMAT_BZIMAGE;
    out->load_addr = load;
    out->end = load + need;
    out->entry = load + ENTRY64_OFFSET;
    out->cmdline_max = hdr->cmdline_size;
    out->initrd_end_max = (uint64_t)hdr->initrd_addr_max + 1;
    return true;
}
