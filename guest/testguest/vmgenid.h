/* The VM generation ID as a guest finds it: RSDP -> XSDT -> FADT -> DSDT,
 * the VGEN device's ADDR method for where the 16-byte id is, the FADT's
 * GPE0 block for the event that says it changed. For the command port's
 * VMGENID (commands.h). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Find it in the ACPI tables; false if they do not describe one. */
bool vmgenid_find(void);
/* The id's 16 bytes, as 32 lowercase hex digits plus NUL. */
void vmgenid_read_hex(char out[33]);
/* Whether GPE 0 (the change event) is pending, and clear it as an OSPM
 * would after running \_GPE._E00. */
bool vmgenid_take_event(void);
