/* The DSDT's AML, encoded by hand. Linux needs two things from it on this
 * machine: \_S5, the SLP_TYP values that power the VM off when written to
 * PM1a_CNT with SLP_EN (devices/legacy/acpi-pm.c), and the VM generation ID device
 * its vmgenid driver binds to (devices/legacy/vmgenid.c): where the 16-byte id is,
 * and the notification, through GPE 0, that it changed. Everything else
 * (CPUs, IOAPIC, power button, reset) is described by fixed tables.
 *
 *   Name (\_S5, Package (4) { S5, S5, 0, 0 })
 *   Scope (\_SB) {
 *       Device (VGEN) {
 *           Name (_HID, "VMGENCTR")
 *           Name (_CID, "VM_GEN_COUNTER")
 *           Name (_DDN, "VM_Gen_Counter")
 *           Method (ADDR, 0) { Return (Package (2) { low 32 bits, high 32 bits }) }
 *       }
 *   }
 *   Scope (\_GPE) { Method (_E00, 0) { Notify (\_SB.VGEN, 0x80) } }
 */
#include <string.h>

#include "boot-internal.h"

#define AML_NAME_OP 0x08
#define AML_PACKAGE_OP 0x12
#define AML_BYTE_PREFIX 0x0a
#define AML_ROOT_CHAR '\\'
#define AML_SCOPE_OP 0x10
#define AML_METHOD_OP 0x14
#define AML_EXT_OP_PREFIX 0x5b
#define AML_DEVICE_OP 0x82 /* after the prefix */
#define AML_STRING_PREFIX 0x0d
#define AML_DWORD_PREFIX 0x0c
#define AML_RETURN_OP 0xa4
#define AML_NOTIFY_OP 0x86
#define AML_DUAL_NAME_PREFIX 0x2e
#define ACPI_NOTIFY_DEVICE_CHECK_VMGENID 0x80 /* what Linux's vmgenid driver reacts to (any value does) */

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

static void aml_append(GByteArray *out, const void *data, size_t len)
{
    g_byte_array_append(out, data, (guint)len);
}

/* An opcode, PkgLength, then body (consumed). */
static void aml_package_of(GByteArray *out, const uint8_t *op, size_t oplen, GByteArray *body)
{
    aml_append(out, op, oplen);
    aml_pkg_length(out, body->len);
    aml_append(out, body->data, body->len);
    g_byte_array_unref(body);
}

/* Name (XXXX, "text") */
static void aml_name_string(GByteArray *out, const char name[4], const char *text)
{
    aml_byte(out, AML_NAME_OP);
    aml_append(out, name, 4);
    aml_byte(out, AML_STRING_PREFIX);
    aml_append(out, text, strlen(text) + 1);
}

static void aml_dword_const(GByteArray *out, uint32_t value)
{
    aml_byte(out, AML_DWORD_PREFIX);
    for (unsigned i = 0; i < 4; i++)
        aml_byte(out, (uint8_t)(value >> (8 * i)));
}

/* Method (ADDR, 0) { Return (Package (2) { low, high }) } */
static void aml_vmgenid_addr_method(GByteArray *out, uint64_t address)
{
    GByteArray *package = g_byte_array_new();
    aml_byte(package, 2); /* NumElements */
    aml_dword_const(package, (uint32_t)address);
    aml_dword_const(package, (uint32_t)(address >> 32));
    GByteArray *method = g_byte_array_new();
    aml_append(method, "ADDR", 4);
    aml_byte(method, 0); /* MethodFlags: no arguments, not serialized */
    aml_byte(method, AML_RETURN_OP);
    static const uint8_t package_op = AML_PACKAGE_OP;
    aml_package_of(method, &package_op, 1, package);
    static const uint8_t method_op = AML_METHOD_OP;
    aml_package_of(out, &method_op, 1, method);
}

/* Scope (\_SB) { Device (VGEN) { ... } } */
static void aml_vmgenid_device(GByteArray *out)
{
    GByteArray *device = g_byte_array_new();
    aml_append(device, "VGEN", 4);
    aml_name_string(device, "_HID", "VMGENCTR");
    aml_name_string(device, "_CID", "VM_GEN_COUNTER");
    aml_name_string(device, "_DDN", "VM_Gen_Counter");
    aml_vmgenid_addr_method(device, BOOT_VMGENID_ADDR);
    GByteArray *scope = g_byte_array_new();
    static const uint8_t sb[] = { AML_ROOT_CHAR, '_', 'S', 'B', '_' };
    aml_append(scope, sb, sizeof sb);
    static const uint8_t device_op[] = { AML_EXT_OP_PREFIX, AML_DEVICE_OP };
    aml_package_of(scope, device_op, sizeof device_op, device);
    static const uint8_t scope_op = AML_SCOPE_OP;
    aml_package_of(out, &scope_op, 1, scope);
}

/* Scope (\_GPE) { Method (_E00, 0) { Notify (\_SB.VGEN, 0x80) } }: the
 * edge-triggered GPE devices/legacy/acpi-pm.c raises for the VM generation ID. */
static void aml_vmgenid_gpe(GByteArray *out)
{
    GByteArray *method = g_byte_array_new();
    char name[5];
    g_snprintf(name, sizeof name, "_E%02X", ACPI_GPE_VMGENID);
    aml_append(method, name, 4);
    aml_byte(method, 0);
    aml_byte(method, AML_NOTIFY_OP);
    static const uint8_t target[] = { AML_ROOT_CHAR, AML_DUAL_NAME_PREFIX, '_', 'S', 'B', '_', 'V', 'G', 'E', 'N' };
    aml_append(method, target, sizeof target);
    aml_byte_const(method, ACPI_NOTIFY_DEVICE_CHECK_VMGENID);
    GByteArray *scope = g_byte_array_new();
    static const uint8_t gpe[] = { AML_ROOT_CHAR, '_', 'G', 'P', 'E' };
    aml_append(scope, gpe, sizeof gpe);
    static const uint8_t method_op = AML_METHOD_OP;
    aml_package_of(scope, &method_op, 1, method);
    static const uint8_t scope_op = AML_SCOPE_OP;
    aml_package_of(out, &scope_op, 1, scope);
}

GByteArray *acpi_dsdt_aml(void)
{
    GByteArray *aml = g_byte_array_new();
    static const uint8_t s5[] = { ACPI_S5_SLP_TYP, ACPI_S5_SLP_TYP, 0, 0 };
    aml_name_byte_package(aml, "_S5_", s5, G_N_ELEMENTS(s5));
    aml_vmgenid_device(aml);
    aml_vmgenid_gpe(aml);
    return aml;
}
