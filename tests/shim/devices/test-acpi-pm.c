/* ACPI PM: power button and SCI level, write-1-to-clear, S5, the reset
 * register, the PM timer, and odd access widths. */
#include <glib.h>

#include "boot/boot.h"
#include "devices/acpi-pm.h"

struct watch {
    bool sci;
    unsigned sci_changes, poweroffs, resets;
};

static void sci_line(void *opaque, unsigned gsi, bool level)
{
    struct watch *w = opaque;
    g_assert_cmpuint(gsi, ==, ACPI_SCI_IRQ);
    w->sci = level;
    w->sci_changes++;
}

static void on_poweroff(void *opaque)
{
    ((struct watch *)opaque)->poweroffs++;
}

static void on_reset(void *opaque)
{
    ((struct watch *)opaque)->resets++;
}

static struct acpi_pm *new_pm(struct watch *w)
{
    *w = (struct watch){ 0 };
    struct irq_line sci = { .set_level = sci_line, .opaque = w, .gsi = ACPI_SCI_IRQ };
    struct acpi_pm_callbacks cb = { .on_poweroff = on_poweroff, .on_reset = on_reset, .opaque = w };
    return acpi_pm_new(&sci, &cb);
}

#define STS ACPI_PM1A_EVT_PORT
#define EN (ACPI_PM1A_EVT_PORT + 2)

static void test_power_button_sci(void)
{
    struct watch w;
    struct acpi_pm *pm = new_pm(&w);
    /* Pressed while disabled: status set, no SCI. */
    acpi_pm_press_power_button(pm);
    g_assert_cmphex(acpi_pm_read(pm, STS, 2) & ACPI_PM1_PWRBTN_STS, ==, ACPI_PM1_PWRBTN_STS);
    g_assert_false(w.sci);
    /* Enabling with the status pending raises the SCI; it stays high (level). */
    acpi_pm_write(pm, EN, 2, ACPI_PM1_PWRBTN_EN);
    g_assert_true(w.sci);
    g_assert_cmphex(acpi_pm_read(pm, EN, 2), ==, ACPI_PM1_PWRBTN_EN);
    /* Writing 0 to the status changes nothing; writing 1 clears and drops the SCI. */
    acpi_pm_write(pm, STS, 2, 0);
    g_assert_true(w.sci);
    acpi_pm_write(pm, STS, 2, ACPI_PM1_PWRBTN_STS);
    g_assert_false(w.sci);
    g_assert_cmphex(acpi_pm_read(pm, STS, 2), ==, 0);
    /* Pressed while enabled: SCI at once. */
    acpi_pm_press_power_button(pm);
    g_assert_true(w.sci);
    /* One dword write at the block start: clears status, keeps enable. */
    acpi_pm_write(pm, STS, 4, ACPI_PM1_PWRBTN_STS | ((uint32_t)ACPI_PM1_PWRBTN_EN << 16));
    g_assert_false(w.sci);
    g_assert_cmphex(acpi_pm_read(pm, STS, 4), ==, (uint32_t)ACPI_PM1_PWRBTN_EN << 16);
    /* Disabling while pending drops the line. */
    acpi_pm_press_power_button(pm);
    g_assert_true(w.sci);
    acpi_pm_write(pm, EN + 1, 1, 0); /* the high byte holds PWRBTN_EN */
    g_assert_false(w.sci);
    g_assert_cmpuint(w.poweroffs + w.resets, ==, 0);
    acpi_pm_free(pm);
}

/* GPE0 (the VM generation ID's event): status raised by the device, SCI only
 * while enabled, write 1 to clear, and kept in the snapshot state. */
static void test_gpe(void)
{
    struct watch w;
    struct acpi_pm *pm = new_pm(&w);
    const uint16_t gpe_sts = ACPI_GPE0_PORT, gpe_en = ACPI_GPE0_PORT + ACPI_GPE0_LEN / 2;
    acpi_pm_raise_gpe(pm, ACPI_GPE_VMGENID);
    g_assert_cmphex(acpi_pm_read(pm, gpe_sts, 1), ==, 1u << ACPI_GPE_VMGENID);
    g_assert_false(w.sci);
    acpi_pm_write(pm, gpe_en, 1, 1u << ACPI_GPE_VMGENID);
    g_assert_true(w.sci);
    g_autoptr(JsonBuilder) b = json_builder_new();
    acpi_pm_save_state(pm, b);
    g_autoptr(JsonNode) saved = json_builder_get_root(b);
    acpi_pm_write(pm, gpe_sts, 1, 1u << ACPI_GPE_VMGENID);
    g_assert_false(w.sci);
    g_assert_cmphex(acpi_pm_read(pm, gpe_sts, 2), ==, 0);
    g_assert_cmphex(acpi_pm_read(pm, gpe_en, 2), ==, 1u << ACPI_GPE_VMGENID);
    /* A restored device has the pending event again, and its SCI. */
    struct watch w2;
    struct acpi_pm *restored = new_pm(&w2);
    GError *error = NULL;
    g_assert_true(acpi_pm_restore_state(restored, json_node_get_object(saved), &error));
    g_assert_no_error(error);
    g_assert_true(w2.sci);
    g_assert_cmphex(acpi_pm_read(restored, gpe_sts, 1), ==, 1u << ACPI_GPE_VMGENID);
    acpi_pm_free(restored);
    acpi_pm_free(pm);
}

static void test_sleep_states(void)
{
    struct watch w;
    struct acpi_pm *pm = new_pm(&w);
    g_assert_cmphex(acpi_pm_read(pm, ACPI_PM1A_CNT_PORT, 2) & 1, ==, 1); /* SCI_EN: ACPI mode */
    /* SLP_TYP = S5 without SLP_EN: only recorded. */
    acpi_pm_write(pm, ACPI_PM1A_CNT_PORT, 2, ACPI_S5_SLP_TYP << 10);
    g_assert_cmpuint(w.poweroffs, ==, 0);
    /* Another sleep type with SLP_EN: not a power-off. */
    acpi_pm_write(pm, ACPI_PM1A_CNT_PORT, 2, (1u << 10) | ACPI_PM1_SLP_EN);
    g_assert_cmpuint(w.poweroffs, ==, 0);
    g_assert_cmphex(acpi_pm_read(pm, ACPI_PM1A_CNT_PORT, 2) & ACPI_PM1_SLP_EN, ==, 0); /* write-only */
    acpi_pm_write(pm, ACPI_PM1A_CNT_PORT, 2, (ACPI_S5_SLP_TYP << 10) | ACPI_PM1_SLP_EN);
    g_assert_cmpuint(w.poweroffs, ==, 1);
    /* Byte-wise, high byte last (SLP_EN and SLP_TYP both live there). */
    uint16_t s5 = (ACPI_S5_SLP_TYP << 10) | ACPI_PM1_SLP_EN;
    acpi_pm_write(pm, ACPI_PM1A_CNT_PORT, 1, s5 & 0xff);
    acpi_pm_write(pm, ACPI_PM1A_CNT_PORT + 1, 1, s5 >> 8);
    g_assert_cmpuint(w.poweroffs, ==, 2);
    acpi_pm_free(pm);
}

static void test_reset_register(void)
{
    struct watch w;
    struct acpi_pm *pm = new_pm(&w);
    acpi_pm_write(pm, ACPI_RESET_PORT, 1, ACPI_RESET_VALUE + 1);
    g_assert_cmpuint(w.resets, ==, 0);
    acpi_pm_write(pm, ACPI_RESET_PORT, 1, ACPI_RESET_VALUE);
    g_assert_cmpuint(w.resets, ==, 1);
    g_assert_cmpuint(w.poweroffs, ==, 0);
    acpi_pm_free(pm);
}

static void test_timer(void)
{
    g_assert_cmpuint(acpi_pm_timer_ticks(0), ==, 0);
    g_assert_cmpuint(acpi_pm_timer_ticks(1000000000ull), ==, ACPI_PM_TIMER_HZ);
    g_assert_cmpuint(acpi_pm_timer_ticks(1000ull), ==, 3); /* 3.58 ticks per us */
    /* The 24-bit counter wraps after 2^24 ticks (about 4.7 s). */
    uint64_t wrap_ns = (1ull << 24) * 1000000000ull / ACPI_PM_TIMER_HZ + 1;
    g_assert_cmpuint(acpi_pm_timer_ticks(wrap_ns), <, 10);
    g_assert_cmpuint(acpi_pm_timer_ticks(wrap_ns - 1000), >, ACPI_PM_TIMER_MASK - 10);

    struct watch w;
    struct acpi_pm *pm = new_pm(&w);
    uint32_t t0 = acpi_pm_read(pm, ACPI_PM_TMR_PORT, 4);
    g_usleep(20000);
    uint32_t t1 = acpi_pm_read(pm, ACPI_PM_TMR_PORT, 4);
    g_assert_cmphex(t1 & ~ACPI_PM_TIMER_MASK, ==, 0);
    uint32_t elapsed = (t1 - t0) & ACPI_PM_TIMER_MASK; /* modular: fine across a wrap */
    g_test_message("20 ms = %u PM timer ticks", elapsed);
    g_assert_cmpuint(elapsed, >=, 20 * 3579);
    g_assert_cmpuint(elapsed, <, ACPI_PM_TIMER_HZ); /* generous: the machine may be busy */
    acpi_pm_free(pm);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/acpi-pm/power-button-sci", test_power_button_sci);
    g_test_add_func("/acpi-pm/gpe", test_gpe);
    g_test_add_func("/acpi-pm/sleep-states", test_sleep_states);
    g_test_add_func("/acpi-pm/reset-register", test_reset_register);
    g_test_add_func("/acpi-pm/timer", test_timer);
    return g_test_run();
}
