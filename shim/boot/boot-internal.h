/* Shared between the files of shim/boot/: what a parsed kernel looks like,
 * and the small helpers every table writer needs. Not a public contract
 * (boot.h is); unit tests may include it.
 */
#pragma once

#include <asm/bootparam.h>
#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "boot/boot.h"
#include "vsnap-config.h"

/* x86 Linux has taken 2048-byte command lines since forever; an ELF vmlinux
 * carries no header to say otherwise. */
#define LINUX_ELF_CMDLINE_MAX 2047u
/* Where the initramfs may end for an ELF vmlinux (no header to ask): what
 * x86-64 bzImages declare as initrd_addr_max. */
#define LINUX_ELF_INITRD_MAX 0x7fffffffu

/* A kernel that has been checked and copied into guest RAM. */
struct linux_kernel {
    enum kernel_format format;
    struct setup_header hdr; /* the bzImage's own header, or one made up for ELF */
    size_t hdr_len;          /* bytes of hdr that are meaningful (copied to the zero page) */
    uint64_t load_addr;      /* lowest guest-physical byte the kernel occupies */
    uint64_t end;            /* first byte after all memory the kernel needs while it starts */
    uint64_t entry;          /* 64-bit entry, guest-physical */
    uint32_t cmdline_max;    /* longest command line the kernel accepts, without the NUL */
    uint64_t initrd_end_max; /* the initramfs must end at or below this address */
};

/* Format detection and loaders. data/size is the whole kernel file; path is
 * only used in error messages. */
bool kernel_is_elf(const uint8_t *data, size_t size);
bool kernel_is_bzimage(const uint8_t *data, size_t size);
bool bzimage_load(struct guest_memory *mem, const char *path, const uint8_t *data, size_t size,
                  struct linux_kernel *out, GError **error);
bool elf_kernel_load(struct guest_memory *mem, const char *path, const uint8_t *data, size_t size,
                     struct linux_kernel *out, GError **error);

/* Highest guest-physical address + 1 of the RAM below the 32-bit MMIO hole. */
uint64_t boot_low_ram_end(const struct guest_memory *mem);

/* Fill table (room for max entries) with the guest's memory map; returns the
 * number of entries. */
unsigned e820_build(const struct guest_memory *mem, struct boot_e820_entry *table, unsigned max);

/* Write the zero page at BOOT_ZERO_PAGE from the kernel's header, the command
 * line address and the initramfs placement (size 0: none). */
bool bootparams_write(struct guest_memory *mem, const struct linux_kernel *kernel,
                      uint64_t initramfs_addr, uint64_t initramfs_size, GError **error);

/* Copy len bytes to guest-physical gpa; false with an error naming what if the
 * range is not RAM. */
bool boot_copy_to_guest(struct guest_memory *mem, uint64_t gpa, const void *src, uint64_t len,
                        const char *what, GError **error);

/* Sum of bytes, for MP and ACPI checksums (the stored checksum makes it 0). */
uint8_t boot_byte_sum(const void *data, size_t len);

/* The DSDT's AML body (what follows the 36-byte table header). */
GByteArray *acpi_dsdt_aml(void);
