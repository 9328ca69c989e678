/* 16550A UART (COM1: port 0x3f8, IRQ 4) with Cloud Hypervisor's output modes.
 *
 * Output (THR writes) goes to the backend chosen by struct console_config;
 * input from the backend lands in the 16-byte receive FIFO and raises the IRQ
 * when the guest enabled it (polling LSR works too). A device thread owned by
 * the serial port waits for input and, in socket mode, for clients.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/bus.h"
#include "platform/layout.h"
#include "config/vm-config.h"

#define SERIAL_PORT_COUNT 8
#define SERIAL_FIFO_SIZE 16

struct serial;

/* cfg->mode must not be CONSOLE_MODE_OFF (then there is no device at all). */
struct serial *serial_new(const struct console_config *cfg, const struct irq_line *irq, GError **error);
void serial_free(struct serial *serial);

/* Register the 8 UART ports at base on bus. */
bool serial_attach(struct serial *serial, struct bus *bus, uint64_t base);

/* Register access, as from the guest (offset 0..7). */
uint8_t serial_read_reg(struct serial *serial, unsigned offset);
void serial_write_reg(struct serial *serial, unsigned offset, uint8_t value);

/* Put bytes into the receive FIFO as if they had arrived on the line; returns
 * how many fit. The input thread uses it; so do tests. */
size_t serial_receive(struct serial *serial, const uint8_t *bytes, size_t len);

/* The pty's slave path in CONSOLE_MODE_PTY, else NULL. */
const char *serial_pty_path(struct serial *serial);

uint64_t serial_tx_bytes(struct serial *serial);
uint64_t serial_rx_bytes(struct serial *serial);

/* Snapshot state (state.json "devices.serial"): registers, receive FIFO and
 * interrupt line. */
void serial_save_state(struct serial *serial, JsonBuilder *b);
bool serial_restore_state(struct serial *serial, JsonObject *obj, GError **error);
