/* PVH entry (Xen's x86 HVM direct boot ABI), so that QEMU's "-kernel" (and
 * libvirt's direct kernel boot with the QEMU driver) boots this same ELF. QEMU
 * only boots an uncompressed ELF that carries a XEN_ELFNOTE_PHYS32_ENTRY note;
 * the vsnap shim ignores the note and keeps entering at _start (e_entry) through
 * the Linux 64-bit boot protocol.
 *
 * State on entry: 32-bit protected mode, paging off, flat CS/DS/ES/SS,
 * interrupts off, no stack, EBX = physical address of struct hvm_start_info.
 * This runs in KVM's instruction emulator here (CPL0), so it stays integer-only
 * and short: it turns hvm_start_info into the few parts of a Linux boot_params
 * the guest reads (command line pointer, e820 table), in a page of its own below
 * 16 MiB, maps the first 16 MiB (all the boot path touches until cpl0_setup
 * loads the real page tables), enters long mode and jumps to _start with
 * RSI = that boot_params, exactly as the shim would.
 */
#include "layout.h"

#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define HVM_START_MAGIC 0x336ec578

/* struct hvm_start_info (Xen's xen/include/public/arch-x86/hvm/start_info.h) */
#define SI_MAGIC 0
#define SI_VERSION 4
#define SI_CMDLINE_PADDR 24
#define SI_MEMMAP_PADDR 40   /* version >= 1 */
#define SI_MEMMAP_ENTRIES 48 /* version >= 1 */
#define MEMMAP_ENTRY_SIZE 24 /* u64 addr, u64 size, u32 type, u32 reserved */

/* struct boot_params offsets, as boot_params.h (a C header) reads them. */
#define BP_E820_ENTRIES 0x1e8
#define BP_CMD_LINE_PTR 0x228
#define BP_E820_TABLE 0x2d0
#define BP_E820_MAX 128
#define E820_ENTRY_SIZE 20

#define PAGE_SIZE 4096
#define PAGE_2M 0x200000
#define PTE_PRESENT_WRITE 0x3
#define PTE_HUGE 0x80
#define CR0_PE 0x1
#define CR0_PG 0x80000000
#define CR4_PAE 0x20
#define MSR_EFER 0xc0000080
#define EFER_LME 0x100
#define COM1 0x3f8

/* The note QEMU looks for (in a PT_NOTE segment, see linker.ld). The
 * descriptor is 8 bytes: QEMU reads the address as a native word from a 64-bit
 * ELF; the upper half is zero, so a 32-bit reader sees the same value. */
    .section .note.Xen, "a", @note
    .balign 4
    .long 4                         /* namesz: "Xen\0" */
    .long 8                         /* descsz */
    .long XEN_ELFNOTE_PHYS32_ENTRY
    .asciz "Xen"
    .balign 4
    .quad pvh_start32

    .section .text.pvh, "ax"
    .code32
    .globl pvh_start32
pvh_start32:
    cli
    cld
    cmpl $HVM_START_MAGIC, SI_MAGIC(%ebx)
    jne bad_start_info
    cmpl $1, SI_VERSION(%ebx)       /* version 0 has no memory map */
    jb bad_start_info
    /* Paging is off: only the low 4 GiB are reachable. */
    cmpl $0, SI_CMDLINE_PADDR + 4(%ebx)
    jne bad_start_info
    cmpl $0, SI_MEMMAP_PADDR + 4(%ebx)
    jne bad_start_info

    /* Zero the boot pages (boot_params, command line, page tables): after a
     * reset the RAM holds whatever the last run left. */
    movl $pvh_boot_pages, %edi
    movl $(pvh_boot_pages_end - pvh_boot_pages) / 4, %ecx
    xorl %eax, %eax
    rep stosl

    /* Command line: copied next to boot_params (at most a page, NUL kept), so
     * it is readable wherever the loader put it. */
    movl $pvh_cmdline, pvh_boot_params + BP_CMD_LINE_PTR
    movl SI_CMDLINE_PADDR(%ebx), %esi
    testl %esi, %esi
    jz 2f
    movl $pvh_cmdline, %edi
    movl $PAGE_SIZE - 1, %ecx
1:  lodsb
    testb %al, %al
    jz 2f
    stosb
    loop 1b
2:
    /* e820: the PVH memory map has the same addr/size/type, 24-byte entries. */
    movl SI_MEMMAP_ENTRIES(%ebx), %ecx
    cmpl $BP_E820_MAX, %ecx
    jbe 3f
    movl $BP_E820_MAX, %ecx
3:  movb %cl, pvh_boot_params + BP_E820_ENTRIES
    movl SI_MEMMAP_PADDR(%ebx), %esi
    movl $pvh_boot_params + BP_E820_TABLE, %edi
    jecxz 5f
4:  movsl                           /* addr */
    movsl
    movsl                           /* size */
    movsl
    movsl                           /* type */
    addl $MEMMAP_ENTRY_SIZE - E820_ENTRY_SIZE, %esi
    loop 4b
5:
    /* Identity map of the first 16 MiB with 2 MiB pages. */
    movl $pvh_pd, %edi
    movl $PTE_PRESENT_WRITE | PTE_HUGE, %eax
    movl $GUEST_PRIVATE_END / PAGE_2M, %ecx
6:  movl %eax, (%edi)
    addl $PAGE_2M, %eax
    addl $8, %edi
    loop 6b
    movl $pvh_pdpt + PTE_PRESENT_WRITE, pvh_pml4
    movl $pvh_pd + PTE_PRESENT_WRITE, pvh_pdpt

    /* Long mode: PAE, CR3, EFER.LME, then paging; a far jump into the 64-bit
     * code segment leaves compatibility mode. */
    movl $pvh_pml4, %eax
    movl %eax, %cr3
    movl %cr4, %eax
    orl $CR4_PAE, %eax
    movl %eax, %cr4
    movl $MSR_EFER, %ecx
    rdmsr
    orl $EFER_LME, %eax
    wrmsr
    lgdt pvh_gdt_pointer
    movl %cr0, %eax
    orl $CR0_PG | CR0_PE, %eax
    movl %eax, %cr0
    ljmp $SEL_KERNEL_CODE, $pvh_start64

/* Not a PVH loader we understand: say so on COM1 (no stack, no memory) and stop. */
bad_start_info:
    movl $pvh_error_message, %esi
    movw $COM1, %dx
7:  lodsb
    testb %al, %al
    jz 8f
    outb %al, %dx
    jmp 7b
8:  hlt
    jmp 8b

    .code64
pvh_start64:
    movl $SEL_KERNEL_DATA, %eax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movl $pvh_boot_params, %esi
    jmp _start

    .section .rodata
pvh_error_message:
    .asciz "vsnap-testguest: error: PVH entry without hvm_start_info version >= 1 below 4 GiB\n"

/* The boot protocol's selectors: 0x10 code (64-bit), 0x18 data. cpl0_setup
 * replaces this GDT with its own. */
    .balign 8
pvh_gdt:
    .quad 0
    .quad 0
    .quad 0x00af9a000000ffff        /* 0x10: 64-bit code, DPL0 */
    .quad 0x00cf92000000ffff        /* 0x18: data, DPL0 */
pvh_gdt_end:
pvh_gdt_pointer:
    .word pvh_gdt_end - pvh_gdt - 1
    .long pvh_gdt

/* Written before CPL3 runs and read by it afterwards, so in .bss.cpl0, which
 * entry.S's clearing of .bss leaves alone. */
    .section .bss.cpl0, "aw", @nobits
    .balign PAGE_SIZE
pvh_boot_pages:
pvh_boot_params:
    .skip PAGE_SIZE
pvh_cmdline:
    .skip PAGE_SIZE
pvh_pml4:
    .skip PAGE_SIZE
pvh_pdpt:
    .skip PAGE_SIZE
pvh_pd:
    .skip PAGE_SIZE
pvh_boot_pages_end:
