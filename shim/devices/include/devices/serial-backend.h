/* Where the serial port's (and the virtio-console's) bytes go and come from:
 * Cloud Hypervisor's console output modes (Null, File, Tty, Pty, Socket).
 * Output is written on the thread that produced it (the vCPU that wrote THR,
 * the virtio-console's device thread), never blocking on a slow reader for Pty and Socket
 * (bytes are dropped instead, as a disconnected UART would). Input is read by a
 * thread of the backend and handed to deliver(), which may accept fewer bytes
 * than offered when the UART's FIFO is full; the rest waits until
 * serial_backend_input_room() says the guest drained the FIFO.
 */
#pragma once

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "config/vm-config.h"

typedef size_t (*serial_deliver_fn)(void *opaque, const uint8_t *bytes, size_t len);

struct serial_backend;

/* key names the device ("serial", "console"): a Pty backend made again for
 * it (a guest reset) is the same pty. */
struct serial_backend *serial_backend_new(const char *key, const struct console_config *cfg,
                                          serial_deliver_fn deliver, void *opaque, GError **error);
void serial_backend_free(struct serial_backend *backend);

void serial_backend_write(struct serial_backend *backend, uint8_t byte);
void serial_backend_write_bytes(struct serial_backend *backend, const uint8_t *bytes, size_t len);
void serial_backend_input_room(struct serial_backend *backend);
const char *serial_backend_pty_path(struct serial_backend *backend);
