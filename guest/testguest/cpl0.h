/* The kernel-mode (CPL0) stub: the only code that runs in kernel mode, where
 * KVM's instruction emulator executes it here (slowly, and without SSE, xsave,
 * int3 and more). So: integer C only, few instructions, no loops over RAM.
 */
#pragma once

#include <stdint.h>

/* What CPL0 learned for CPL3. The frequencies come from CPUID leaf 0x40000010
 * (EAX: TSC kHz, EBX: LAPIC timer kHz; 0 if the VMM does not set them), read at
 * CPL0 on purpose: on this host CPUID at CPL3 runs without KVM and answers from
 * the host's CPUID, not from the table the shim gave KVM. */
struct cpl0_info {
    uint32_t tsc_khz;
    uint32_t lapic_khz;
};

/* Install the guest's own GDT (kernel and user segments, TSS), TSS, IDT and
 * page tables (identity map of every e820 range, the virtio-mmio window and the
 * LAPIC, user-accessible), set CR0/CR4 for SSE at CPL3 and arm the LAPIC for
 * cpl0_halt. Called from entry.S with the boot stack; entry.S then drops to
 * CPL3 and hands the returned info to testguest_main. */
const struct cpl0_info *cpl0_setup(const uint8_t *boot_params);

/* From CPL3: halt the vCPU (so an idle guest costs the host nothing) until the
 * LAPIC timer, started with lapic_count, or any other interrupt wakes it.
 *
 * It is the guest's only system call, and it is made with UD2 at one known
 * address (isr.S): the #UD handler recognises it, runs "start timer; sti; hlt;
 * cli" and returns past it. The usual ways do not work on this host (kvm_pvm):
 * "int $n" from CPL3 raises #UD, and SYSCALL enters PVM's native supervisor
 * mode, where STI faults. Exceptions from CPL3 do reach the IDT normally. */
void cpl0_halt(uint32_t lapic_count);

/* NMIs taken (isr.S counts them at CPL0; CPL3 reads it: every page is a
 * user page). */
extern volatile uint64_t cpl0_nmi_count;

/* From CPL3 (the page tables are user pages): clear the accessed and dirty
 * bits of the 2 MiB pages over [start, end). On a shadow-paging host, KVM
 * maps a page writable at the guest's first read when the guest's entry says
 * dirty, which makes a read of a shared (private file) mapping a copy; with
 * the bits clear, a restored clone's reads stay reads to the host. The
 * guest's own TLB may keep the old bits, which only this guest could see:
 * KVM's shadow entries are rebuilt from the tables it writes here. */
void cpl0_clean_pages(uint64_t start, uint64_t end);

/* What isr.S pushes for every vector, lowest address first. */
struct trap_frame {
    uint64_t vector;
    uint64_t error_code; /* 0 for vectors without one */
    uint64_t rip, cs, rflags, rsp, ss;
};

/* Report an exception on the serial port and power off. Never returns. */
void cpl0_exception(const struct trap_frame *frame) __attribute__((noreturn));
