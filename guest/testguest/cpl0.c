#include "cpl0.h"

#include <stdbool.h>

#include "acpi.h"
#include "boot_params.h"
#include "io.h"
#include "layout.h"
#include "serial.h"

/* Page tables: one PML4, one PDPT (512 GiB), one page directory (1 GiB of 2 MiB
 * pages) per GiB of guest-physical space. The shim allows 64 GiB of RAM, which
 * ends at 65 GiB because of the hole below 4 GiB. */
#define PT_MAX_GIB 65
#define PT_ENTRIES 512
#define PAGE_2M (1ull << 21)
#define GIB (1ull << 30)

#define PTE_PRESENT (1ull << 0)
#define PTE_WRITE (1ull << 1)
#define PTE_USER (1ull << 2)
#define PTE_PWT (1ull << 3)
#define PTE_PCD (1ull << 4)
#define PTE_ACCESSED (1ull << 5)
#define PTE_DIRTY (1ull << 6)
#define PTE_HUGE (1ull << 7)
#define PTE_TABLE (PTE_PRESENT | PTE_WRITE | PTE_USER)
#define PTE_RAM_2M (PTE_PRESENT | PTE_WRITE | PTE_USER | PTE_HUGE)
#define PTE_MMIO_2M (PTE_RAM_2M | PTE_PWT | PTE_PCD)

#define IST_STACK_SIZE 4096
#define IDT_VECTORS 256
#define ISR_STUB_SIZE 16 /* isr.S aligns each vector's stub to this */

#define CR0_MP (1ull << 1)
#define CR0_EM (1ull << 2)
#define CR0_TS (1ull << 3)
#define CR0_NW (1ull << 29)
#define CR0_CD (1ull << 30)
#define CR4_OSFXSR (1ull << 9)
#define CR4_OSXMMEXCPT (1ull << 10)
#define CR4_SMEP (1ull << 20)
#define CR4_SMAP (1ull << 21)

/* Local APIC (xAPIC MMIO), for the one-shot timer that ends cpl0_halt. */
#define LAPIC_BASE 0xfee00000ull
#define LAPIC_SVR 0xf0            /* spurious vector register */
#define LAPIC_SVR_ENABLE (1u << 8)
#define LAPIC_LVT_TIMER 0x320
#define LAPIC_LVT_LINT0 0x350
#define LAPIC_LVT_MASKED (1u << 16)
#define LAPIC_TIMER_DIVIDE 0x3e0
#define LAPIC_DIVIDE_BY_1 0xb
#define LAPIC_TIMER_VECTOR 0x20   /* isr.S lapic_timer_isr */
#define LAPIC_SPURIOUS_VECTOR 0xff
#define VECTOR_INVALID_OPCODE 6   /* also cpl0_halt's entry, see cpl0.h */
#define VECTOR_NMI 2               /* counted: cpl0_nmi_count */

struct page_tables {
    uint64_t pml4[PT_ENTRIES];
    uint64_t pdpt[PT_ENTRIES];
    uint64_t pd[PT_MAX_GIB][PT_ENTRIES];
};

struct tss64 {
    uint32_t reserved0;
    uint64_t rsp[3];
    uint64_t reserved1;
    uint64_t ist[7];
    uint64_t reserved2;
    uint16_t reserved3;
    uint16_t iomap_base;
} __attribute__((packed));

/* All ports allowed (bits clear), plus the 0xff byte the CPU wants past the end.
 * IOPL=3 alone is not enough here: KVM emulates port I/O from CPL3 and, on this
 * host, checks the TSS bitmap (docs/host-limits.md). A TSS whose bitmap only
 * happens to read as zeros, as one left at address 0 does, hides that. */
struct tss_with_iomap {
    struct tss64 tss;
    uint8_t iomap[65536 / 8];
    uint8_t iomap_end;
} __attribute__((packed));

struct idt_gate {
    uint64_t low, high;
};

struct descriptor_pointer {
    uint16_t limit;
    uint64_t base;
} __attribute__((packed));

/* The hardware structures the CPU reads; written once here, before CPL3 starts.
 * They live in .bss.cpl0 (outside the .bss that CPL3 clears at start). */
struct cpl0_state {
    struct page_tables pt;
    struct idt_gate idt[IDT_VECTORS];
    uint64_t gdt[8];
    struct tss_with_iomap tss;
    uint8_t ist_stack[IST_STACK_SIZE] __attribute__((aligned(16)));
    struct cpl0_info info;
} __attribute__((aligned(4096)));

static struct cpl0_state cpl0 __attribute__((section(".bss.cpl0")));

/* Stubs in isr.S, ISR_STUB_SIZE bytes apart, one per vector, and the handlers
 * that replace four of them. */
extern const char isr_stubs[];
extern const char lapic_timer_isr[], spurious_isr[], invalid_opcode_isr[], nmi_isr[];

volatile uint64_t cpl0_nmi_count;
/* Top of the stack exceptions run on (RSP0), from the linker script. */
extern char kernel_stack_top[];

static uint64_t gdt_tss_low(uint64_t base, uint32_t limit)
{
    return (limit & 0xffffull) | ((base & 0xffffffull) << 16) | (0x89ull << 40) |
           ((uint64_t)(limit >> 16 & 0xf) << 48) | ((base >> 24 & 0xff) << 56);
}

static void setup_gdt_and_tss(void)
{
    struct tss64 *t = &cpl0.tss.tss;
    *t = (struct tss64){ 0 };
    t->rsp[0] = (uint64_t)kernel_stack_top;
    t->ist[0] = (uint64_t)(cpl0.ist_stack + IST_STACK_SIZE);
    t->iomap_base = sizeof(struct tss64);
    uint64_t *iomap = (uint64_t *)cpl0.tss.iomap;
    for (unsigned i = 0; i < sizeof(cpl0.tss.iomap) / 8; i++)
        iomap[i] = 0;
    cpl0.tss.iomap_end = 0xff;

    uint64_t tss = (uint64_t)&cpl0.tss;
    cpl0.gdt[0] = 0;
    cpl0.gdt[1] = 0;
    cpl0.gdt[SEL_KERNEL_CODE >> 3] = 0x00af9b000000ffffull; /* 64-bit code, DPL0 */
    cpl0.gdt[SEL_KERNEL_DATA >> 3] = 0x00cf93000000ffffull; /* data, DPL0 */
    cpl0.gdt[SEL_USER_CODE >> 3] = 0x00affb000000ffffull;   /* 64-bit code, DPL3 */
    cpl0.gdt[SEL_USER_DATA >> 3] = 0x00cff3000000ffffull;   /* data, DPL3 */
    cpl0.gdt[SEL_TSS >> 3] = gdt_tss_low(tss, sizeof(struct tss_with_iomap) - 1);
    cpl0.gdt[(SEL_TSS >> 3) + 1] = tss >> 32;

    struct descriptor_pointer gdtr = { sizeof(cpl0.gdt) - 1, (uint64_t)cpl0.gdt };
    __asm__ volatile("lgdt %0\n\t"
                     "pushq %1\n\t"
                     "leaq 1f(%%rip), %%rax\n\t"
                     "pushq %%rax\n\t"
                     "lretq\n"
                     "1:\n\t"
                     "movl %2, %%eax\n\t"
                     "movw %%ax, %%ds\n\t"
                     "movw %%ax, %%es\n\t"
                     "movw %%ax, %%ss\n\t"
                     "xorl %%eax, %%eax\n\t"
                     "movw %%ax, %%fs\n\t"
                     "movw %%ax, %%gs\n\t"
                     "movw %3, %%ax\n\t"
                     "ltr %%ax"
                     :
                     : "m"(gdtr), "i"(SEL_KERNEL_CODE), "i"(SEL_KERNEL_DATA), "i"(SEL_TSS)
                     : "rax", "memory");
}

static bool vector_uses_ist(unsigned vector)
{
    return vector == 2 || vector == 8 || vector == 18; /* NMI, #DF, #MC */
}

/* Present 64-bit interrupt gate (IF cleared on entry), callable from rings <= dpl. */
static void set_gate(unsigned vector, const void *handler, unsigned dpl)
{
    uint64_t h = (uint64_t)handler;
    uint64_t ist = vector_uses_ist(vector) ? 1 : 0;
    uint64_t type = 0x8e | (uint64_t)dpl << 5;
    cpl0.idt[vector].low = (h & 0xffff) | ((uint64_t)SEL_KERNEL_CODE << 16) | (ist << 32) |
                           (type << 40) | ((h >> 16 & 0xffff) << 48);
    cpl0.idt[vector].high = h >> 32;
}

static void setup_idt(void)
{
    for (unsigned v = 0; v < IDT_VECTORS; v++)
        set_gate(v, isr_stubs + (uint64_t)v * ISR_STUB_SIZE, 0);
    set_gate(LAPIC_TIMER_VECTOR, lapic_timer_isr, 0);
    set_gate(LAPIC_SPURIOUS_VECTOR, spurious_isr, 0);
    set_gate(VECTOR_INVALID_OPCODE, invalid_opcode_isr, 0);
    set_gate(VECTOR_NMI, nmi_isr, 0);

    struct descriptor_pointer idtr = { sizeof(cpl0.idt) - 1, (uint64_t)cpl0.idt };
    __asm__ volatile("lidt %0" : : "m"(idtr) : "memory");
}

static void map_range(uint64_t start, uint64_t end, uint64_t flags)
{
    uint64_t limit = (uint64_t)PT_MAX_GIB * GIB;
    if (end > limit)
        end = limit;
    for (uint64_t addr = start & ~(PAGE_2M - 1); addr < end; addr += PAGE_2M)
        cpl0.pt.pd[addr / GIB][addr % GIB / PAGE_2M] = addr | flags;
}

void cpl0_clean_pages(uint64_t start, uint64_t end)
{
    uint64_t limit = (uint64_t)PT_MAX_GIB * GIB;
    for (uint64_t addr = start & ~(PAGE_2M - 1); addr < end && addr < limit; addr += PAGE_2M) {
        volatile uint64_t *pde = &cpl0.pt.pd[addr / GIB][addr % GIB / PAGE_2M];
        *pde &= ~(PTE_ACCESSED | PTE_DIRTY);
    }
}

/* Highest GiB (exclusive) any e820 entry or the MMIO window touches. */
static uint64_t gib_needed(const struct e820_entry *e, unsigned n)
{
    uint64_t end = GUEST_MMIO_END;
    for (unsigned i = 0; i < n; i++) {
        if (e[i].addr + e[i].size > end)
            end = e[i].addr + e[i].size;
    }
    uint64_t gib = (end + GIB - 1) / GIB;
    if (gib < LAPIC_BASE / GIB + 1)
        gib = LAPIC_BASE / GIB + 1;
    return gib > PT_MAX_GIB ? PT_MAX_GIB : gib;
}

static void setup_page_tables(const uint8_t *boot_params)
{
    const struct e820_entry *e = boot_params_e820(boot_params);
    unsigned n = boot_params_e820_count(boot_params);
    uint64_t ngib = gib_needed(e, n);

    /* Every entry is written, so nothing depends on the RAM being zero. */
    for (unsigned i = 0; i < PT_ENTRIES; i++) {
        cpl0.pt.pml4[i] = 0;
        cpl0.pt.pdpt[i] = i < ngib ? (uint64_t)cpl0.pt.pd[i] | PTE_TABLE : 0;
    }
    cpl0.pt.pml4[0] = (uint64_t)cpl0.pt.pdpt | PTE_TABLE;
    for (uint64_t g = 0; g < ngib; g++) {
        for (unsigned i = 0; i < PT_ENTRIES; i++)
            cpl0.pt.pd[g][i] = 0;
    }
    for (unsigned i = 0; i < n; i++) {
        if (e[i].size)
            map_range(e[i].addr, e[i].addr + e[i].size, PTE_RAM_2M);
    }
    map_range(GUEST_MMIO_BASE, GUEST_MMIO_END, PTE_MMIO_2M);
    map_range(LAPIC_BASE, LAPIC_BASE + PAGE_2M, PTE_MMIO_2M);

    __asm__ volatile("movq %0, %%cr3" : : "r"((uint64_t)cpl0.pt.pml4) : "memory");
}

static void setup_control_registers(void)
{
    uint64_t cr0, cr4;
    __asm__ volatile("movq %%cr0, %0" : "=r"(cr0));
    cr0 = (cr0 | CR0_MP) & ~(CR0_EM | CR0_TS | CR0_CD | CR0_NW);
    __asm__ volatile("movq %0, %%cr0" : : "r"(cr0) : "memory");

    /* SMEP/SMAP off: every page is a user page, and the exception handlers
     * (CPL0) run from and read them. */
    __asm__ volatile("movq %%cr4, %0" : "=r"(cr4));
    cr4 = (cr4 | CR4_OSFXSR | CR4_OSXMMEXCPT) & ~(CR4_SMEP | CR4_SMAP);
    __asm__ volatile("movq %0, %%cr4" : : "r"(cr4) : "memory");
}

static void lapic_write(unsigned reg, uint32_t value)
{
    *(volatile uint32_t *)(uintptr_t)(LAPIC_BASE + reg) = value;
}

/* Timer: one-shot, divide by 1, started by cpl0_halt. LINT0 masked: the shim
 * wires the PIC there (ExtINT) for Linux, and this guest never programs the PIC,
 * whose vectors would then collide with the exceptions. */
static void setup_lapic(void)
{
    lapic_write(LAPIC_SVR, LAPIC_SVR_ENABLE | LAPIC_SPURIOUS_VECTOR);
    lapic_write(LAPIC_LVT_LINT0, LAPIC_LVT_MASKED);
    lapic_write(LAPIC_TIMER_DIVIDE, LAPIC_DIVIDE_BY_1);
    lapic_write(LAPIC_LVT_TIMER, LAPIC_TIMER_VECTOR);
}

const struct cpl0_info *cpl0_setup(const uint8_t *boot_params)
{
    setup_gdt_and_tss();
    setup_idt();
    setup_control_registers();
    setup_page_tables(boot_params);
    setup_lapic();
    struct cpuid_regs timing = cpuid(CPUID_TIMING_LEAF, 0);
    cpl0.info.tsc_khz = timing.eax;
    cpl0.info.lapic_khz = timing.ebx;
    return &cpl0.info;
}

void cpl0_exception(const struct trap_frame *frame)
{
    uint64_t cr2;
    __asm__ volatile("movq %%cr2, %0" : "=r"(cr2));
    serial_puts("vsnap-testguest: exception ");
    serial_put_dec(frame->vector);
    serial_puts(" error=");
    serial_put_hex64(frame->error_code);
    serial_puts(" rip=");
    serial_put_hex64(frame->rip);
    serial_puts(" rsp=");
    serial_put_hex64(frame->rsp);
    serial_puts(" cr2=");
    serial_put_hex64(cr2);
    serial_puts(", powering off\n");
    acpi_request_power_off();
    for (;;)
        __asm__ volatile("cli; hlt");
}
