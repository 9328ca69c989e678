/* 16550A UART register model. See serial.h; bytes leave and arrive through
 * serial-backend.c.
 *
 * Transmission is instantaneous: THR is empty again right after a write, so
 * LSR always shows THRE|TEMT and, with IER.THRI set, a THR-empty interrupt is
 * raised again after every byte (what Linux's 8250 driver expects).
 */
#include "devices/serial.h"

#include <stdatomic.h>
#include <string.h>

#include "devices/serial-backend.h"
#include "state/state-json.h"
#include "json/vjson.h"

enum {
    REG_RBR_THR_DLL = 0,
    REG_IER_DLM = 1,
    REG_IIR_FCR = 2,
    REG_LCR = 3,
    REG_MCR = 4,
    REG_LSR = 5,
    REG_MSR = 6,
    REG_SCR = 7,
};

#define IER_RDI 0x01   /* receive data available */
#define IER_THRI 0x02  /* transmitter holding register empty */
#define IER_MASK 0x0f
#define IIR_NO_INT 0x01
#define IIR_THRI 0x02
#define IIR_RDI 0x04
#define IIR_FIFO_ENABLED 0xc0
#define FCR_ENABLE 0x01
#define FCR_CLEAR_RX 0x02
#define LCR_DLAB 0x80
#define MCR_LOOP 0x10
#define MCR_MASK 0x1f
#define LSR_DR 0x01
#define LSR_OE 0x02
#define LSR_THRE 0x20
#define LSR_TEMT 0x40
#define MSR_CTS 0x10
#define MSR_DSR 0x20
#define MSR_RI 0x40
#define MSR_DCD 0x80

struct serial {
    GMutex lock;
    struct irq_line irq;
    bool irq_level;
    uint8_t ier, lcr, mcr, scr, dll, dlm, fcr;
    bool overrun;
    bool thr_empty_pending; /* THR-empty interrupt not yet acknowledged by an IIR read */
    uint8_t rx[SERIAL_FIFO_SIZE];
    unsigned rx_head, rx_count;
    struct serial_backend *backend;
    atomic_uint_fast64_t tx_bytes, rx_bytes;
};

static uint8_t pending_interrupt(const struct serial *s)
{
    if ((s->ier & IER_RDI) && s->rx_count > 0)
        return IIR_RDI;
    if ((s->ier & IER_THRI) && s->thr_empty_pending)
        return IIR_THRI;
    return IIR_NO_INT;
}

/* Called with the lock held after every state change. */
static void update_irq(struct serial *s)
{
    bool level = pending_interrupt(s) != IIR_NO_INT;
    if (level != s->irq_level) {
        s->irq_level = level;
        irq_line_set(&s->irq, level);
    }
}

static size_t rx_push_locked(struct serial *s, const uint8_t *bytes, size_t len)
{
    size_t n = 0;
    while (n < len && s->rx_count < SERIAL_FIFO_SIZE) {
        s->rx[(s->rx_head + s->rx_count) % SERIAL_FIFO_SIZE] = bytes[n++];
        s->rx_count++;
    }
    return n;
}

static uint8_t rx_pop_locked(struct serial *s)
{
    if (s->rx_count == 0)
        return 0;
    bool was_full = s->rx_count == SERIAL_FIFO_SIZE;
    uint8_t byte = s->rx[s->rx_head];
    s->rx_head = (s->rx_head + 1) % SERIAL_FIFO_SIZE;
    s->rx_count--;
    atomic_fetch_add(&s->rx_bytes, 1);
    if (was_full && s->backend)
        serial_backend_input_room(s->backend);
    return byte;
}

static void transmit_locked(struct serial *s, uint8_t byte)
{
    if (s->mcr & MCR_LOOP) {
        /* Loopback: the byte comes straight back, as Linux's probe expects. */
        if (rx_push_locked(s, &byte, 1) == 0)
            s->overrun = true;
    } else {
        atomic_fetch_add(&s->tx_bytes, 1);
        if (s->backend)
            serial_backend_write(s->backend, byte);
    }
    s->thr_empty_pending = true;
}

/* MSR in loopback reflects MCR's outputs (DTR->DSR, RTS->CTS, OUT1->RI,
 * OUT2->DCD); otherwise the line is a connected modem with carrier. */
static uint8_t modem_status(const struct serial *s)
{
    if (!(s->mcr & MCR_LOOP))
        return MSR_DCD | MSR_DSR | MSR_CTS;
    uint8_t msr = 0;
    if (s->mcr & 0x01)
        msr |= MSR_DSR;
    if (s->mcr & 0x02)
        msr |= MSR_CTS;
    if (s->mcr & 0x04)
        msr |= MSR_RI;
    if (s->mcr & 0x08)
        msr |= MSR_DCD;
    return msr;
}

static uint8_t read_iir_locked(struct serial *s)
{
    uint8_t iir = pending_interrupt(s);
    if (iir == IIR_THRI)
        s->thr_empty_pending = false; /* reading IIR acknowledges THR empty */
    return iir | ((s->fcr & FCR_ENABLE) ? IIR_FIFO_ENABLED : 0);
}

static uint8_t read_lsr_locked(struct serial *s)
{
    uint8_t lsr = LSR_THRE | LSR_TEMT;
    if (s->rx_count > 0)
        lsr |= LSR_DR;
    if (s->overrun)
        lsr |= LSR_OE;
    s->overrun = false;
    return lsr;
}

static uint8_t read_reg_locked(struct serial *s, unsigned offset)
{
    bool dlab = s->lcr & LCR_DLAB;
    switch (offset) {
    case REG_RBR_THR_DLL:
        return dlab ? s->dll : rx_pop_locked(s);
    case REG_IER_DLM:
        return dlab ? s->dlm : s->ier;
    case REG_IIR_FCR:
        return read_iir_locked(s);
    case REG_LCR:
        return s->lcr;
    case REG_MCR:
        return s->mcr;
    case REG_LSR:
        return read_lsr_locked(s);
    case REG_MSR:
        return modem_status(s);
    case REG_SCR:
        return s->scr;
    }
    return 0xff;
}

static void write_ier_locked(struct serial *s, uint8_t value)
{
    bool thri_was_enabled = s->ier & IER_THRI;
    s->ier = value & IER_MASK;
    /* Enabling THRI while THR is empty (always, here) raises it at once. */
    if ((s->ier & IER_THRI) && !thri_was_enabled)
        s->thr_empty_pending = true;
}

static void write_fcr_locked(struct serial *s, uint8_t value)
{
    s->fcr = value & FCR_ENABLE;
    if (value & FCR_CLEAR_RX) {
        s->rx_count = 0;
        s->rx_head = 0;
        if (s->backend)
            serial_backend_input_room(s->backend);
    }
}

static void write_reg_locked(struct serial *s, unsigned offset, uint8_t value)
{
    bool dlab = s->lcr & LCR_DLAB;
    switch (offset) {
    case REG_RBR_THR_DLL:
        if (dlab)
            s->dll = value;
        else
            transmit_locked(s, value);
        break;
    case REG_IER_DLM:
        if (dlab)
            s->dlm = value;
        else
            write_ier_locked(s, value);
        break;
    case REG_IIR_FCR:
        write_fcr_locked(s, value);
        break;
    case REG_LCR:
        s->lcr = value;
        break;
    case REG_MCR:
        s->mcr = value & MCR_MASK;
        break;
    case REG_SCR:
        s->scr = value;
        break;
    default: /* LSR and MSR are read-only */
        break;
    }
}

uint8_t serial_read_reg(struct serial *s, unsigned offset)
{
    g_mutex_lock(&s->lock);
    uint8_t value = read_reg_locked(s, offset);
    update_irq(s);
    g_mutex_unlock(&s->lock);
    return value;
}

void serial_write_reg(struct serial *s, unsigned offset, uint8_t value)
{
    g_mutex_lock(&s->lock);
    if (offset == REG_RBR_THR_DLL && !(s->lcr & LCR_DLAB)) {
        /* The write fills THR (interrupt condition gone), then the byte is
         * sent and THR is empty again: two steps so an edge-triggered line
         * sees a fresh rising edge for the next THR-empty interrupt. */
        s->thr_empty_pending = false;
        update_irq(s);
    }
    write_reg_locked(s, offset, value);
    update_irq(s);
    g_mutex_unlock(&s->lock);
}

size_t serial_receive(struct serial *s, const uint8_t *bytes, size_t len)
{
    g_mutex_lock(&s->lock);
    size_t n = rx_push_locked(s, bytes, len);
    update_irq(s);
    g_mutex_unlock(&s->lock);
    return n;
}

static size_t deliver_input(void *opaque, const uint8_t *bytes, size_t len)
{
    return serial_receive(opaque, bytes, len);
}

static void bus_read_cb(void *opaque, uint64_t offset, uint8_t *data, unsigned len)
{
    memset(data, 0, len);
    data[0] = serial_read_reg(opaque, (unsigned)offset);
}

static void bus_write_cb(void *opaque, uint64_t offset, const uint8_t *data, unsigned len)
{
    serial_write_reg(opaque, (unsigned)offset, data[0]);
}

static const struct bus_ops serial_bus_ops = { .read = bus_read_cb, .write = bus_write_cb };

struct serial *serial_new(const struct console_config *cfg, const struct irq_line *irq, GError **error)
{
    struct serial *s = g_new0(struct serial, 1);
    g_mutex_init(&s->lock);
    s->irq = *irq;
    s->mcr = 0x08; /* OUT2, as firmware leaves it */
    s->backend = serial_backend_new("serial", cfg, deliver_input, s, error);
    if (!s->backend) {
        serial_free(s);
        return NULL;
    }
    return s;
}

void serial_free(struct serial *s)
{
    if (!s)
        return;
    serial_backend_free(s->backend); /* joins the input thread before the UART goes */
    g_mutex_clear(&s->lock);
    g_free(s);
}

bool serial_attach(struct serial *s, struct bus *bus, uint64_t base)
{
    return bus_register(bus, base, SERIAL_PORT_COUNT, &serial_bus_ops, s, "serial");
}

const char *serial_pty_path(struct serial *s)
{
    return serial_backend_pty_path(s->backend);
}

uint64_t serial_tx_bytes(struct serial *s)
{
    return atomic_load(&s->tx_bytes);
}

uint64_t serial_rx_bytes(struct serial *s)
{
    return atomic_load(&s->rx_bytes);
}

/* ---- snapshot state ---- */

static const char *const serial_regs[] = { "ier", "lcr", "mcr", "scr", "dll", "dlm", "fcr" };

static uint8_t *serial_reg(struct serial *s, unsigned i)
{
    uint8_t *regs[] = { &s->ier, &s->lcr, &s->mcr, &s->scr, &s->dll, &s->dlm, &s->fcr };
    return regs[i];
}

void serial_save_state(struct serial *s, JsonBuilder *b)
{
    g_mutex_lock(&s->lock);
    vjson_object_begin(b, NULL);
    for (unsigned i = 0; i < G_N_ELEMENTS(serial_regs); i++)
        vjson_uint(b, serial_regs[i], *serial_reg(s, i));
    vjson_uint(b, "overrun", s->overrun);
    vjson_uint(b, "thr_empty_pending", s->thr_empty_pending);
    uint8_t fifo[SERIAL_FIFO_SIZE];
    for (unsigned i = 0; i < s->rx_count; i++)
        fifo[i] = s->rx[(s->rx_head + i) % SERIAL_FIFO_SIZE];
    vjson_base64(b, "rx_fifo", fifo, s->rx_count);
    vjson_object_end(b);
    g_mutex_unlock(&s->lock);
}

bool serial_restore_state(struct serial *s, JsonObject *obj, GError **error)
{
    uint64_t regs[G_N_ELEMENTS(serial_regs)], overrun, thr;
    g_autofree uint8_t *fifo = NULL;
    size_t fifo_len = 0;
    for (unsigned i = 0; i < G_N_ELEMENTS(serial_regs); i++) {
        if (!state_get_uint(obj, serial_regs[i], 0xff, &regs[i], "serial", error))
            return false;
    }
    if (!state_get_uint(obj, "overrun", 1, &overrun, "serial", error) ||
        !state_get_uint(obj, "thr_empty_pending", 1, &thr, "serial", error) ||
        !state_get_blob_any(obj, "rx_fifo", &fifo, &fifo_len, "serial", error))
        return false;
    if (fifo_len > SERIAL_FIFO_SIZE) {
        g_set_error(error, STATE_ERROR, STATE_ERROR_INVALID, "state.json: serial: rx_fifo holds %zu bytes", fifo_len);
        return false;
    }
    g_mutex_lock(&s->lock);
    for (unsigned i = 0; i < G_N_ELEMENTS(serial_regs); i++)
        *serial_reg(s, i) = (uint8_t)regs[i];
    s->overrun = overrun;
    s->thr_empty_pending = thr;
    memcpy(s->rx, fifo, fifo_len);
    s->rx_head = 0;
    s->rx_count = (unsigned)fifo_len;
    s->irq_level = false; /* a fresh VM's line is low: raise it again if due */
    update_irq(s);
    g_mutex_unlock(&s->lock);
    return true;
}
