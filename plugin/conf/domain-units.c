/* UUIDs and memory sizes in the textual forms libvirt accepts. */
#include "conf/domain-conf.h"

#include <string.h>

#include "conf/xml-util.h"

void domain_uuid_format(const unsigned char uuid[16], char out[DOMAIN_UUID_STRING_LEN])
{
    static const char hex[] = "0123456789abcdef";
    size_t pos = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[pos++] = '-';
        out[pos++] = hex[uuid[i] >> 4];
        out[pos++] = hex[uuid[i] & 0xf];
    }
    out[pos] = '\0';
}

/* As libvirt: surrounding spaces are ignored and dashes may sit between any
 * two bytes, so both "4dea22b3-1d52-d8f3-2516-782e98ab3fa0" and the same
 * digits without dashes are the same UUID. */
bool domain_uuid_parse(const char *text, unsigned char uuid[16])
{
    if (!text)
        return false;
    while (*text == ' ')
        text++;
    for (int i = 0; i < 16; i++) {
        while (*text == '-')
            text++;
        int high = g_ascii_xdigit_value(text[0]);
        int low = high < 0 ? -1 : g_ascii_xdigit_value(text[1]);
        if (high < 0 || low < 0)
            return false;
        uuid[i] = (unsigned char)(high << 4 | low);
        text += 2;
    }
    while (*text == ' ')
        text++;
    return *text == '\0';
}

void domain_uuid_generate(unsigned char uuid[16])
{
    /* g_uuid_string_random gives a version 4 UUID from a good random source. */
    g_autofree char *text = g_uuid_string_random();
    bool ok = domain_uuid_parse(text, uuid);
    g_assert(ok);
}

/* Multiplier for a libvirt unit: "b"/"byte"/"bytes"; a scale letter
 * k m g t p e alone or followed by "iB" (powers of 1024) or "B" (powers of
 * 1000). Case does not matter, as in libvirt. 0 if unknown. */
static uint64_t unit_multiplier(const char *unit)
{
    static const char scales[] = "kmgtpe";
    if (!unit)
        return 1024;
    if (g_ascii_strcasecmp(unit, "b") == 0 || g_ascii_strcasecmp(unit, "byte") == 0 ||
        g_ascii_strcasecmp(unit, "bytes") == 0)
        return 1;
    const char *scale = unit[0] ? strchr(scales, g_ascii_tolower(unit[0])) : NULL;
    if (!scale)
        return 0;
    uint64_t base;
    if (unit[1] == '\0' || g_ascii_strcasecmp(unit + 1, "ib") == 0)
        base = 1024;
    else if (g_ascii_strcasecmp(unit + 1, "b") == 0)
        base = 1000;
    else
        return 0;
    uint64_t multiplier = 1;
    for (const char *s = scales; s <= scale; s++)
        multiplier *= base;
    return multiplier;
}

bool domain_memory_to_kib(const char *value, const char *unit, uint64_t *kib, GError **error)
{
    uint64_t multiplier = unit_multiplier(unit);
    if (multiplier == 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "unknown memory unit '%s'", unit);
        return false;
    }
    uint64_t number;
    if (!conf_parse_uint64(value, 0, G_MAXUINT64, "memory size", &number, error))
        return false;
    if (number > G_MAXUINT64 / multiplier) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "memory size %s %s is too large", value, unit ? unit : "KiB");
        return false;
    }
    uint64_t bytes = number * multiplier;
    *kib = bytes / 1024 + (bytes % 1024 ? 1 : 0);
    return true;
}
