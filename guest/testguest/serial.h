/* Output on the first 16550 UART (COM1). Polled: each byte waits for the
 * transmit holding register to be empty. Usable at CPL0 (exception reports)
 * and at CPL3 (IOPL=3). With the virtio-console up (vsnap.hvc=1,
 * consoledrv.h), what CPL3 prints goes there too, line by line.
 */
#pragma once

#include <stdint.h>

#define SERIAL_COM1 0x3f8

void serial_putc(char c);
void serial_puts(const char *s);
void serial_put_hex64(uint64_t value); /* 16 lowercase hex digits */
void serial_put_dec(uint64_t value);

/* "vsnap-testguest: " + msg + "\n": the one line format the tests look for. */
void serial_log(const char *msg);
