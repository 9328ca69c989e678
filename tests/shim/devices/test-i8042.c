/* i8042: what Linux's probe sends, the keyboard's answers, IRQ 1, and the
 * two ways to pulse the reset line. */
#include <glib.h>
#include <string.h>

#include "devices/i8042.h"

#define STATUS_OBF 0x01

struct watch {
    unsigned resets;
    unsigned kbd_rises;
    bool kbd_level;
};

static void on_reset(void *opaque)
{
    ((struct watch *)opaque)->resets++;
}

static void kbd_line(void *opaque, unsigned gsi, bool level)
{
    struct watch *w = opaque;
    g_assert_cmpuint(gsi, ==, I8042_KBD_IRQ);
    if (level && !w->kbd_level)
        w->kbd_rises++;
    w->kbd_level = level;
}

static void aux_line(void *opaque, unsigned gsi, bool level)
{
    g_assert_cmpuint(gsi, ==, I8042_AUX_IRQ);
}

static struct i8042 *new_i8042(struct watch *w)
{
    *w = (struct watch){ 0 };
    struct irq_line kbd = { .set_level = kbd_line, .opaque = w, .gsi = I8042_KBD_IRQ };
    struct irq_line aux = { .set_level = aux_line, .opaque = w, .gsi = I8042_AUX_IRQ };
    struct i8042_callbacks cb = { .on_reset = on_reset, .opaque = w };
    return i8042_new(&kbd, &aux, &cb);
}

static uint8_t read_reply(struct i8042 *d)
{
    g_assert_cmphex(i8042_read(d, I8042_COMMAND_PORT) & STATUS_OBF, ==, STATUS_OBF);
    return i8042_read(d, I8042_DATA_PORT);
}

static void test_linux_probe(void)
{
    struct watch w;
    struct i8042 *d = new_i8042(&w);
    uint8_t status = i8042_read(d, I8042_COMMAND_PORT);
    g_assert_cmphex(status, !=, 0xff); /* 0xff means "no controller" to Linux */
    g_assert_cmphex(status & STATUS_OBF, ==, 0);
    i8042_write(d, I8042_COMMAND_PORT, 0x20); /* read CTR */
    uint8_t ctr = read_reply(d);
    g_assert_cmphex(i8042_read(d, I8042_COMMAND_PORT) & STATUS_OBF, ==, 0);
    i8042_write(d, I8042_COMMAND_PORT, 0x60); /* write CTR: interrupts off */
    i8042_write(d, I8042_DATA_PORT, ctr & ~0x03);
    i8042_write(d, I8042_COMMAND_PORT, 0x20);
    g_assert_cmphex(read_reply(d), ==, ctr & ~0x03);
    i8042_write(d, I8042_COMMAND_PORT, 0xaa); /* self test */
    g_assert_cmphex(read_reply(d), ==, 0x55);
    i8042_write(d, I8042_COMMAND_PORT, 0xab); /* keyboard interface test */
    g_assert_cmphex(read_reply(d), ==, 0x00);
    i8042_write(d, I8042_COMMAND_PORT, 0xd3); /* aux loopback */
    i8042_write(d, I8042_DATA_PORT, 0x5a);
    g_assert_cmphex(i8042_read(d, I8042_COMMAND_PORT) & 0x20, ==, 0x20); /* aux data */
    g_assert_cmphex(read_reply(d), ==, 0x5a);
    g_assert_cmpuint(w.resets, ==, 0);
    g_assert_cmpuint(w.kbd_rises, ==, 1); /* only the first CTR read: then interrupts were off */
    i8042_free(d);
}

static void test_keyboard_identify_with_irq(void)
{
    struct watch w;
    struct i8042 *d = new_i8042(&w);
    i8042_write(d, I8042_DATA_PORT, 0xf2); /* identify, to the keyboard */
    g_assert_cmpuint(w.kbd_rises, ==, 1);  /* one byte in the buffer, one interrupt */
    g_assert_cmphex(read_reply(d), ==, 0xfa);
    g_assert_cmpuint(w.kbd_rises, ==, 2);
    g_assert_cmphex(read_reply(d), ==, 0xab);
    g_assert_cmphex(read_reply(d), ==, 0x83);
    g_assert_cmphex(i8042_read(d, I8042_COMMAND_PORT) & STATUS_OBF, ==, 0);
    g_assert_cmpuint(w.kbd_rises, ==, 3);
    i8042_write(d, I8042_DATA_PORT, 0xed); /* set LEDs + parameter: two ACKs */
    g_assert_cmphex(read_reply(d), ==, 0xfa);
    i8042_write(d, I8042_DATA_PORT, 0x07);
    g_assert_cmphex(read_reply(d), ==, 0xfa);
    i8042_free(d);
}

static void test_reset_commands(void)
{
    struct watch w;
    struct i8042 *d = new_i8042(&w);
    i8042_write(d, I8042_COMMAND_PORT, 0xfe);
    g_assert_cmpuint(w.resets, ==, 1);
    i8042_write(d, I8042_COMMAND_PORT, 0xd1); /* write output port, reset line low */
    i8042_write(d, I8042_DATA_PORT, 0xfe);
    g_assert_cmpuint(w.resets, ==, 2);
    i8042_write(d, I8042_COMMAND_PORT, 0xd1); /* reset line high: nothing happens */
    i8042_write(d, I8042_DATA_PORT, 0x03);
    g_assert_cmpuint(w.resets, ==, 2);
    i8042_write(d, I8042_COMMAND_PORT, 0xd0);
    g_assert_cmphex(read_reply(d), ==, 0x03);
    i8042_free(d);
}

/* Keys from the API (vm.send-scancodes) come out of 0x60 in order, each
 * raising IRQ 1; a batch the buffer cannot hold, or one the guest cannot read
 * as set 1, is refused whole. */
static void test_send_scancodes(void)
{
    struct watch w;
    struct i8042 *d = new_i8042(&w);
    GError *error = NULL;
    const uint8_t keys[] = { 0x1e, 0x9e, 0xe0, 0x48 };
    g_assert_true(i8042_send_scancodes(d, keys, sizeof(keys), &error));
    g_assert_cmpuint(w.kbd_rises, ==, 1); /* one byte in the output buffer at a time */
    for (unsigned i = 0; i < sizeof(keys); i++)
        g_assert_cmphex(read_reply(d), ==, keys[i]);
    g_assert_cmpuint(w.kbd_rises, ==, sizeof(keys));
    g_assert_cmphex(i8042_read(d, I8042_COMMAND_PORT) & STATUS_OBF, ==, 0);

    uint8_t many[I8042_QUEUE_BYTES + 1] = { 0 };
    /* The output buffer holds one more byte than the queue behind it. */
    g_assert_true(i8042_send_scancodes(d, many, I8042_QUEUE_BYTES, &error));
    g_assert_false(i8042_send_scancodes(d, many, 2, &error));
    g_assert_nonnull(strstr(error->message, "full"));
    g_clear_error(&error);
    for (unsigned i = 0; i < I8042_QUEUE_BYTES; i++)
        (void)read_reply(d);
    g_assert_cmphex(i8042_read(d, I8042_COMMAND_PORT) & STATUS_OBF, ==, 0);

    i8042_write(d, I8042_COMMAND_PORT, 0x60); /* write CTR: translation off */
    i8042_write(d, I8042_DATA_PORT, 0x01);
    g_assert_false(i8042_send_scancodes(d, keys, 1, &error));
    g_assert_nonnull(strstr(error->message, "translation"));
    g_clear_error(&error);
    g_assert_cmphex(i8042_read(d, I8042_COMMAND_PORT) & STATUS_OBF, ==, 0);
    i8042_free(d);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/i8042/linux-probe", test_linux_probe);
    g_test_add_func("/i8042/keyboard-identify-with-irq", test_keyboard_identify_with_irq);
    g_test_add_func("/i8042/reset-commands", test_reset_commands);
    g_test_add_func("/i8042/send-scancodes", test_send_scancodes);
    return g_test_run();
}
