#include "acpi.h"

#include "io.h"

bool acpi_power_button_pressed(void)
{
    return inw(ACPI_PM1A_EVT_PORT) & ACPI_PM1_PWRBTN_STS;
}

void acpi_request_power_off(void)
{
    outw(ACPI_PM1A_CNT_PORT, (uint16_t)((ACPI_S5_SLP_TYP << 10) | ACPI_PM1_SLP_EN));
}

void i8042_request_reset(void)
{
    outb(I8042_COMMAND_PORT, I8042_CMD_RESET);
}
