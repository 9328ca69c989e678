#include "clock.h"

#include "io.h"
#include "serial.h"

/* A leaf the hypervisor does not define makes KVM answer with the highest basic
 * leaf's contents, so anything outside 1 MHz..100 GHz is taken as "not there". */
#define PLAUSIBLE_KHZ_MIN 1000ull
#define PLAUSIBLE_KHZ_MAX 100000000ull

void clock_init(struct clock *clock, uint64_t khz)
{
    if (khz < PLAUSIBLE_KHZ_MIN || khz > PLAUSIBLE_KHZ_MAX) {
        serial_puts("vsnap-testguest: warning: no TSC frequency in CPUID 0x40000010 (eax=");
        serial_put_dec(khz);
        serial_puts("), assuming 1 GHz\n");
        khz = CLOCK_FALLBACK_KHZ;
    }
    clock->tsc_khz = khz;
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
