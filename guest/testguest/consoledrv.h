/* Polled virtio-console driver, output only: with vsnap.hvc=1 on the command
 * line, every line the guest prints at CPL3 goes to the virtio-console too
 * (serial.c mirrors it), so a VMM's console backend carries the same lines
 * as COM1. The guest reads no console input (the receive queue stays unset).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Find and start the device if the command line holds "vsnap.hvc=1" and the
 * VMM declares a virtio-console; false otherwise (the guest goes on without). */
bool console_init(const char *cmdline);
bool console_active(void);

/* Queue len bytes for output, a chain per at most CONSOLE_CHUNK bytes, and
 * notify the device once. Waits (bounded) for the device to return buffers;
 * if it never does, the rest is dropped rather than hanging the guest. */
void console_write(const char *bytes, size_t len);
