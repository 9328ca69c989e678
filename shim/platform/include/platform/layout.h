/* The guest machine's map: every guest-physical address, I/O port and
 * interrupt line vsnap's x86-64 microVM uses, in one place (as Firecracker's
 * arch/x86_64/layout.rs is). The boot path, the devices and the KVM core ask
 * this file; none of them defines an address of its own.
 */
#pragma once

/* Guest RAM and the 32-bit MMIO hole: RAM offsets below MEM_32BIT_GAP_START
 * are guest-physical as they are, the rest sits above 4 GiB
 * (platform/memory.h). */
#define GUEST_PAGE_SIZE 4096ull
#define MEM_32BIT_GAP_START 0xc0000000ull /* 3 GiB: MMIO hole up to 4 GiB */
#define MEM_32BIT_GAP_END 0x100000000ull
#define MMIO_VIRTIO_BASE 0xd0000000ull    /* virtio-mmio device window */
#define MMIO_VIRTIO_STRIDE 0x1000ull
#define IOAPIC_BASE 0xfec00000ull
#define LAPIC_BASE 0xfee00000ull

/* Boot structures, all below 1 MiB (e820-reserved where the guest must not
 * reuse them), written by boot/. */
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
#define BOOT_ACPI_TABLES_END 0xef000ull /* then the VM generation ID and SMBIOS */
#define BOOT_VMGENID_ADDR  0xef000ull  /* 16 bytes, the VM generation ID (devices/legacy/vmgenid.c) */
#define BOOT_SMBIOS_ENTRY  0xf0000ull  /* SMBIOS 3.0 entry point, the table after it, to 1 MiB */
#define BOOT_KERNEL_ADDR   0x100000ull /* 1 MiB, bzImage protected-mode code */


/* ACPI fixed-hardware I/O ports (declared in the FADT, served by devices/legacy/acpi-pm.c). */
#define ACPI_PM_PORT_BASE 0x600
#define ACPI_PM_PORT_COUNT 0x14 /* 0x600..0x613: event, control, timer, reset, GPE0 */
#define ACPI_PM1A_EVT_PORT 0x600       /* PM1a_EVT_BLK: status (2 bytes) + enable (2 bytes) */
#define ACPI_PM1A_CNT_PORT 0x604       /* PM1a_CNT_BLK: 2 bytes */
#define ACPI_PM_TMR_PORT   0x608       /* PM timer: 4 bytes */
#define ACPI_RESET_PORT    0x60c       /* FADT RESET_REG, write ACPI_RESET_VALUE */
#define ACPI_RESET_VALUE   0x1
#define ACPI_GPE0_PORT     0x610       /* GPE0_BLK: status (2 bytes) + enable (2 bytes) */
#define ACPI_GPE0_LEN      4
#define ACPI_GPE_VMGENID   0           /* GPE 0: the VM generation ID changed (\_GPE._E00) */
#define ACPI_SCI_IRQ       9
#define ACPI_S5_SLP_TYP    5           /* the value \_S5 declares */
#define ACPI_PM1_PWRBTN_STS (1u << 8)
#define ACPI_PM1_PWRBTN_EN  (1u << 8)
#define ACPI_PM1_SLP_EN     (1u << 13)

/* Interrupt wiring the MP table and the MADT describe (as on PCs): ISA IRQ 0,
 * the PIT, arrives on IOAPIC pin 2 (MADT override IRQ0 -> GSI 2), the 8259's
 * ExtINT on pin 0, every other ISA IRQ n on pin n; the SCI (IRQ 9) is
 * level-triggered, active high. KVM's default GSI routing sends the PIT's
 * GSI 0 to IOAPIC pin 0, so the VM must install boot_set_irq_routing()'s
 * table after KVM_CREATE_IRQCHIP for the tables to be true. */
#define BOOT_PIT_IOAPIC_PIN 2
#define BOOT_IOAPIC_PINS 24

/* Legacy ports and their ISA interrupt lines: the first 16550 (COM1, then
 * COM2..4 on the usual ports), the i8042 keyboard controller. */
#define SERIAL_COM1_PORT 0x3f8
#define SERIAL_COM1_IRQ 4
#define I8042_DATA_PORT 0x60
#define I8042_COMMAND_PORT 0x64
#define I8042_KBD_IRQ 1
#define I8042_AUX_IRQ 12

/* virtio-mmio devices take, in order, the ISA lines nothing else uses (0-4,
 * 8, 9 and 12 are the PIT's, the cascade's, the serial ports', the RTC's,
 * the SCI's and the i8042's). */
#define VIRTIO_MMIO_GSIS { 5, 6, 7, 10, 11, 13, 14, 15 }
