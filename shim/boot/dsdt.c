/* The DSDT's AML, encoded by hand: the only object Linux needs from it on this
 * machine is \_S5, the SLP_TYP values that power the VM off when written to
 * PM1a_CNT with SLP_EN (devices/acpi-pm.c). Everything else (CPUs, IOAPIC,
 * power button, reset) is described by fixed tables.
 *
 *   Name (\_S5, Package (4) { S5, S5, 0, 0 })
 */
#include "boot-internal.h"

#define AML_NAME_OP 0x08
#define AML_PACKAGE_OP 0x12
#define AML_BYTE_PREFIX 0x0a
#define AML_ROOT_CHAR '\\'

static void aml_byte(GByteArray *out, uint8_t b)
{
    g_byte_array_append(out, &b, 1);
}

/* PkgLength counts itself: one byte up to 63, else a lead byte with the byte
 * count in bits 7:6 and the low nibble, followed by the rest 8 bits at a time. */
static void aml_pkg_length(GByteArray *out, size_t body_len)
{
    for (unsigned extra = 0; extra <= 3; extra++) {
        size_t total = body_len + 1 + extra;
        if (extra == 0 && total <= 0x3f) {
            aml_byte(out, total);
            return;
        }
        if (extra > 0 && total < (1ull << (4 + 8 * extra))) {
            aml_byte(out, (extra << 6) | (total & 0x0f));
            for (unsigned i = 0; i < extra; i++)
                aml_byte(out, total >> (4 + 8 * i));
            return;
        }
    }
    g_assert_not_reached(); /* AML packages are < 256 MiB */
}

static void aml_byte_const(GByteArray *out, uint8_t value)
{
    aml_byte(out, AML_BYTE_PREFIX);
    aml_byte(out, value);
}

/* Name (\XXXX, Package (n) { bytes... }) */
static void aml_name_byte_package(GByteArray *out, const char name[4], const uint8_t *values, unsigned n)
{
    GByteArray *body = g_byte_array_new();
    aml_byte(body, n); /* NumElements */
    for (unsigned i = 0; i < n; i++)
        aml_byte_const(body, values[i]);

    aml_byte(out, AML_NAME_OP);
    aml_byte(out, AML_ROOT_CHAR);
    g_byte_array_append(out, (const uint8_t *)name, 4);
    aml_byte(out, AML_PACKAGE_OP);
    aml_pkg_length(out, body->len);
    g_byte_array_append(out, body->data, body->len);
    g_byte_array_unref(body);
}

GByteArray *acpi_dsdt_aml(void)
{
    GByteArray *aml = g_byte_array_new();
    static const uint8_t s5[] = { ACPI_S5_SLP_TYP, ACPI_S5_SLP_TYP, 0, 0 };
    aml_name_byte_package(aml, "_S5_", s5, G_N_ELEMENTS(s5));
    return aml;
}
