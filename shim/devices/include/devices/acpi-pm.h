/* ACPI fixed hardware at the ports the FADT declares (platform/layout.h):
 * PM1a event block (status, write 1 to clear; enable), PM1a control (SLP_EN
 * with SLP_TYP = S5 powers off), the 3.579545 MHz PM timer, and the reset
 * register, and the GPE0 block (status, write 1 to clear; enable). The SCI
 * (GSI ACPI_SCI_IRQ, level-triggered) is high exactly while
 * (status & enable) != 0 in PM1 or in GPE0. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "platform/bus.h"
#include "platform/layout.h"

#define ACPI_PM_TIMER_HZ 3579545ull
/* 24-bit counter, the FADT's default (its flags do not set TMR_VAL_EXT). */
#define ACPI_PM_TIMER_MASK 0xffffffu

struct acpi_pm;

struct acpi_pm_callbacks {
    void (*on_poweroff)(void *opaque); /* S5 entered */
    void (*on_reset)(void *opaque);    /* reset register written */
    void *opaque;
};

struct acpi_pm *acpi_pm_new(const struct irq_line *sci, const struct acpi_pm_callbacks *cb);
void acpi_pm_free(struct acpi_pm *pm);
bool acpi_pm_attach(struct acpi_pm *pm, struct bus *bus);

/* The power button was pressed: set PWRBTN_STS, raise the SCI if enabled. */
void acpi_pm_press_power_button(struct acpi_pm *pm);

/* General-purpose event `gpe` (0..15) happened: set its GPE0 status bit,
 * raise the SCI if the guest enabled it (its \_GPE._Exx method then runs). */
void acpi_pm_raise_gpe(struct acpi_pm *pm, unsigned gpe);

/* Guest accesses; port is absolute (0x600..0x60f), len 1, 2 or 4. */
uint32_t acpi_pm_read(struct acpi_pm *pm, uint16_t port, unsigned len);
void acpi_pm_write(struct acpi_pm *pm, uint16_t port, unsigned len, uint32_t value);

/* PM timer value for a CLOCK_MONOTONIC time in nanoseconds (24 bits). */
uint32_t acpi_pm_timer_ticks(uint64_t monotonic_ns);

/* Snapshot state (state.json "devices.acpi_pm"): status, enable and control
 * registers (GPE0's absent in older snapshots: then clear). */
void acpi_pm_save_state(struct acpi_pm *pm, JsonBuilder *b);
bool acpi_pm_restore_state(struct acpi_pm *pm, JsonObject *obj, GError **error);
