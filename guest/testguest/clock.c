#include "clock.h"

#include "cpl0.h"
#include "io.h"
#include "serial.h"

/* A leaf the hypervisor does not define makes KVM answer with the highest basic
 * leaf's contents, so anything outside 1 MHz..100 GHz is taken as "not there". */
#define PLAUSIBLE_KHZ_MIN 1000ull
#define PLAUSIBLE_KHZ_MAX 100000000ull

static uint64_t plausible_khz(uint64_t khz, const char *what)
{
    if (khz >= PLAUSIBLE_KHZ_MIN && khz <= PLAUSIBLE_KHZ_MAX)
        return khz;
    serial_puts("vsnap-testguest: warning: no ");
    serial_puts(what);
    serial_puts(" frequency in CPUID 0x40000010 (");
    serial_put_dec(khz);
    serial_puts(" kHz), assuming 1 GHz\n");
    return CLOCK_FALLBACK_KHZ;
}

void clock_init(struct clock *clock, uint64_t tsc_khz, uint64_t lapic_khz, bool can_halt)
{
    clock->tsc_khz = plausible_khz(tsc_khz, "TSC");
    clock->lapic_khz = can_halt ? plausible_khz(lapic_khz, "LAPIC timer") : CLOCK_FALLBACK_KHZ;
    clock->can_halt = can_halt;
}

uint64_t clock_ms_to_ticks(const struct clock *clock, uint64_t ms)
{
    if (ms > UINT64_MAX / clock->tsc_khz)
        return UINT64_MAX;
    return ms * clock->tsc_khz;
}

void clock_busy_wait_ms(const struct clock *clock, uint64_t ms)
{
    uint64_t ticks = clock_ms_to_ticks(clock, ms);
    uint64_t start = rdtsc();
    while (rdtsc() - start < ticks)
        cpu_relax();
}

/* Whole milliseconds left (rounded up) in LAPIC timer counts, at most 32 bits. */
static uint32_t lapic_count_for(const struct clock *clock, uint64_t tsc_left)
{
    uint64_t ms = tsc_left / clock->tsc_khz + 1;
    if (ms > UINT32_MAX / clock->lapic_khz)
        return UINT32_MAX;
    return (uint32_t)(ms * clock->lapic_khz);
}

void clock_sleep_ms(const struct clock *clock, uint64_t ms)
{
    if (!clock->can_halt) {
        clock_busy_wait_ms(clock, ms);
        return;
    }
    uint64_t ticks = clock_ms_to_ticks(clock, ms);
    uint64_t start = rdtsc();
    /* Any interrupt ends a halt early; the TSC says whether time is up. */
    for (uint64_t elapsed; (elapsed = rdtsc() - start) < ticks;)
        cpl0_halt(lapic_count_for(clock, ticks - elapsed));
}
