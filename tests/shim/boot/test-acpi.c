/* acpi_write_tables, read back the way an OS does: scan for the RSDP, follow
 * XSDT -> FADT -> FACS/DSDT and XSDT -> MADT, check every checksum and the
 * fields the shim's devices depend on (ports, SCI, reset register, \_S5).
 * Offsets are the ACPI 6.x specification's, written out here independently.
 */
#include <glib.h>
#include <string.h>

#include "boot/boot.h"
#include "platform/memory.h"

static uint8_t sum(const uint8_t *p, size_t n)
{
    uint8_t s = 0;
    while (n--)
        s += *p++;
    return s;
}

static uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

struct fixture {
    struct guest_memory mem;
};

/* A whole table at gpa, checked: signature, length within the BIOS area,
 * checksum zero. */
static const uint8_t *table_at(struct fixture *f, uint64_t gpa, const char *sig)
{
    g_assert_cmphex(gpa, >=, 0xe0000);
    const uint8_t *h = guest_memory_ptr(&f->mem, gpa, 36);
    g_assert_nonnull(h);
    g_assert_cmpmem(h, 4, sig, 4);
    uint32_t len = rd32(h + 4);
    g_assert_cmphex(gpa + len, <=, 0x100000);
    const uint8_t *t = guest_memory_ptr(&f->mem, gpa, len);
    g_assert_cmpuint(sum(t, len), ==, 0);
    return t;
}

/* Scan 0xe0000-0xfffff on 16-byte boundaries as Linux does. */
static uint64_t find_rsdp(struct fixture *f)
{
    const uint8_t *bios = guest_memory_ptr(&f->mem, 0xe0000, 0x20000);
    for (uint64_t off = 0; off < 0x20000; off += 16)
        if (memcmp(bios + off, "RSD PTR ", 8) == 0 && sum(bios + off, 20) == 0)
            return 0xe0000 + off;
    g_error("no RSDP in 0xe0000-0xfffff");
}

static void check_gas_io(const uint8_t *gas, uint16_t port, unsigned bits)
{
    g_assert_cmpuint(gas[0], ==, 1); /* system I/O */
    g_assert_cmpuint(gas[1], ==, bits);
    g_assert_cmpuint(gas[2], ==, 0);
    g_assert_cmphex(rd64(gas + 4), ==, port);
}

static const uint8_t *check_fadt(struct fixture *f, const uint8_t *fadt)
{
    g_assert_cmpuint(rd32(fadt + 4), ==, 276);
    g_assert_cmpuint(fadt[8], >=, 5);                      /* revision */
    g_assert_cmpuint(rd16(fadt + 46), ==, ACPI_SCI_IRQ);   /* SCI_INT */
    g_assert_cmphex(rd32(fadt + 56), ==, ACPI_PM1A_EVT_PORT);
    g_assert_cmphex(rd32(fadt + 64), ==, ACPI_PM1A_CNT_PORT);
    g_assert_cmphex(rd32(fadt + 76), ==, ACPI_PM_TMR_PORT);
    g_assert_cmpuint(fadt[88], ==, 4);                     /* PM1_EVT_LEN */
    g_assert_cmpuint(fadt[89], ==, 2);                     /* PM1_CNT_LEN */
    g_assert_cmpuint(fadt[91], ==, 4);                     /* PM_TMR_LEN */
    uint32_t flags = rd32(fadt + 112);
    g_assert_true(flags & (1u << 10));                     /* RESET_REG_SUP */
    g_assert_false(flags & (1u << 20));                    /* not HW_REDUCED_ACPI */
    check_gas_io(fadt + 116, ACPI_RESET_PORT, 8);          /* RESET_REG */
    g_assert_cmpuint(fadt[128], ==, ACPI_RESET_VALUE);
    check_gas_io(fadt + 148, ACPI_PM1A_EVT_PORT, 32);      /* X_PM1a_EVT_BLK */
    check_gas_io(fadt + 172, ACPI_PM1A_CNT_PORT, 16);      /* X_PM1a_CNT_BLK */
    check_gas_io(fadt + 208, ACPI_PM_TMR_PORT, 32);        /* X_PM_TMR_BLK */
    g_assert_cmphex(rd32(fadt + 80), ==, ACPI_GPE0_PORT);  /* GPE0_BLK */
    g_assert_cmpuint(fadt[92], ==, ACPI_GPE0_LEN);         /* GPE0_BLK_LEN */
    check_gas_io(fadt + 220, ACPI_GPE0_PORT, 8 * ACPI_GPE0_LEN); /* X_GPE0_BLK */

    uint64_t facs_addr = rd32(fadt + 36) ? rd32(fadt + 36) : rd64(fadt + 132);
    g_assert_cmphex(facs_addr % 64, ==, 0);
    const uint8_t *facs = guest_memory_ptr(&f->mem, facs_addr, 64);
    g_assert_cmpmem(facs, 4, "FACS", 4);
    g_assert_cmpuint(rd32(facs + 4), ==, 64);

    g_assert_cmphex(rd32(fadt + 40), ==, rd64(fadt + 140)); /* DSDT == X_DSDT */
    return table_at(f, rd64(fadt + 140), "DSDT");
}

/* Decode PkgLength at p; returns its value, sets *n to its own size. */
static size_t pkg_length(const uint8_t *p, size_t *n)
{
    unsigned extra = p[0] >> 6;
    *n = 1 + extra;
    if (extra == 0)
        return p[0] & 0x3f;
    size_t v = p[0] & 0x0f;
    for (unsigned i = 0; i < extra; i++)
        v |= (size_t)p[1 + i] << (4 + 8 * i);
    return v;
}

/* Find Name(_S5_, Package) in the AML and decode its integer elements. */
static void check_s5(const uint8_t *dsdt)
{
    uint32_t len = rd32(dsdt + 4);
    const uint8_t *aml = dsdt + 36, *end = dsdt + len;
    const uint8_t *p = NULL;
    for (const uint8_t *q = aml; q + 5 < end; q++)
        if (q[0] == 0x08 && (memcmp(q + 1, "_S5_", 4) == 0 || (q[1] == '\\' && memcmp(q + 2, "_S5_", 4) == 0)))
            p = q + (q[1] == '\\' ? 6 : 5);
    g_assert_nonnull(p);
    g_assert_cmphex(p[0], ==, 0x12); /* PackageOp */
    size_t nlen, plen = pkg_length(p + 1, &nlen);
    g_assert_true(p + 1 + plen <= end);
    const uint8_t *e = p + 1 + nlen;
    g_assert_cmpuint(e[0], ==, 4); /* NumElements */
    e++;
    unsigned values[4];
    for (int i = 0; i < 4; i++) {
        if (e[0] == 0x0a) {        /* BytePrefix */
            values[i] = e[1];
            e += 2;
        } else if (e[0] == 0x00) { /* ZeroOp */
            values[i] = 0;
            e++;
        } else if (e[0] == 0x01) { /* OneOp */
            values[i] = 1;
            e++;
        } else {
            g_error("unexpected AML byte 0x%02x in \\_S5", e[0]);
        }
    }
    g_assert_true(e == p + 1 + plen); /* PkgLength covered exactly the package */
    g_assert_cmpuint(values[0], ==, ACPI_S5_SLP_TYP);
    g_assert_cmpuint(values[1], ==, ACPI_S5_SLP_TYP);
    g_assert_cmpuint(values[2], ==, 0);
    g_assert_cmpuint(values[3], ==, 0);
    /* And the literal bytes the brief asks for. */
    static const uint8_t expect[] = { 0x12, 0x0a, 0x04, 0x0a, ACPI_S5_SLP_TYP, 0x0a, ACPI_S5_SLP_TYP,
                                      0x0a, 0x00, 0x0a, 0x00 };
    g_assert_cmpmem(p, sizeof expect, expect, sizeof expect);
}

/* ---- an AML reader for the opcodes the DSDT may hold (ACPI 6.x, 20.2) ---- */

/* What the walk found, by the ACPI path of each object. */
struct aml_found {
    char hid[32], cid[32];
    bool vgen;                 /* \_SB.VGEN is a Device */
    bool addr_method;          /* \_SB.VGEN.ADDR is a Method with no arguments */
    uint32_t addr[2];          /* what it returns */
    unsigned addr_elements;
    bool gpe_notify;           /* \_GPE._E00 notifies \_SB.VGEN with 0x80 */
};

struct aml_cursor {
    const uint8_t *p, *end;
};

static void need(const struct aml_cursor *c, size_t n)
{
    if (c->p + n > c->end)
        g_error("AML runs past its enclosing package");
}

/* A NameString: root or parent prefixes, then one NameSeg, a dual or multi
 * name. Written out with dots ("\_SB_.VGEN"). */
static void aml_name(struct aml_cursor *c, char *out, size_t max)
{
    size_t n = 0;
    need(c, 1);
    while (*c->p == '\\' || *c->p == '^') {
        out[n++] = (char)*c->p++;
        need(c, 1);
    }
    unsigned segs = 1;
    if (*c->p == 0x2e) {
        segs = 2;
        c->p++;
    } else if (*c->p == 0x2f) {
        c->p++;
        need(c, 1);
        segs = *c->p++;
    } else if (*c->p == 0x00) {
        c->p++;
        segs = 0;
    }
    for (unsigned i = 0; i < segs; i++) {
        need(c, 4);
        g_assert_cmpuint(n + 6, <, max);
        if (i)
            out[n++] = '.';
        memcpy(out + n, c->p, 4);
        n += 4;
        c->p += 4;
    }
    out[n] = '\0';
}

/* PkgLength at the cursor; returns the end of the package it measures. */
static const uint8_t *aml_package_end(struct aml_cursor *c)
{
    const uint8_t *start = c->p;
    need(c, 1);
    size_t nlen, len = pkg_length(c->p, &nlen);
    need(c, nlen);
    c->p += nlen;
    if (start + len > c->end)
        g_error("a PkgLength of %zu reaches past its parent", len);
    return start + len;
}

/* A data object: an integer (set *value) or a string (copied to text). */
static void aml_data(struct aml_cursor *c, uint64_t *value, char *text, size_t max)
{
    need(c, 1);
    uint8_t op = *c->p++;
    switch (op) {
    case 0x00: *value = 0; return;
    case 0x01: *value = 1; return;
    case 0x0a: need(c, 1); *value = c->p[0]; c->p += 1; return;
    case 0x0b: need(c, 2); *value = rd16(c->p); c->p += 2; return;
    case 0x0c: need(c, 4); *value = rd32(c->p); c->p += 4; return;
    case 0x0e: need(c, 8); *value = rd64(c->p); c->p += 8; return;
    case 0x0d: {
        size_t len = strnlen((const char *)c->p, (size_t)(c->end - c->p));
        need(c, len + 1);
        g_assert_nonnull(text);
        g_assert_cmpuint(len, <, max);
        memcpy(text, c->p, len + 1);
        c->p += len + 1;
        return;
    }
    }
    g_error("unexpected AML data opcode 0x%02x", op);
}

static void aml_terms(struct aml_cursor *c, const char *scope, struct aml_found *f);

/* Package (n) { integers... }: only the ADDR method's, the \_S5 one is checked above. */
static void aml_return_package(struct aml_cursor *c, struct aml_found *f)
{
    need(c, 1);
    g_assert_cmphex(*c->p++, ==, 0x12);
    const uint8_t *end = aml_package_end(c);
    struct aml_cursor body = { c->p, end };
    need(&body, 1);
    unsigned n = *body.p++;
    g_assert_cmpuint(n, <=, 2);
    for (unsigned i = 0; i < n; i++) {
        uint64_t v = 0;
        aml_data(&body, &v, NULL, 0);
        g_assert_cmphex(v, <=, 0xffffffffu);
        f->addr[i] = (uint32_t)v;
    }
    f->addr_elements = n;
    g_assert_true(body.p == body.end);
    c->p = body.end;
}

static void aml_method(struct aml_cursor *c, const char *scope, struct aml_found *f)
{
    const uint8_t *end = aml_package_end(c);
    struct aml_cursor body = { c->p, end };
    char name[64], path[160];
    aml_name(&body, name, sizeof name);
    g_snprintf(path, sizeof path, "%s.%s", scope, name);
    need(&body, 1);
    uint8_t flags = *body.p++;
    if (strcmp(path, "\\_SB_.VGEN.ADDR") == 0) {
        g_assert_cmpuint(flags & 7, ==, 0);
        need(&body, 1);
        g_assert_cmphex(*body.p++, ==, 0xa4); /* Return */
        aml_return_package(&body, f);
        f->addr_method = true;
    } else if (strcmp(path, "\\_GPE._E00") == 0) {
        need(&body, 1);
        g_assert_cmphex(*body.p++, ==, 0x86); /* Notify */
        char target[64];
        aml_name(&body, target, sizeof target);
        uint64_t value = 0;
        aml_data(&body, &value, NULL, 0);
        f->gpe_notify = strcmp(target, "\\_SB_.VGEN") == 0 && value == 0x80;
    } else {
        g_error("unexpected method %s", path);
    }
    g_assert_true(body.p == body.end); /* the PkgLength covered the method exactly */
    c->p = body.end;
}

static void aml_name_object(struct aml_cursor *c, const char *scope, struct aml_found *f)
{
    char name[64];
    aml_name(c, name, sizeof name);
    if (strstr(name, "_S5_")) { /* checked by check_s5 */
        need(c, 1);
        g_assert_cmphex(*c->p++, ==, 0x12);
        c->p = aml_package_end(c);
        return;
    }
    char text[64] = "";
    uint64_t value = 0;
    aml_data(c, &value, text, sizeof text);
    if (strcmp(scope, "\\_SB_.VGEN") == 0 && strcmp(name, "_HID") == 0)
        g_strlcpy(f->hid, text, sizeof f->hid);
    if (strcmp(scope, "\\_SB_.VGEN") == 0 && strcmp(name, "_CID") == 0)
        g_strlcpy(f->cid, text, sizeof f->cid);
}

static void aml_terms(struct aml_cursor *c, const char *scope, struct aml_found *f)
{
    while (c->p < c->end) {
        uint8_t op = *c->p++;
        char name[64], inner[160];
        if (op == 0x08) {
            aml_name_object(c, scope, f);
        } else if (op == 0x10 || (op == 0x5b && c->p < c->end && *c->p == 0x82)) {
            bool device = op == 0x5b;
            if (device)
                c->p++;
            const uint8_t *end = aml_package_end(c);
            struct aml_cursor body = { c->p, end };
            aml_name(&body, name, sizeof name);
            if (name[0] == '\\')
                g_strlcpy(inner, name, sizeof inner);
            else
                g_snprintf(inner, sizeof inner, "%s.%s", scope, name);
            if (device && strcmp(inner, "\\_SB_.VGEN") == 0)
                f->vgen = true;
            aml_terms(&body, inner, f);
            c->p = body.end;
        } else if (op == 0x14) {
            aml_method(c, scope, f);
        } else {
            g_error("unexpected AML opcode 0x%02x in %s", op, scope);
        }
    }
}

/* The whole DSDT body parses, every PkgLength nests, and the VM generation
 * ID device is what Linux's vmgenid driver looks for. */
static void check_vmgenid_aml(const uint8_t *dsdt)
{
    struct aml_cursor c = { dsdt + 36, dsdt + rd32(dsdt + 4) };
    struct aml_found f = { 0 };
    aml_terms(&c, "\\", &f);
    g_assert_true(f.vgen);
    g_assert_cmpstr(f.hid, ==, "VMGENCTR");
    g_assert_cmpstr(f.cid, ==, "VM_GEN_COUNTER");
    g_assert_true(f.addr_method);
    g_assert_cmpuint(f.addr_elements, ==, 2);
    uint64_t addr = f.addr[0] | (uint64_t)f.addr[1] << 32;
    g_assert_cmphex(addr, ==, BOOT_VMGENID_ADDR);
    g_assert_cmphex(addr % 8, ==, 0);
    /* In the e820-reserved BIOS area, clear of the ACPI tables and SMBIOS. */
    g_assert_cmphex(addr, >=, BOOT_ACPI_TABLES_END);
    g_assert_cmphex(addr + 16, <=, BOOT_SMBIOS_ENTRY);
    g_assert_true(f.gpe_notify);
}

static void check_madt(const uint8_t *madt, unsigned ncpus)
{
    uint32_t len = rd32(madt + 4);
    g_assert_cmphex(rd32(madt + 36), ==, 0xfee00000);
    unsigned lapics = 0, ioapics = 0, irq0_to_gsi2 = 0, sci_level_high = 0;
    uint32_t off = 44;
    while (off < len) {
        const uint8_t *e = madt + off;
        g_assert_cmpuint(e[1], >=, 2);
        switch (e[0]) {
        case 0: /* Processor Local APIC: uid, apic id, flags */
            g_assert_cmpuint(e[1], ==, 8);
            g_assert_cmpuint(e[3], ==, lapics);
            g_assert_true(rd32(e + 4) & 1);
            lapics++;
            break;
        case 1: /* IOAPIC: id, address, GSI base */
            g_assert_cmpuint(e[1], ==, 12);
            g_assert_cmpuint(e[2], ==, ncpus);
            g_assert_cmphex(rd32(e + 4), ==, 0xfec00000);
            g_assert_cmpuint(rd32(e + 8), ==, 0);
            ioapics++;
            break;
        case 2: /* Interrupt Source Override: bus, source, GSI, flags */
            g_assert_cmpuint(e[1], ==, 10);
            if (e[3] == 0 && rd32(e + 4) == 2)
                irq0_to_gsi2++;
            if (e[3] == ACPI_SCI_IRQ && rd32(e + 4) == ACPI_SCI_IRQ && rd16(e + 8) == 0xd)
                sci_level_high++;
            break;
        case 4: /* Local APIC NMI */
            g_assert_cmpuint(e[1], ==, 6);
            break;
        default:
            g_error("unexpected MADT entry type %u", e[0]);
        }
        off += e[1];
    }
    g_assert_cmpuint(off, ==, len);
    g_assert_cmpuint(lapics, ==, ncpus);
    g_assert_cmpuint(ioapics, ==, 1);
    g_assert_cmpuint(irq0_to_gsi2, ==, 1);
    g_assert_cmpuint(sci_level_high, ==, 1);
}

static void test_tables(gconstpointer data)
{
    unsigned ncpus = GPOINTER_TO_UINT(data);
    struct fixture f;
    GError *error = NULL;
    g_assert_true(guest_memory_init(&f.mem, 128ull << 20, &error));
    g_assert_true(acpi_write_tables(&f.mem, ncpus, &error));
    g_assert_no_error(error);

    uint64_t rsdp_addr = find_rsdp(&f);
    g_assert_cmphex(rsdp_addr, ==, BOOT_ACPI_RSDP);
    const uint8_t *rsdp = guest_memory_ptr(&f.mem, rsdp_addr, 36);
    g_assert_cmpuint(rsdp[15], ==, 2);           /* revision */
    g_assert_cmpuint(rd32(rsdp + 20), ==, 36);   /* length */
    g_assert_cmpuint(sum(rsdp, 36), ==, 0);      /* extended checksum */

    const uint8_t *xsdt = table_at(&f, rd64(rsdp + 24), "XSDT");
    unsigned n = (rd32(xsdt + 4) - 36) / 8;
    const uint8_t *fadt = NULL, *madt = NULL;
    for (unsigned i = 0; i < n; i++) {
        uint64_t addr = rd64(xsdt + 36 + 8 * i);
        const uint8_t *h = guest_memory_ptr(&f.mem, addr, 4);
        if (memcmp(h, "FACP", 4) == 0)
            fadt = table_at(&f, addr, "FACP");
        else if (memcmp(h, "APIC", 4) == 0)
            madt = table_at(&f, addr, "APIC");
    }
    g_assert_nonnull(fadt);
    g_assert_nonnull(madt);
    const uint8_t *dsdt = check_fadt(&f, fadt);
    check_s5(dsdt);
    check_vmgenid_aml(dsdt);
    check_madt(madt, ncpus);
    guest_memory_release(&f.mem);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_data_func("/acpi/1-cpu", GUINT_TO_POINTER(1), test_tables);
    g_test_add_data_func("/acpi/8-cpus", GUINT_TO_POINTER(8), test_tables);
    g_test_add_data_func("/acpi/64-cpus", GUINT_TO_POINTER(64), test_tables);
    return g_test_run();
}
