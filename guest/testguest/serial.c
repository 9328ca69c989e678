#include "serial.h"

#include "consoledrv.h"
#include "io.h"
#include "libc.h"

#define UART_THR 0          /* transmit holding register */
#define UART_LSR 5          /* line status register */
#define UART_LSR_THRE 0x20  /* THR empty: ready for the next byte */

/* Bounded so a UART that never reports THRE (no device) cannot hang the guest:
 * after this many polls the byte is written anyway. */
#define THRE_POLL_LIMIT 1000

/* Lines for the virtio-console (vsnap.hvc=1), sent whole: one notification
 * (a VM exit) per line rather than per byte. */
static struct {
    char buf[256];
    size_t len;
} mirror;

static bool at_cpl3(void)
{
    uint16_t cs;
    __asm__ volatile("mov %%cs, %0" : "=r"(cs));
    return (cs & 3) == 3;
}

/* CPL0 (an exception report) stays on COM1 only: the driver is user-mode
 * code, and the report may come from inside it. */
static void mirror_putc(char c)
{
    if (!console_active() || !at_cpl3())
        return;
    mirror.buf[mirror.len++] = c;
    if (c == '\n' || mirror.len == sizeof mirror.buf) {
        console_write(mirror.buf, mirror.len);
        mirror.len = 0;
    }
}

void serial_putc(char c)
{
    for (int i = 0; i < THRE_POLL_LIMIT; i++) {
        if (inb(SERIAL_COM1 + UART_LSR) & UART_LSR_THRE)
            break;
    }
    outb(SERIAL_COM1 + UART_THR, (uint8_t)c);
    mirror_putc(c);
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
