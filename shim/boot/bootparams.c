/* The zero page (struct boot_params): the kernel's setup header as the file
 * (or the ELF loader) gives it, plus what a boot loader must fill in: loader
 * type, load flags, heap end, command line, initramfs, ACPI RSDP and e820.
 */
#include <string.h>

#include "boot-internal.h"

#define LOADER_TYPE_UNDEFINED 0xff /* no registered boot loader id */
#define HEAP_END_PTR 0xfe00        /* setup heap end, relative to the real-mode code start - 0x200 */

static void fill_header(struct boot_params *bp, const struct linux_kernel *kernel,
                        uint64_t initramfs_addr, uint64_t initramfs_size)
{
    memcpy(&bp->hdr, &kernel->hdr, kernel->hdr_len);
    bp->hdr.type_of_loader = LOADER_TYPE_UNDEFINED;
    bp->hdr.loadflags |= LOADED_HIGH | CAN_USE_HEAP;
    bp->hdr.loadflags &= ~KEEP_SEGMENTS; /* obsolete; segments are loaded by the kernel */
    bp->hdr.heap_end_ptr = HEAP_END_PTR;
    bp->hdr.cmd_line_ptr = (uint32_t)BOOT_CMDLINE_ADDR;
    bp->ext_cmd_line_ptr = (uint32_t)(BOOT_CMDLINE_ADDR >> 32);
    bp->hdr.ramdisk_image = (uint32_t)initramfs_addr;
    bp->ext_ramdisk_image = (uint32_t)(initramfs_addr >> 32);
    bp->hdr.ramdisk_size = (uint32_t)initramfs_size;
    bp->ext_ramdisk_size = (uint32_t)(initramfs_size >> 32);
}

bool bootparams_write(struct guest_memory *mem, const struct linux_kernel *kernel,
                      uint64_t initramfs_addr, uint64_t initramfs_size, GError **error)
{
    G_STATIC_ASSERT(sizeof(struct boot_params) == 4096);
    struct boot_params *bp = g_new0(struct boot_params, 1);
    fill_header(bp, kernel, initramfs_addr, initramfs_size);
    bp->acpi_rsdp_addr = BOOT_ACPI_RSDP; /* protocol 2.14; older kernels scan for it */
    bp->e820_entries = e820_build(mem, bp->e820_table, E820_MAX_ENTRIES_ZEROPAGE);
    bool ok = boot_copy_to_guest(mem, BOOT_ZERO_PAGE, bp, sizeof *bp, "boot_params", error);
    g_free(bp);
    return ok;
}
