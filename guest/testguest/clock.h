/* Time from the TSC. Its frequency comes from CPUID leaf 0x40000010 EAX (TSC
 * kHz, the "timing information" leaf the shim fills in).
 */
#pragma once

#include <stdint.h>

#define CLOCK_FALLBACK_KHZ 1000000ull /* 1 GHz guess when the leaf is missing */

struct clock {
    uint64_t tsc_khz;
};

/* tsc_khz: what CPUID leaf 0x40000010 said (read at CPL0, see cpl0.h). Prints a
 * warning and uses the fallback if it is not plausible. */
void clock_init(struct clock *clock, uint64_t tsc_khz);

uint64_t clock_ms_to_ticks(const struct clock *clock, uint64_t ms);

/* Spin (without port I/O) until ms milliseconds have passed. */
void clock_busy_wait_ms(const struct clock *clock, uint64_t ms);
