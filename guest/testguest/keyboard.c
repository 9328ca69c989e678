/* The polled i8042 keyboard (see keyboard.h). */
#include "keyboard.h"

#include <stdint.h>

#include "io.h"

#define I8042_DATA 0x60
#define I8042_STATUS 0x64
#define STATUS_OBF 0x01
#define STATUS_AUXDATA 0x20
#define CMD_READ_CTR 0x20
#define CMD_WRITE_CTR 0x60
#define CTR_KBD_INT 0x01
#define DRAIN_MAX 256 /* a controller that never empties must not hang the guest */

static struct {
    uint8_t bytes[KEYBOARD_KEPT];
    unsigned count;
} kept;

static void keep(uint8_t value)
{
    if (kept.count == KEYBOARD_KEPT) {
        for (unsigned i = 1; i < KEYBOARD_KEPT; i++)
            kept.bytes[i - 1] = kept.bytes[i];
        kept.count--;
    }
    kept.bytes[kept.count++] = value;
}

void keyboard_init(void)
{
    outb(I8042_STATUS, CMD_READ_CTR);
    if (!(inb(I8042_STATUS) & STATUS_OBF))
        return; /* no controller answers: keyboard_poll finds nothing either */
    uint8_t ctr = inb(I8042_DATA);
    outb(I8042_STATUS, CMD_WRITE_CTR);
    outb(I8042_DATA, ctr & ~CTR_KBD_INT);
}

void keyboard_poll(void)
{
    for (unsigned i = 0; i < DRAIN_MAX; i++) {
        uint8_t status = inb(I8042_STATUS);
        if (!(status & STATUS_OBF) || status == 0xff) /* 0xff: no device at the port */
            return;
        uint8_t value = inb(I8042_DATA);
        if (!(status & STATUS_AUXDATA))
            keep(value);
    }
}

void keyboard_take(char *out)
{
    static const char hex[] = "0123456789abcdef";
    keyboard_poll();
    char *p = out;
    for (const char *s = "KEYS"; *s; s++)
        *p++ = *s;
    for (unsigned i = 0; i < kept.count; i++) {
        *p++ = ' ';
        *p++ = hex[kept.bytes[i] >> 4];
        *p++ = hex[kept.bytes[i] & 0xf];
    }
    *p = 0;
    kept.count = 0;
}
