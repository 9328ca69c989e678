/* Booting a Linux x86-64 payload (bzImage or ELF vmlinux) through the 64-bit
 * boot protocol: the loader writes the kernel, initramfs, cmdline, boot_params
 * (zero page with e820), MP table and ACPI tables into guest RAM, then the BSP
 * starts in long mode at the 64-bit entry with RSI = boot_params.
 *
 * Fixed low-memory layout (all below 1 MiB, e820-reserved where the guest must
 * not reuse it):
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "memory.h"

#define BOOT_GDT_ADDR      0x500ull
#define BOOT_IDT_ADDR      0x520ull
#define BOOT_ZERO_PAGE     0x7000ull   /* struct boot_params */
#define BOOT_STACK_TOP     0x8ff0ull
#define BOOT_PML4_ADDR     0x9000ull
#define BOOT_PDPTE_ADDR    0xa000ull
#define BOOT_PDE_ADDR      0xb000ull   /* 4 pages: identity map of the first 4 GiB */
#define BOOT_CMDLINE_ADDR  0x20000ull
#define BOOT_CMDLINE_MAX   0x10000ull
#define BOOT_MPTABLE_ADDR  0x9fc00ull  /* EBDA: where Linux looks for the MP table */
#define BOOT_ACPI_RSDP     0xe0000ull  /* BIOS area: Linux scans 0xe0000-0xfffff */
#define BOOT_ACPI_TABLES   0xe1000ull
#define BOOT_KERNEL_ADDR   0x100000ull /* 1 MiB, bzImage protected-mode code */

/* ACPI fixed-hardware I/O ports (declared in the FADT, served by devices/acpi-pm.c). */
#define ACPI_PM1A_EVT_PORT 0x600       /* PM1a_EVT_BLK: status (2 bytes) + enable (2 bytes) */
#define ACPI_PM1A_CNT_PORT 0x604       /* PM1a_CNT_BLK: 2 bytes */
#define ACPI_PM_TMR_PORT   0x608       /* PM timer: 4 bytes */
#define ACPI_RESET_PORT    0x60c       /* FADT RESET_REG, write ACPI_RESET_VALUE */
#define ACPI_RESET_VALUE   0x1
#define ACPI_SCI_IRQ       9
#define ACPI_S5_SLP_TYP    5           /* the value \_S5 declares */
#define ACPI_PM1_PWRBTN_STS (1u << 8)
#define ACPI_PM1_PWRBTN_EN  (1u << 8)
#define ACPI_PM1_SLP_EN     (1u << 13)

enum kernel_format { KERNEL_FORMAT_BZIMAGE, KERNEL_FORMAT_ELF };

struct boot_input {
    const char *kernel_path;
    const char *initramfs_path; /* NULL: none */
    const char *cmdline;        /* NULL: empty */
    unsigned ncpus;
};

/* What the BSP needs to start. */
struct boot_entry {
    enum kernel_format format;
    uint64_t entry;       /* 64-bit entry point (guest-physical, identity mapped) */
    uint64_t boot_params; /* guest-physical address of the zero page (RSI) */
    uint64_t stack;
    uint64_t initramfs_addr, initramfs_size;
};

/* Parse the kernel, load everything into RAM, fill boot_params, e820, MP table
 * and ACPI tables. Errors name the file and the problem ("not a Linux kernel",
 * "initramfs does not fit below ...").
 */
bool boot_load_linux(struct guest_memory *mem, const struct boot_input *in,
                     struct boot_entry *out, GError **error);

/* Page tables (identity map of the first 4 GiB, 2 MiB pages) and the boot GDT
 * with __BOOT_CS = 0x10, __BOOT_DS = 0x18, written into RAM. */
void boot_write_gdt_and_page_tables(struct guest_memory *mem);

/* Put the BSP in 64-bit mode at out->entry: sregs (CR0/CR3/CR4/EFER, segments
 * from the boot GDT), regs (RIP, RSI, RSP, RFLAGS), FPU defaults and boot MSRs. */
bool boot_setup_bsp(int vcpu_fd, const struct boot_entry *entry, GError **error);

/* Tables, exposed for unit tests and for the loader. */
bool mptable_write(struct guest_memory *mem, unsigned ncpus, GError **error);
bool acpi_write_tables(struct guest_memory *mem, unsigned ncpus, GError **error);
