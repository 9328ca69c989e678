/* i8042 keyboard controller (ports 0x60 data, 0x64 status/command): enough of
 * it for Linux's probe to find a controller with a keyboard that answers, and
 * the reset line: command 0xfe (pulse output line 0), or clearing bit 0 of the
 * output port, is how "reboot=k" resets the machine. No keys are ever typed. */
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

/* Snapshot state (state.json "devices.i8042"): controller registers and the
 * output queue. */
void i8042_save_state(struct i8042 *dev, JsonBuilder *b);
bool i8042_restore_state(struct i8042 *dev, JsonObject *obj, GError **error);
