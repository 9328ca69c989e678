/* The CPL3 part of the test guest: report boot, act on the command line, say
 * "ready" with the checksum of what it filled, then idle and watch the ACPI
 * power button.
 */
#include <stdbool.h>
#include <stdint.h>

#include "acpi.h"
#include "blkdrv.h"
#include "boot_params.h"
#include "clock.h"
#include "cmdline.h"
#include "consoledrv.h"
#include "cpl0.h"
#include "gen.h"
#include "io.h"
#include "keyboard.h"
#include "layout.h"
#include "netdrv.h"
#include "pattern.h"
#include "serial.h"
#include "vsock-service.h"

#define MIB (1ull << 20)
#define POWER_BUTTON_POLL_MS 10
/* How long to wait for the VMM to act on a power-off or reset request. */
#define STOP_GRACE_MS 2000

struct guest {
    const uint8_t *boot_params;
    struct options opts;
    struct clock clock;
};

void testguest_main(const uint8_t *boot_params, const struct cpl0_info *info) __attribute__((noreturn));

/* Writes the request, then waits; if the VMM did not stop us, says so and spins
 * (no HLT at CPL3). */
static void __attribute__((noreturn)) stop(const struct guest *g, void (*request)(void), const char *what)
{
    request();
    clock_sleep_ms(&g->clock, STOP_GRACE_MS);
    serial_puts("vsnap-testguest: error: the VMM ignored the ");
    serial_puts(what);
    serial_puts(" request\n");
    for (;;)
        cpu_relax();
}

static void __attribute__((noreturn)) power_off(const struct guest *g)
{
    stop(g, acpi_request_power_off, "ACPI S5 power-off");
}

/* Fill the region and return its checksum, read back from RAM. */
static bool fill_region(const struct guest *g, uint64_t *sum)
{
    uint64_t mib = g->opts.fill_mib;
    *sum = FNV1A64_OFFSET_BASIS;
    if (mib == 0)
        return true;
    if (mib > UINT64_MAX / MIB || !boot_params_is_ram(g->boot_params, GUEST_FILL_BASE, mib * MIB)) {
        serial_puts("vsnap-testguest: error: vsnap.fill_mib=");
        serial_put_dec(mib);
        serial_puts(": the region from 16 MiB is not all RAM\n");
        return false;
    }
    uint64_t *base = (uint64_t *)(uintptr_t)GUEST_FILL_BASE;
    pattern_fill(base, 0, mib * MIB / 8, g->opts.seed);
    *sum = fnv1a64_update(FNV1A64_OFFSET_BASIS, base, mib * MIB);
    return true;
}

/* A line every heartbeat_ms shows from outside that the guest runs (and stops
 * while paused). */
static void heartbeat(const struct guest *g, uint64_t *next_tsc, uint64_t *count)
{
    uint64_t now = rdtsc();
    if (!g->opts.heartbeat_ms || now < *next_tsc)
        return;
    /* From now, not from the missed deadline: no burst of ticks after a pause. */
    *next_tsc = now + clock_ms_to_ticks(&g->clock, g->opts.heartbeat_ms);
    serial_puts("vsnap-testguest: tick ");
    serial_put_dec(++*count);
    serial_puts("\n");
}

/* Without vsock: poll the network alone, spinning while frames come and
 * sleeping in 1 ms slices once it has been quiet for 5 ms. */
static void net_idle(const struct clock *clock, uint64_t ms)
{
    uint64_t now = rdtsc(), end = now + clock_ms_to_ticks(clock, ms), last = now;
    while ((now = rdtsc()) < end) {
        if (net_poll())
            last = now;
        else if (now - last > clock_ms_to_ticks(clock, 5))
            clock_sleep_ms(clock, 1);
    }
}

/* With vsnap.gen_mib the loop never sleeps: every iteration polls the
 * rings once and rewrites the pages due (gen.h), for POWER_BUTTON_POLL_MS. */
static void gen_busy(const struct clock *clock)
{
    uint64_t end = rdtsc() + clock_ms_to_ticks(clock, POWER_BUTTON_POLL_MS);
    while (rdtsc() < end) {
        if (vsock_service_active())
            vsock_service_poll();
        else if (net_active())
            net_poll();
        gen_step();
    }
}

static void __attribute__((noreturn)) idle(const struct guest *g)
{
    uint64_t next_tick = rdtsc() + clock_ms_to_ticks(&g->clock, g->opts.heartbeat_ms);
    uint64_t ticks = 0;
    for (;;) {
        gen_step();
        if (gen_active())
            gen_busy(&g->clock);
        else if (vsock_service_active()) /* vsock: poll the rings while idle (the network's too) */
            vsock_service_idle(&g->clock, POWER_BUTTON_POLL_MS);
        else if (net_active())
            net_idle(&g->clock, POWER_BUTTON_POLL_MS);
        else
            clock_sleep_ms(&g->clock, POWER_BUTTON_POLL_MS);
        if (acpi_power_button_pressed()) {
            serial_log("power button, powering off");
            power_off(g);
        }
        keyboard_poll();
        heartbeat(g, &next_tick, &ticks);
    }
}

void testguest_main(const uint8_t *boot_params, const struct cpl0_info *info)
{
    struct guest g = { .boot_params = boot_params };

    /* Before the first line, so the console carries every line. */
    console_init(boot_params_cmdline(boot_params));
    serial_log("booted");
    /* The clock first: power_off() needs it even when the command line is bad. */
    clock_init(&g.clock, info->tsc_khz, info->lapic_khz, true);
    if (!cmdline_parse(boot_params_cmdline(boot_params), &g.opts))
        power_off(&g);
    g.clock.can_halt = !g.opts.idle_spin;

    uint64_t sum;
    vsock_service_init(boot_params, g.clock.tsc_khz); /* vsock: no-op without the device */
    blk_init(boot_params_cmdline(boot_params), g.clock.tsc_khz); /* disks, for the command port */
    net_init(boot_params_cmdline(boot_params), g.clock.tsc_khz); /* up before "ready" */
    keyboard_init(); /* polled: KEYS on the command port */
    if (!fill_region(&g, &sum) ||
        !gen_init(boot_params, GUEST_FILL_BASE + g.opts.fill_mib * MIB, g.opts.gen_mib, g.opts.gen_mbps, &g.clock))
        power_off(&g);
    if (g.opts.fill_clean)
        cpl0_clean_pages(GUEST_FILL_BASE, GUEST_FILL_BASE + g.opts.fill_mib * MIB);
    if (vsock_service_active()) /* vsock: refuse early connections while busy, as a kernel would */
        vsock_service_busy_wait(&g.clock, g.opts.delay_ms);
    else
        clock_busy_wait_ms(&g.clock, g.opts.delay_ms);
    /* vsock: READY goes out before the (slow) serial line. The filled region
     * (or vsnap.ws_mib of it) is the guest's working set: after a restore it
     * is read back before READY. */
    vsock_service_ready((const void *)(uintptr_t)GUEST_FILL_BASE, g.opts.fill_mib * MIB, g.opts.ws_mib * MIB);

    serial_puts("vsnap-testguest: ready sum=");
    serial_put_hex64(sum);
    serial_puts("\n");

    if (g.opts.halt_after_ready) {
        serial_log("halt_after_ready, powering off");
        power_off(&g);
    }
    if (g.opts.fault_after_ready) {
        serial_log("fault_after_ready, reading unmapped memory");
        (void)*(volatile uint64_t *)(uintptr_t)GUEST_UNMAPPED_ADDR; /* #PF: cpl0_exception powers off */
    }
    if (g.opts.reboot_after_ready) {
        serial_log("reboot_after_ready, resetting");
        stop(&g, i8042_request_reset, "i8042 reset");
    }
    idle(&g);
}
