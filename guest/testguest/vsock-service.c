#include "vsock-service.h"

#include <stddef.h>

#include "boot_params.h"
#include "clock.h"
#include "commands.h"
#include "io.h"
#include "libc.h"
#include "netdrv.h"
#include "notify.h"
#include "pattern.h"
#include "readiness.h"
#include "rngdrv.h"
#include "serial.h"
#include "vsockdrv.h"

#define DEFAULT_READY_PORT 1024
#define DEFAULT_CMD_PORT 5000
/* Spin (lowest latency) until the link was quiet this long, then sleep in
 * slices: a sleeping guest answers within one slice, and a spinning vCPU
 * would take a host core from the shim's own threads. */
#define QUIET_MS 5
#define SLEEP_SLICE_MS 1
/* After a long quiet spell, longer slices: an idle guest then costs the host
 * about as little as one without vsock, and answers within 5 ms. */
#define LONG_QUIET_MS 1000
#define LONG_SLEEP_SLICE_MS 5

static struct {
    bool active, ready;
    const uint8_t *boot_params;
    uint64_t tsc_khz;
    uint32_t ready_port, cmd_port, notify_port; /* notify_port 0: the agent's READY protocol */
    struct readiness readiness;
    uint64_t last_traffic_tsc;
} service;

/* Value of "name=<number>" on the command line, or fallback. (cmdline.c parses
 * the guest's other options; these two belong to the vsock side.) */
static uint64_t cmdline_number(const char *cmdline, const char *name, uint64_t fallback)
{
    size_t n = strlen(name);
    for (const char *p = cmdline; *p; p++) {
        if ((p != cmdline && p[-1] != ' ') || p[n] != '=')
            continue;
        size_t i = 0;
        while (i < n && p[i] == name[i])
            i++;
        if (i < n)
            continue;
        const char *value = p + n + 1;
        size_t len = 0;
        while (value[len] && value[len] != ' ')
            len++;
        uint64_t v;
        if (parse_u64(value, len, &v) && v > 0 && v <= UINT32_MAX)
            return v;
        serial_puts("vsnap-testguest: warning: bad ");
        serial_puts(name);
        serial_puts(", using the default\n");
        return fallback;
    }
    return fallback;
}

bool vsock_service_init(const uint8_t *boot_params, uint64_t tsc_khz)
{
    const char *cmdline = boot_params_cmdline(boot_params);
    service.boot_params = boot_params;
    service.tsc_khz = tsc_khz ? tsc_khz : 1000000;
    service.ready_port = (uint32_t)cmdline_number(cmdline, "vsnap.ready_port", DEFAULT_READY_PORT);
    service.cmd_port = (uint32_t)cmdline_number(cmdline, "vsnap.cmd_port", DEFAULT_CMD_PORT);
    service.notify_port = (uint32_t)cmdline_number(cmdline, "vsnap.notify_port", 0);
    rng_init(cmdline, service.tsc_khz); /* the command port's RNG */
    if (!vsock_init(cmdline, service.tsc_khz))
        return false;
    service.active = true;
    serial_puts("vsnap-testguest: vsock cid=");
    serial_put_dec(vsock_guest_cid());
    serial_puts("\n");
    return true;
}

bool vsock_service_active(void)
{
    return service.active;
}

void vsock_service_ready(const void *working_set, uint64_t len, uint64_t touch)
{
    if (!service.active)
        return;
    service.ready = true;
    if (service.notify_port) {
        notify_start(service.notify_port); /* systemd's way instead of the agent's */
    } else {
        uint64_t boot_id = pattern_mix(rdtsc() ^ vsock_guest_cid());
        readiness_start(&service.readiness, service.ready_port, service.tsc_khz, boot_id);
        service.readiness.working_set = working_set;
        service.readiness.working_set_len = len;
        service.readiness.working_set_touch = touch < len ? touch : 0;
    }
    commands_start(service.cmd_port, service.boot_params);
    vsock_poll();
}

bool vsock_service_poll(void)
{
    if (!service.active)
        return false;
    bool busy = vsock_poll() > 0;
    busy |= net_poll();
    if (service.ready) {
        if (service.notify_port)
            notify_poll();
        else
            readiness_poll(&service.readiness);
        commands_poll();
    }
    return busy;
}

void vsock_service_busy_wait(const struct clock *clock, uint64_t ms)
{
    uint64_t end = rdtsc() + clock_ms_to_ticks(clock, ms);
    while (rdtsc() < end) {
        vsock_poll();
        net_poll();
    }
}

void vsock_service_idle(const struct clock *clock, uint64_t ms)
{
    uint64_t now = rdtsc();
    uint64_t end = now + clock_ms_to_ticks(clock, ms);
    uint64_t quiet = clock_ms_to_ticks(clock, QUIET_MS);
    uint64_t long_quiet = clock_ms_to_ticks(clock, LONG_QUIET_MS);
    while ((now = rdtsc()) < end) {
        if (vsock_service_poll())
            service.last_traffic_tsc = now;
        else if (now - service.last_traffic_tsc > long_quiet)
            clock_sleep_ms(clock, LONG_SLEEP_SLICE_MS);
        else if (now - service.last_traffic_tsc > quiet)
            clock_sleep_ms(clock, SLEEP_SLICE_MS);
    }
}
