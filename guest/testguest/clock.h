/* Time from the TSC, and sleeping with the LAPIC timer. The frequencies come
 * from CPUID leaf 0x40000010 (EAX: TSC kHz, EBX: LAPIC timer kHz), which the
 * shim fills in and CPL0 reads (see cpl0.h).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define CLOCK_FALLBACK_KHZ 1000000ull /* 1 GHz guess when the leaf is missing */

struct clock {
    uint64_t tsc_khz;
    uint64_t lapic_khz;
    bool can_halt; /* false: clock_sleep_ms spins like clock_busy_wait_ms */
};

/* Prints a warning and uses the fallback for a frequency that is not plausible.
 * (KVM's LAPIC timer counts at 1 GHz, so the fallback is exact there.) */
void clock_init(struct clock *clock, uint64_t tsc_khz, uint64_t lapic_khz, bool can_halt);

uint64_t clock_ms_to_ticks(const struct clock *clock, uint64_t ms);

/* Spin (without port I/O) until ms milliseconds have passed: CPU work. */
void clock_busy_wait_ms(const struct clock *clock, uint64_t ms);

/* Let ms milliseconds pass with the vCPU halted, so the host core is free. */
void clock_sleep_ms(const struct clock *clock, uint64_t ms);
