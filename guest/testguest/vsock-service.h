/* The test guest's vsock side: readiness announcement and the command port.
 *
 * main.c calls vsock_service_init() early (it sets up the device, which costs
 * a few dozen register exits), vsock_service_ready() at the instant the guest
 * is ready, and vsock_service_poll() from its idle loop, as often as it can.
 * Options: vsnap.ready_port (default 1024), vsnap.cmd_port (default 5000).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* false if the VM has no vsock device (the guest then runs without). */
bool vsock_service_init(const uint8_t *boot_params, uint64_t tsc_khz);
bool vsock_service_active(void);
/* Announce READY on the readiness port and start serving the command port.
 * [working_set, +len) is read back (every page) after each transport reset,
 * before READY goes out again: a restored guest's agent needs its working set
 * before it can serve, and that is what restore benchmarks must include. */
void vsock_service_ready(const void *working_set, uint64_t len, uint64_t touch);
/* Busy for ms milliseconds (the guest's start-up work), still taking what
 * the device delivers, as a guest kernel would: a connection to a port that
 * nobody listens on yet is refused at once rather than left hanging. */
struct clock;
void vsock_service_busy_wait(const struct clock *clock, uint64_t ms);
/* Poll once; true if packets arrived. */
bool vsock_service_poll(void);
/* Serve vsock for ms milliseconds: spin while there is traffic, sleep in
 * short slices (LAPIC timer) when there has been none for a while. */
void vsock_service_idle(const struct clock *clock, uint64_t ms);
