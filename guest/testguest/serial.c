#include "serial.h"

#include "io.h"
#include "libc.h"

#define UART_THR 0          /* transmit holding register */
#define UART_LSR 5          /* line status register */
#define UART_LSR_THRE 0x20  /* THR empty: ready for the next byte */

/* Bounded so a UART that never reports THRE (no device) cannot hang the guest:
 * after this many polls the byte is written anyway. */
#define THRE_POLL_LIMIT 1000

void serial_putc(char c)
{
    for (int i = 0; i < THRE_POLL_LIMIT; i++) {
        if (inb(SERIAL_COM1 + UART_LSR) & UART_LSR_THRE)
            break;
    }
    outb(SERIAL_COM1 + UART_THR, (uint8_t)c);
}

void serial_puts(const char *s)
{
    /* Plain "\n" line ends (no "\r"): the consumers are files and log parsers. */
    while (*s)
        serial_putc(*s++);
}

void serial_put_hex64(uint64_t value)
{
    char buf[17];
    format_hex64(value, buf);
    serial_puts(buf);
}

void serial_put_dec(uint64_t value)
{
    char buf[21];
    format_dec(value, buf);
    serial_puts(buf);
}

void serial_log(const char *msg)
{
    serial_puts("vsnap-testguest: ");
    serial_puts(msg);
    serial_puts("\n");
}
