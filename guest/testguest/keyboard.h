/* The i8042 keyboard, polled (its IRQ is turned off in the controller): the
 * scan code bytes the guest read at 0x60, for the command port's KEYS, which
 * checks what `virsh send-key` typed. */
#pragma once

#include <stddef.h>

/* Turn the keyboard interrupt off in the controller's command byte; the
 * translation to set 1 stays as the VMM set it. */
void keyboard_init(void);
/* Read every byte waiting in the controller (status port 0x64 bit 0; aux
 * bytes, bit 5, are read and dropped). Cheap when nothing waits: one read. */
void keyboard_poll(void);
/* "KEYS" followed by " xx" for every byte read since the last call, in hex,
 * at most KEYBOARD_KEPT of them (older ones are dropped first); clears them.
 * out must hold 5 + 3 * KEYBOARD_KEPT + 1 bytes. */
#define KEYBOARD_KEPT 128
void keyboard_take(char *out);
