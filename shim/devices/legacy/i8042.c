/* i8042 controller model. See i8042.h.
 *
 * The controller has one output buffer the guest reads at 0x60; replies are
 * queued here and moved into it one at a time, each raising IRQ 1 (keyboard)
 * or IRQ 12 (aux) when the command byte enables that interrupt.
 */
#include "devices/i8042.h"

#include <gio/gio.h>

#include "state/state-json.h"
#include "json/vjson.h"

#define STATUS_OBF 0x01     /* output buffer full */
#define STATUS_SYS 0x04     /* self test passed */
#define STATUS_CMD 0x08     /* last write went to the command port */
#define STATUS_AUXDATA 0x20 /* output buffer holds aux (mouse) data */

#define CTR_KBD_INT 0x01
#define CTR_AUX_INT 0x02
#define CTR_SYS 0x04
#define CTR_KBD_DISABLE 0x10
#define CTR_AUX_DISABLE 0x20
#define CTR_XLATE 0x40

#define CMD_READ_CTR 0x20
#define CMD_WRITE_CTR 0x60
#define CMD_AUX_DISABLE 0xa7
#define CMD_AUX_ENABLE 0xa8
#define CMD_AUX_TEST 0xa9
#define CMD_SELF_TEST 0xaa
#define CMD_KBD_TEST 0xab
#define CMD_KBD_DISABLE 0xad
#define CMD_KBD_ENABLE 0xae
#define CMD_READ_OUTPUT_PORT 0xd0
#define CMD_WRITE_OUTPUT_PORT 0xd1
#define CMD_WRITE_KBD_OUTBUF 0xd2
#define CMD_WRITE_AUX_OUTBUF 0xd3
#define CMD_WRITE_AUX 0xd4
#define CMD_PULSE_RESET 0xfe

#define OUTPUT_PORT_RESET_LINE 0x01 /* active low: 0 resets the CPU */
#define KBD_ACK 0xfa
/* Room for a whole virsh send-key (16 keys, extended ones two bytes each). */
#define QUEUE_SIZE I8042_QUEUE_BYTES

struct queued_byte {
    uint8_t value;
    bool aux;
};

struct i8042 {
    GMutex lock;
    struct irq_line kbd_irq, aux_irq;
    struct i8042_callbacks cb;
    uint8_t status, ctr, output_port;
    uint8_t pending_command;   /* controller command waiting for its data byte, or 0 */
    uint8_t kbd_pending_param; /* keyboard command waiting for its parameter, or 0 */
    struct queued_byte queue[QUEUE_SIZE];
    unsigned qhead, qcount;
    uint8_t outbuf;
};

/* Move the next queued byte into the output buffer and interrupt for it. */
static void refill_output_locked(struct i8042 *d)
{
    if ((d->status & STATUS_OBF) || d->qcount == 0)
        return;
    struct queued_byte b = d->queue[d->qhead];
    d->qhead = (d->qhead + 1) % QUEUE_SIZE;
    d->qcount--;
    d->outbuf = b.value;
    d->status |= STATUS_OBF;
    d->status = b.aux ? (d->status | STATUS_AUXDATA) : (d->status & ~STATUS_AUXDATA);
    const struct irq_line *line = b.aux ? &d->aux_irq : &d->kbd_irq;
    if (d->ctr & (b.aux ? CTR_AUX_INT : CTR_KBD_INT)) {
        irq_line_set(line, true); /* both are edge-triggered ISA IRQs */
        irq_line_set(line, false);
    }
}

static void queue_byte_locked(struct i8042 *d, uint8_t value, bool aux)
{
    if (d->qcount < QUEUE_SIZE) {
        d->queue[(d->qhead + d->qcount) % QUEUE_SIZE] = (struct queued_byte){ value, aux };
        d->qcount++;
    }
    refill_output_locked(d);
}

/* The keyboard itself (behind the controller): acknowledge everything, answer
 * reset and identify like a standard MF2 keyboard. */
static void keyboard_command_locked(struct i8042 *d, uint8_t value)
{
    if (d->kbd_pending_param) {
        d->kbd_pending_param = 0;
        queue_byte_locked(d, KBD_ACK, false);
        return;
    }
    switch (value) {
    case 0xff: /* reset */
        queue_byte_locked(d, KBD_ACK, false);
        queue_byte_locked(d, 0xaa, false); /* self test passed */
        break;
    case 0xf2: /* identify */
        queue_byte_locked(d, KBD_ACK, false);
        queue_byte_locked(d, 0xab, false);
        queue_byte_locked(d, 0x83, false);
        break;
    case 0xee: /* echo */
        queue_byte_locked(d, 0xee, false);
        break;
    case 0xed: /* set LEDs */
    case 0xf0: /* scan code set */
    case 0xf3: /* typematic rate */
        d->kbd_pending_param = value;
        queue_byte_locked(d, KBD_ACK, false);
        break;
    default:
        queue_byte_locked(d, KBD_ACK, false);
        break;
    }
}

static void request_reset(struct i8042 *d)
{
    if (d->cb.on_reset)
        d->cb.on_reset(d->cb.opaque);
}

/* A data byte completing a two-byte controller command. Returns true when a
 * reset was requested (reported after the lock is dropped). */
static bool command_data_locked(struct i8042 *d, uint8_t command, uint8_t value)
{
    switch (command) {
    case CMD_WRITE_CTR:
        d->ctr = value;
        break;
    case CMD_WRITE_OUTPUT_PORT:
        d->output_port = value;
        return !(value & OUTPUT_PORT_RESET_LINE);
    case CMD_WRITE_KBD_OUTBUF:
        queue_byte_locked(d, value, false);
        break;
    case CMD_WRITE_AUX_OUTBUF:
        queue_byte_locked(d, value, true);
        break;
    case CMD_WRITE_AUX:
        break; /* there is no mouse: the byte goes nowhere, no reply */
    }
    return false;
}

/* Returns true when the command resets the machine. */
static bool controller_command_locked(struct i8042 *d, uint8_t command)
{
    switch (command) {
    case CMD_READ_CTR:
        queue_byte_locked(d, d->ctr, false);
        break;
    case CMD_WRITE_CTR:
    case CMD_WRITE_OUTPUT_PORT:
    case CMD_WRITE_KBD_OUTBUF:
    case CMD_WRITE_AUX_OUTBUF:
    case CMD_WRITE_AUX:
        d->pending_command = command;
        break;
    case CMD_AUX_DISABLE:
        d->ctr |= CTR_AUX_DISABLE;
        break;
    case CMD_AUX_ENABLE:
        d->ctr &= ~CTR_AUX_DISABLE;
        break;
    case CMD_KBD_DISABLE:
        d->ctr |= CTR_KBD_DISABLE;
        break;
    case CMD_KBD_ENABLE:
        d->ctr &= ~CTR_KBD_DISABLE;
        break;
    case CMD_SELF_TEST:
        queue_byte_locked(d, 0x55, false);
        break;
    case CMD_AUX_TEST:
    case CMD_KBD_TEST:
        queue_byte_locked(d, 0x00, false); /* interface test passed */
        break;
    case CMD_READ_OUTPUT_PORT:
        queue_byte_locked(d, d->output_port, false);
        break;
    case CMD_PULSE_RESET:
        return true;
    }
    return false;
}

static const char *refuse_scancodes_locked(const struct i8042 *d, unsigned n)
{
    if (!(d->ctr & CTR_XLATE))
        return "the guest turned the i8042's scan code translation off (it reads set 2; this keyboard sends set 1)";
    if (d->ctr & CTR_KBD_DISABLE)
        return "the guest disabled the keyboard (i8042 command 0xad)";
    if (n > QUEUE_SIZE - d->qcount)
        return "the i8042's output buffer is full: the guest has not read the keys sent before";
    return NULL;
}

bool i8042_send_scancodes(struct i8042 *d, const uint8_t *codes, unsigned n, GError **error)
{
    g_mutex_lock(&d->lock);
    const char *refusal = refuse_scancodes_locked(d, n);
    for (unsigned i = 0; !refusal && i < n; i++)
        queue_byte_locked(d, codes[i], false);
    g_mutex_unlock(&d->lock);
    if (refusal)
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_BUSY, "%s (%u scan code bytes not sent)", refusal, n);
    return refusal == NULL;
}

uint8_t i8042_read(struct i8042 *d, uint16_t port)
{
    g_mutex_lock(&d->lock);
    uint8_t value;
    if (port == I8042_COMMAND_PORT) {
        value = d->status;
    } else {
        value = d->outbuf;
        d->status &= ~(STATUS_OBF | STATUS_AUXDATA);
        refill_output_locked(d);
    }
    g_mutex_unlock(&d->lock);
    return value;
}

void i8042_write(struct i8042 *d, uint16_t port, uint8_t value)
{
    bool reset;
    g_mutex_lock(&d->lock);
    if (port == I8042_COMMAND_PORT) {
        d->status |= STATUS_CMD;
        d->pending_command = 0;
        reset = controller_command_locked(d, value);
    } else {
        d->status &= ~STATUS_CMD;
        uint8_t command = d->pending_command;
        d->pending_command = 0;
        reset = command ? command_data_locked(d, command, value) : false;
        if (!command)
            keyboard_command_locked(d, value);
    }
    g_mutex_unlock(&d->lock);
    if (reset)
        request_reset(d);
}

/* 0x60 and 0x64 are not adjacent (0x61 is the in-kernel PIT's speaker port),
 * so each is its own one-byte range with its own ops. */
static void read_bytes(struct i8042 *d, uint16_t port, uint8_t *data, unsigned len)
{
    for (unsigned i = 1; i < len; i++)
        data[i] = 0xff;
    data[0] = i8042_read(d, port);
}

static void data_read_cb(void *opaque, uint64_t offset, uint8_t *data, unsigned len)
{
    read_bytes(opaque, I8042_DATA_PORT, data, len);
}

static void data_write_cb(void *opaque, uint64_t offset, const uint8_t *data, unsigned len)
{
    i8042_write(opaque, I8042_DATA_PORT, data[0]);
}

static void command_read_cb(void *opaque, uint64_t offset, uint8_t *data, unsigned len)
{
    read_bytes(opaque, I8042_COMMAND_PORT, data, len);
}

static void command_write_cb(void *opaque, uint64_t offset, const uint8_t *data, unsigned len)
{
    i8042_write(opaque, I8042_COMMAND_PORT, data[0]);
}

static const struct bus_ops data_port_ops = { .read = data_read_cb, .write = data_write_cb };
static const struct bus_ops command_port_ops = { .read = command_read_cb, .write = command_write_cb };

struct i8042 *i8042_new(const struct irq_line *kbd_irq, const struct irq_line *aux_irq,
                        const struct i8042_callbacks *cb)
{
    struct i8042 *d = g_new0(struct i8042, 1);
    g_mutex_init(&d->lock);
    d->kbd_irq = *kbd_irq;
    d->aux_irq = *aux_irq;
    d->cb = *cb;
    d->status = STATUS_SYS;
    d->ctr = CTR_KBD_INT | CTR_SYS | CTR_XLATE | CTR_AUX_DISABLE;
    d->output_port = OUTPUT_PORT_RESET_LINE | 0x02; /* reset inactive, A20 on */
    return d;
}

void i8042_free(struct i8042 *d)
{
    if (!d)
        return;
    g_mutex_clear(&d->lock);
    g_free(d);
}

bool i8042_attach(struct i8042 *d, struct bus *bus)
{
    return bus_register(bus, I8042_DATA_PORT, 1, &data_port_ops, d, "i8042-data") &&
           bus_register(bus, I8042_COMMAND_PORT, 1, &command_port_ops, d, "i8042-command");
}

/* ---- snapshot state ---- */

void i8042_save_state(struct i8042 *d, JsonBuilder *b)
{
    g_mutex_lock(&d->lock);
    vjson_object_begin(b, NULL);
    vjson_uint(b, "status", d->status);
    vjson_uint(b, "ctr", d->ctr);
    vjson_uint(b, "output_port", d->output_port);
    vjson_uint(b, "pending_command", d->pending_command);
    vjson_uint(b, "kbd_pending_param", d->kbd_pending_param);
    vjson_uint(b, "outbuf", d->outbuf);
    /* The queue as pairs: byte, then 1 if it is for the aux port. */
    uint8_t queue[2 * QUEUE_SIZE];
    for (unsigned i = 0; i < d->qcount; i++) {
        const struct queued_byte *q = &d->queue[(d->qhead + i) % QUEUE_SIZE];
        queue[2 * i] = q->value;
        queue[2 * i + 1] = q->aux;
    }
    vjson_base64(b, "queue", queue, 2 * d->qcount);
    vjson_object_end(b);
    g_mutex_unlock(&d->lock);
}

bool i8042_restore_state(struct i8042 *d, JsonObject *obj, GError **error)
{
    uint64_t status, ctr, port, cmd, param, outbuf;
    g_autofree uint8_t *queue = NULL;
    size_t queue_len = 0;
    if (!state_get_uint(obj, "status", 0xff, &status, "i8042", error) ||
        !state_get_uint(obj, "ctr", 0xff, &ctr, "i8042", error) ||
        !state_get_uint(obj, "output_port", 0xff, &port, "i8042", error) ||
        !state_get_uint(obj, "pending_command", 0xff, &cmd, "i8042", error) ||
        !state_get_uint(obj, "kbd_pending_param", 0xff, &param, "i8042", error) ||
        !state_get_uint(obj, "outbuf", 0xff, &outbuf, "i8042", error) ||
        !state_get_blob_any(obj, "queue", &queue, &queue_len, "i8042", error))
        return false;
    if (queue_len % 2 || queue_len > 2 * QUEUE_SIZE) {
        g_set_error(error, STATE_ERROR, STATE_ERROR_INVALID, "state.json: i8042: queue holds %zu bytes", queue_len);
        return false;
    }
    g_mutex_lock(&d->lock);
    d->status = (uint8_t)status;
    d->ctr = (uint8_t)ctr;
    d->output_port = (uint8_t)port;
    d->pending_command = (uint8_t)cmd;
    d->kbd_pending_param = (uint8_t)param;
    d->outbuf = (uint8_t)outbuf;
    d->qhead = 0;
    d->qcount = (unsigned)(queue_len / 2);
    for (unsigned i = 0; i < d->qcount; i++)
        d->queue[i] = (struct queued_byte){ .value = queue[2 * i], .aux = queue[2 * i + 1] != 0 };
    g_mutex_unlock(&d->lock);
    return true;
}
