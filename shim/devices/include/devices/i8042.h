/* i8042 keyboard controller (ports 0x60 data, 0x64 status/command): enough of
 * it for Linux's probe to find a controller with a keyboard that answers, and
 * the reset line: command 0xfe (pulse output line 0), or clearing bit 0 of the
 * output port, is how "reboot=k" resets the machine. Keys come only from the
 * API (vm.send-scancodes: virsh send-key). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "platform/bus.h"
#include "platform/layout.h"


struct i8042;

struct i8042_callbacks {
    void (*on_reset)(void *opaque); /* the guest pulsed the CPU reset line */
    void *opaque;
};

struct i8042 *i8042_new(const struct irq_line *kbd_irq, const struct irq_line *aux_irq,
                        const struct i8042_callbacks *cb);
void i8042_free(struct i8042 *dev);
bool i8042_attach(struct i8042 *dev, struct bus *bus);

/* Guest accesses; port is I8042_DATA_PORT or I8042_COMMAND_PORT. */
uint8_t i8042_read(struct i8042 *dev, uint16_t port);
void i8042_write(struct i8042 *dev, uint16_t port, uint8_t value);

/* Keys pressed or released on the keyboard behind the controller: scan code
 * bytes of set 1 (0xe0 prefixes included), what the guest reads at 0x60 with
 * the controller's translation on (every PC firmware and Linux leave it on).
 * Queued whole or not at all: false with a message when the guest turned
 * translation off (it expects set 2, which this keyboard does not send), disabled
 * the keyboard, or has not read enough of what came before (the controller's
 * buffer holds I8042_QUEUE_BYTES). Any thread. */
#define I8042_QUEUE_BYTES 64
bool i8042_send_scancodes(struct i8042 *dev, const uint8_t *codes, unsigned n, GError **error);

/* Snapshot state (state.json "devices.i8042"): controller registers and the
 * output queue. */
void i8042_save_state(struct i8042 *dev, JsonBuilder *b);
bool i8042_restore_state(struct i8042 *dev, JsonObject *obj, GError **error);
