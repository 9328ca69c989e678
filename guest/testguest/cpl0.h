/* The kernel-mode (CPL0) stub: the only code that runs in kernel mode, where
 * KVM's instruction emulator executes it here (slowly, and without SSE, xsave,
 * int3 and more). So: integer C only, few instructions, no loops over RAM.
 */
#pragma once

#include <stdint.h>

/* Install the guest's own GDT (kernel and user segments, TSS), TSS, IDT and
 * page tables (identity map of every e820 range plus the virtio-mmio window,
 * user-accessible), and set CR0/CR4 for SSE at CPL3. Called from entry.S with
 * the boot stack; entry.S then drops to CPL3. */
void cpl0_setup(const uint8_t *boot_params);

/* CPUID leaf 0x40000010 EAX (TSC kHz, 0 if the VMM does not set it). Read at
 * CPL0 on purpose: on this host CPUID at CPL3 runs without KVM and answers from
 * the host's CPUID, not from the table the shim gave KVM. */
uint32_t cpl0_read_tsc_khz(void);

/* What isr.S pushes for every vector, lowest address first. */
struct trap_frame {
    uint64_t vector;
    uint64_t error_code; /* 0 for vectors without one */
    uint64_t rip, cs, rflags, rsp, ss;
};

/* Report an exception on the serial port and power off. Never returns. */
void cpl0_exception(const struct trap_frame *frame) __attribute__((noreturn));
