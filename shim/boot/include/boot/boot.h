/* Booting a Linux x86-64 payload (bzImage or ELF vmlinux) through the 64-bit
 * boot protocol: the loader writes the kernel, initramfs, cmdline, boot_params
 * (zero page with e820), MP table and ACPI tables into guest RAM, then the BSP
 * starts in long mode at the 64-bit entry with RSI = boot_params.
 *
 * Where each structure goes in guest RAM is platform/layout.h's.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "platform/layout.h"
#include "platform/memory.h"

enum kernel_format { KERNEL_FORMAT_BZIMAGE, KERNEL_FORMAT_ELF };

/* GError domain of everything in shim/boot/. */
#define BOOT_ERROR boot_error_quark()
GQuark boot_error_quark(void);
enum boot_error {
    BOOT_ERROR_FILE,     /* kernel/initramfs missing, unreadable or empty */
    BOOT_ERROR_FORMAT,   /* not a Linux kernel, truncated, protocol too old, wrong arch */
    BOOT_ERROR_NO_ROOM,  /* kernel, initramfs or a table does not fit in guest RAM */
    BOOT_ERROR_CMDLINE,  /* command line too long */
    BOOT_ERROR_KVM,      /* a vCPU ioctl failed */
};

/* What the guest reads in SMBIOS (smbios.c). Strings may be NULL: the
 * shim's own vendor and product then, or nothing. */
struct boot_smbios {
    const char *manufacturer, *product_name, *version, *serial_number, *sku_number, *family;
    uint8_t uuid[16];            /* in the textual order; all zero: not set */
    char *const *oem_strings;    /* NULL-terminated, or NULL */
    unsigned ncpus;
};

struct boot_input {
    const char *kernel_path;
    const char *initramfs_path; /* NULL: none */
    const char *cmdline;        /* NULL: empty */
    unsigned ncpus;
    const struct boot_smbios *smbios; /* NULL: the shim's defaults */
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
 * and ACPI tables (and the GDT and page tables, as boot_write_gdt_and_page_tables
 * does). Errors (domain BOOT_ERROR) name the file and the problem ("not a Linux
 * kernel", "initramfs ... does not fit ..."). Safe to call again on a reboot.
 */
bool boot_load_linux(struct guest_memory *mem, const struct boot_input *in,
                     struct boot_entry *out, GError **error);

/* Page tables (identity map of the first 4 GiB, 2 MiB pages) and the boot GDT
 * with __BOOT_CS = 0x10, __BOOT_DS = 0x18, written into RAM. */
void boot_write_gdt_and_page_tables(struct guest_memory *mem);

/* Put the BSP in 64-bit mode at out->entry: sregs (CR0/CR3/CR4/EFER, segments
 * from the boot GDT), regs (RIP, RSI, RSP, RFLAGS), FPU defaults and boot MSRs. */
bool boot_setup_bsp(int vcpu_fd, const struct boot_entry *entry, GError **error);

/* KVM_SET_GSI_ROUTING on the VM fd: GSI 0 -> PIC pin 0 and IOAPIC pin 2;
 * GSI 1 and 3-15 -> PIC pin n and IOAPIC pin n (GSI 2 is the cascade: no
 * route); GSI 16-23 -> IOAPIC pin n. Call it after KVM_CREATE_IRQCHIP and
 * before any irqfd is assigned; a VM that adds MSI routes later must keep
 * these entries. */
bool boot_set_irq_routing(int vm_fd, GError **error);

/* Tables, exposed for unit tests and for the loader. */
bool mptable_write(struct guest_memory *mem, unsigned ncpus, GError **error);
bool acpi_write_tables(struct guest_memory *mem, unsigned ncpus, GError **error);
bool smbios_write(struct guest_memory *mem, const struct boot_smbios *in, GError **error);
/* The structure table alone, without the entry point (g_byte_array_unref it). */
GByteArray *smbios_build_table(const struct boot_smbios *in, GError **error);

/* Who the machine says it is when the config does not say. */
#define SMBIOS_VENDOR "vsnap"
#define SMBIOS_PRODUCT "vsnap microVM"
#define SMBIOS_BIOS_DATE "01/01/2025" /* mm/dd/yyyy: there is no BIOS; a fixed date keeps tables reproducible */
