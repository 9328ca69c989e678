/* virtio-console (device id 3): Cloud Hypervisor's "console" device, one port
 * (no MULTIPORT), over virtio-mmio.
 *
 * Queue 0 (receiveq) carries host input to the guest, queue 1 (transmitq) the
 * guest's output. Where the bytes go and come from is the serial port's
 * backend (serial-backend.h): Null, File, Tty, Pty or Socket, chosen by the
 * config's console section; Off means no device at all.
 *
 * Threads: a device thread takes transmitq chains when the guest notifies and
 * writes them to the backend; the backend's input thread puts input into
 * receiveq buffers (bytes that find no buffer wait in the backend until the
 * guest posts more). Both hold the transport lock while touching queues.
 *
 * Snapshots: the transport and its queues (virtio-mmio.h); the backend is the
 * host's (a pty or socket cannot be saved) and is opened anew on restore,
 * possibly with another mode (config_overrides.console).
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/vm-config.h"
#include "devices/virtio-host.h"

struct virtio_console;

/* cfg->mode must not be CONSOLE_MODE_OFF. Registers virtio-mmio device number
 * mmio_index, opens the backend and starts the device thread. */
struct virtio_console *virtio_console_new(const struct virtio_host *host, unsigned mmio_index,
                                          const struct console_config *cfg, GError **error);
/* Stop the threads, close the backend. NULL is fine. */
void virtio_console_free(struct virtio_console *dev);

/* "virtio_mmio.device=4K@0xd0001000:6" for the guest command line. */
char *virtio_console_cmdline_entry(const struct virtio_console *dev);
/* The pty's slave path in Pty mode, else NULL (vm.info config.console.file). */
const char *virtio_console_pty_path(struct virtio_console *dev);

/* {"tx_bytes", "rx_bytes"}: guest output taken, input delivered. */
void virtio_console_add_counters(struct virtio_console *dev, JsonBuilder *b);

/* Snapshots, as virtio-vsock.h's: quiesce holds both threads away from the
 * queues until unquiesce; save_state between the two; restore_state into a
 * fresh device before the vCPUs run. */
void virtio_console_quiesce(struct virtio_console *dev);
void virtio_console_unquiesce(struct virtio_console *dev);
void virtio_console_save_state(struct virtio_console *dev, JsonBuilder *b);
bool virtio_console_restore_state(struct virtio_console *dev, JsonObject *obj, GError **error);
