/* systemd's side of the notify port (vsnap.notify_port=P): instead of the
 * agent's READY/ACK, the guest speaks sd_notify over vsock stream
 * connections to the host (CID 2, port P), in the shapes systemd's PID 1
 * produces, so the tests see what a stock guest sends:
 *
 *  1. at ready, one connection, one write, then close:
 *         "READY=1\nSTATUS=vsnap-testguest ready\n"
 *  2. then one connection carrying several notifications, one write each,
 *     among them lines that are not sd_notify at all:
 *         "STATUS=vsnap-testguest serving\n", "WATCHDOG=1\n" (twice),
 *         "X_SYSTEMD_UNIT_ACTIVE=vsnap-testguest.target\n",
 *         "this is not an assignment\n", "lower=case\n"
 *  3. on notify_stopping() (the command port's NOTIFYSTOP), as systemd
 *     shutting down: "STOPPING=1\nSTATUS=vsnap-testguest stopping\n", then on
 *     the same connection "EXIT_STATUS=3" without a newline, then close.
 *
 * Nothing is read back (sd_notify has no answers). A transport reset (a
 * restore) sends nothing again: systemd announces once per boot.
 */
#pragma once

#include <stdint.h>

void notify_start(uint32_t port);
void notify_poll(void);
void notify_stopping(void);
