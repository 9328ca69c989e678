/* ACPI fixed hardware as the shim declares it in its FADT, and the i8042 reset.
 * The port numbers mirror shim/boot/include/boot/boot.h (which needs glib, so it cannot be
 * included here); tests/boot/test_testguest.py checks they agree.
 */
#pragma once

#include <stdbool.h>

#define ACPI_PM1A_EVT_PORT 0x600
#define ACPI_PM1A_CNT_PORT 0x604
#define ACPI_S5_SLP_TYP 5
#define ACPI_PM1_PWRBTN_STS (1u << 8)
#define ACPI_PM1_SLP_EN (1u << 13)

#define I8042_COMMAND_PORT 0x64
#define I8042_CMD_RESET 0xfe

/* One port read: costs a VM exit, so call it every few milliseconds, not in a spin. */
bool acpi_power_button_pressed(void);

/* Ask for S5 (power off) or a reset. They return if the VMM ignores the request. */
void acpi_request_power_off(void);
void i8042_request_reset(void);
