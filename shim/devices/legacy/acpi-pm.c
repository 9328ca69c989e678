/* ACPI PM1a registers, PM timer and reset register. See acpi-pm.h.
 *
 * Accesses may be of any width at any offset (ACPICA reads PM1 status and
 * enable as 16-bit registers, some guests read the event block as one dword),
 * so reads are assembled byte by byte and writes are split into the registers
 * they cover.
 */
#include "devices/acpi-pm.h"

#include <glib.h>
#include <time.h>

#include "platform/layout.h"
#include "state/state-json.h"
#include "json/vjson.h"

/* One bus range covers all of boot.h's ports. */
G_STATIC_ASSERT(ACPI_PM1A_EVT_PORT >= ACPI_PM_PORT_BASE);
G_STATIC_ASSERT(ACPI_PM_TMR_PORT + 4 <= ACPI_PM_PORT_BASE + ACPI_PM_PORT_COUNT);
G_STATIC_ASSERT(ACPI_RESET_PORT < ACPI_PM_PORT_BASE + ACPI_PM_PORT_COUNT);
G_STATIC_ASSERT(ACPI_GPE0_PORT + ACPI_GPE0_LEN <= ACPI_PM_PORT_BASE + ACPI_PM_PORT_COUNT);

#define PM1_STS_OFFSET (ACPI_PM1A_EVT_PORT - ACPI_PM_PORT_BASE)
#define PM1_EN_OFFSET (PM1_STS_OFFSET + 2)
#define PM1_CNT_OFFSET (ACPI_PM1A_CNT_PORT - ACPI_PM_PORT_BASE)
#define PM_TMR_OFFSET (ACPI_PM_TMR_PORT - ACPI_PM_PORT_BASE)
#define RESET_OFFSET (ACPI_RESET_PORT - ACPI_PM_PORT_BASE)
#define GPE0_STS_OFFSET (ACPI_GPE0_PORT - ACPI_PM_PORT_BASE)
#define GPE0_EN_OFFSET (GPE0_STS_OFFSET + ACPI_GPE0_LEN / 2)

#define PM1_CNT_SCI_EN 0x0001   /* always set: the machine is in ACPI mode from the start */
#define PM1_CNT_SLP_TYP_SHIFT 10
#define PM1_CNT_SLP_TYP_MASK (7u << PM1_CNT_SLP_TYP_SHIFT)
#define PM1_STS_WRITABLE 0x8f31 /* TMR, BM, GBL, PWRBTN, SLPBTN, RTC, WAK */

struct acpi_pm {
    GMutex lock;
    struct irq_line sci;
    struct acpi_pm_callbacks cb;
    bool sci_level;
    uint16_t sts, en, cnt;
    uint16_t gpe_sts, gpe_en;
};

uint32_t acpi_pm_timer_ticks(uint64_t monotonic_ns)
{
    /* ns * 3579545 / 1e9 without overflowing: split into seconds and the rest. */
    uint64_t seconds = monotonic_ns / 1000000000ull, rest = monotonic_ns % 1000000000ull;
    return (uint32_t)(seconds * ACPI_PM_TIMER_HZ + rest * ACPI_PM_TIMER_HZ / 1000000000ull) & ACPI_PM_TIMER_MASK;
}

static uint32_t timer_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return acpi_pm_timer_ticks((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
}

static void update_sci_locked(struct acpi_pm *pm)
{
    bool level = (pm->sts & pm->en) != 0 || (pm->gpe_sts & pm->gpe_en) != 0;
    if (level != pm->sci_level) {
        pm->sci_level = level;
        irq_line_set(&pm->sci, level);
    }
}

static uint8_t read_byte_locked(struct acpi_pm *pm, unsigned offset, uint32_t timer)
{
    switch (offset) {
    case PM1_STS_OFFSET:
    case PM1_STS_OFFSET + 1:
        return (uint8_t)(pm->sts >> (8 * (offset - PM1_STS_OFFSET)));
    case PM1_EN_OFFSET:
    case PM1_EN_OFFSET + 1:
        return (uint8_t)(pm->en >> (8 * (offset - PM1_EN_OFFSET)));
    case PM1_CNT_OFFSET:
    case PM1_CNT_OFFSET + 1:
        return (uint8_t)((pm->cnt | PM1_CNT_SCI_EN) >> (8 * (offset - PM1_CNT_OFFSET)));
    case PM_TMR_OFFSET ... PM_TMR_OFFSET + 3:
        return (uint8_t)(timer >> (8 * (offset - PM_TMR_OFFSET)));
    case GPE0_STS_OFFSET:
    case GPE0_STS_OFFSET + 1:
        return (uint8_t)(pm->gpe_sts >> (8 * (offset - GPE0_STS_OFFSET)));
    case GPE0_EN_OFFSET:
    case GPE0_EN_OFFSET + 1:
        return (uint8_t)(pm->gpe_en >> (8 * (offset - GPE0_EN_OFFSET)));
    }
    return offset == RESET_OFFSET ? 0 : 0xff;
}

uint32_t acpi_pm_read(struct acpi_pm *pm, uint16_t port, unsigned len)
{
    uint32_t timer = timer_now(), value = 0;
    unsigned base = port - ACPI_PM_PORT_BASE;
    g_mutex_lock(&pm->lock);
    for (unsigned i = 0; i < len && i < 4; i++)
        value |= (uint32_t)read_byte_locked(pm, base + i, timer) << (8 * i);
    g_mutex_unlock(&pm->lock);
    return value;
}

/* The 16-bit register at reg_offset as touched by a write of len bytes of
 * value at offset: which of its bits were written, and with what. */
static bool covered(unsigned offset, unsigned len, uint32_t value, unsigned reg_offset, uint16_t *mask,
                    uint16_t *bits)
{
    *mask = 0;
    *bits = 0;
    for (unsigned i = 0; i < 2; i++) {
        unsigned byte = reg_offset + i;
        if (byte < offset || byte >= offset + len)
            continue;
        *mask |= (uint16_t)(0xff << (8 * i));
        *bits |= (uint16_t)(((value >> (8 * (byte - offset))) & 0xff) << (8 * i));
    }
    return *mask != 0;
}

enum pm_action { PM_NONE, PM_POWEROFF, PM_RESET };

static enum pm_action write_locked(struct acpi_pm *pm, unsigned offset, unsigned len, uint32_t value)
{
    uint16_t mask, bits;
    enum pm_action action = PM_NONE;
    if (covered(offset, len, value, PM1_STS_OFFSET, &mask, &bits))
        pm->sts &= ~(bits & mask & PM1_STS_WRITABLE); /* write 1 to clear */
    if (covered(offset, len, value, PM1_EN_OFFSET, &mask, &bits))
        pm->en = (pm->en & ~mask) | (bits & mask);
    if (covered(offset, len, value, GPE0_STS_OFFSET, &mask, &bits))
        pm->gpe_sts &= ~(bits & mask);
    if (covered(offset, len, value, GPE0_EN_OFFSET, &mask, &bits))
        pm->gpe_en = (pm->gpe_en & ~mask) | (bits & mask);
    if (covered(offset, len, value, PM1_CNT_OFFSET, &mask, &bits)) {
        uint16_t cnt = (pm->cnt & ~mask) | (bits & mask);
        unsigned slp_typ = (cnt & PM1_CNT_SLP_TYP_MASK) >> PM1_CNT_SLP_TYP_SHIFT;
        if ((cnt & ACPI_PM1_SLP_EN) && slp_typ == ACPI_S5_SLP_TYP)
            action = PM_POWEROFF;
        pm->cnt = cnt & ~ACPI_PM1_SLP_EN; /* SLP_EN is write-only */
    }
    if (offset <= RESET_OFFSET && RESET_OFFSET < offset + len &&
        ((value >> (8 * (RESET_OFFSET - offset))) & 0xff) == ACPI_RESET_VALUE)
        action = PM_RESET;
    update_sci_locked(pm);
    return action;
}

void acpi_pm_write(struct acpi_pm *pm, uint16_t port, unsigned len, uint32_t value)
{
    g_mutex_lock(&pm->lock);
    enum pm_action action = write_locked(pm, port - ACPI_PM_PORT_BASE, len, value);
    g_mutex_unlock(&pm->lock);
    /* Callbacks run unlocked: they may tear things down or call back in. */
    if (action == PM_POWEROFF && pm->cb.on_poweroff)
        pm->cb.on_poweroff(pm->cb.opaque);
    else if (action == PM_RESET && pm->cb.on_reset)
        pm->cb.on_reset(pm->cb.opaque);
}

void acpi_pm_press_power_button(struct acpi_pm *pm)
{
    g_mutex_lock(&pm->lock);
    pm->sts |= ACPI_PM1_PWRBTN_STS;
    update_sci_locked(pm);
    g_mutex_unlock(&pm->lock);
}

void acpi_pm_raise_gpe(struct acpi_pm *pm, unsigned gpe)
{
    g_return_if_fail(gpe < 8 * ACPI_GPE0_LEN / 2);
    g_mutex_lock(&pm->lock);
    pm->gpe_sts |= (uint16_t)(1u << gpe);
    update_sci_locked(pm);
    g_mutex_unlock(&pm->lock);
}

static void bus_read_cb(void *opaque, uint64_t offset, uint8_t *data, unsigned len)
{
    uint32_t value = acpi_pm_read(opaque, (uint16_t)(ACPI_PM_PORT_BASE + offset), len);
    for (unsigned i = 0; i < len; i++)
        data[i] = i < 4 ? (uint8_t)(value >> (8 * i)) : 0xff;
}

static void bus_write_cb(void *opaque, uint64_t offset, const uint8_t *data, unsigned len)
{
    uint32_t value = 0;
    for (unsigned i = 0; i < len && i < 4; i++)
        value |= (uint32_t)data[i] << (8 * i);
    acpi_pm_write(opaque, (uint16_t)(ACPI_PM_PORT_BASE + offset), MIN(len, 4u), value);
}

static const struct bus_ops acpi_pm_bus_ops = { .read = bus_read_cb, .write = bus_write_cb };

struct acpi_pm *acpi_pm_new(const struct irq_line *sci, const struct acpi_pm_callbacks *cb)
{
    struct acpi_pm *pm = g_new0(struct acpi_pm, 1);
    g_mutex_init(&pm->lock);
    pm->sci = *sci;
    pm->cb = *cb;
    return pm;
}

void acpi_pm_free(struct acpi_pm *pm)
{
    if (!pm)
        return;
    g_mutex_clear(&pm->lock);
    g_free(pm);
}

bool acpi_pm_attach(struct acpi_pm *pm, struct bus *bus)
{
    return bus_register(bus, ACPI_PM_PORT_BASE, ACPI_PM_PORT_COUNT, &acpi_pm_bus_ops, pm, "acpi-pm");
}

/* ---- snapshot state ---- */

void acpi_pm_save_state(struct acpi_pm *pm, JsonBuilder *b)
{
    g_mutex_lock(&pm->lock);
    vjson_object_begin(b, NULL);
    vjson_uint(b, "pm1_sts", pm->sts);
    vjson_uint(b, "pm1_en", pm->en);
    vjson_uint(b, "pm1_cnt", pm->cnt);
    vjson_uint(b, "gpe0_sts", pm->gpe_sts);
    vjson_uint(b, "gpe0_en", pm->gpe_en);
    vjson_object_end(b);
    g_mutex_unlock(&pm->lock);
}

bool acpi_pm_restore_state(struct acpi_pm *pm, JsonObject *obj, GError **error)
{
    uint64_t sts, en, cnt;
    if (!state_get_uint(obj, "pm1_sts", 0xffff, &sts, "acpi_pm", error) ||
        !state_get_uint(obj, "pm1_en", 0xffff, &en, "acpi_pm", error) ||
        !state_get_uint(obj, "pm1_cnt", 0xffff, &cnt, "acpi_pm", error))
        return false;
    uint64_t gpe_sts = 0, gpe_en = 0;
    if ((json_object_has_member(obj, "gpe0_sts") &&
         !state_get_uint(obj, "gpe0_sts", 0xffff, &gpe_sts, "acpi_pm", error)) ||
        (json_object_has_member(obj, "gpe0_en") && !state_get_uint(obj, "gpe0_en", 0xffff, &gpe_en, "acpi_pm", error)))
        return false;
    g_mutex_lock(&pm->lock);
    pm->sts = (uint16_t)sts;
    pm->en = (uint16_t)en;
    pm->cnt = (uint16_t)cnt;
    pm->gpe_sts = (uint16_t)gpe_sts;
    pm->gpe_en = (uint16_t)gpe_en;
    pm->sci_level = false; /* a fresh VM's line is low: raise it again if due */
    update_sci_locked(pm);
    g_mutex_unlock(&pm->lock);
    return true;
}
