/* The host CPU as /proc/cpuinfo describes it, and the kernel's CPU list
 * syntax. Only the first processor block is read: every CPU of an x86 host
 * has the same vendor, model and flags. */
#include "conf/capabilities.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Lists longer than this are refused rather than allocated. */
#define HOST_MAX_CPUS 8192

static const char *vendor_name(const char *vendor_id)
{
    if (strcmp(vendor_id, "GenuineIntel") == 0)
        return "Intel";
    if (strcmp(vendor_id, "AuthenticAMD") == 0)
        return "AMD";
    if (strcmp(vendor_id, "HygonGenuine") == 0)
        return "Hygon";
    return vendor_id;
}

static unsigned parse_unsigned(const char *value, int base)
{
    char *end = NULL;
    errno = 0;
    unsigned long long number = strtoull(value, &end, base);
    if (errno || end == value || number > G_MAXUINT)
        return 0;
    return (unsigned)number;
}

static void set_flags(struct host_cpu_info *cpu, const char *value)
{
    g_auto(GStrv) words = g_strsplit_set(value, " \t", -1);
    for (char **w = words; *w; w++)
        if (**w)
            g_ptr_array_add(cpu->flags, g_strdup(*w));
}

/* One "key : value" line of the first processor block. */
static void apply_field(struct host_cpu_info *cpu, const char *key, const char *value)
{
    if (strcmp(key, "vendor_id") == 0) {
        g_free(cpu->vendor);
        cpu->vendor = g_strdup(vendor_name(value));
    } else if (strcmp(key, "model name") == 0) {
        g_free(cpu->model);
        cpu->model = g_strdup(value);
    } else if (strcmp(key, "cpu family") == 0) {
        cpu->family = parse_unsigned(value, 10);
    } else if (strcmp(key, "model") == 0) {
        cpu->model_number = parse_unsigned(value, 10);
    } else if (strcmp(key, "stepping") == 0) {
        cpu->stepping = parse_unsigned(value, 10);
    } else if (strcmp(key, "microcode") == 0) {
        cpu->microcode = g_ascii_strtoull(value, NULL, 0);
    } else if (strcmp(key, "cpu MHz") == 0) {
        cpu->mhz = (unsigned)g_ascii_strtod(value, NULL);
    } else if (strcmp(key, "address sizes") == 0) {
        cpu->phys_bits = parse_unsigned(value, 10);
    } else if (strcmp(key, "flags") == 0) {
        set_flags(cpu, value);
    }
}

bool host_cpu_parse_cpuinfo(const char *text, struct host_cpu_info *cpu, GError **error)
{
    if (!cpu->flags)
        cpu->flags = g_ptr_array_new_with_free_func(g_free);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    bool in_block = false;
    for (char **line = lines; *line; line++) {
        char *colon = strchr(*line, ':');
        if (!colon) {
            if (in_block && g_strstrip(*line)[0] == '\0')
                break; /* end of the first processor */
            continue;
        }
        *colon = '\0';
        const char *key = g_strstrip(*line);
        const char *value = g_strstrip(colon + 1);
        in_block = true;
        apply_field(cpu, key, value);
    }
    if (!cpu->vendor) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR,
                    "cannot find the CPU vendor in /proc/cpuinfo");
        return false;
    }
    return true;
}

static bool parse_cpu_number(const char *text, unsigned *out, GError **error)
{
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text || *end || value >= HOST_MAX_CPUS || !g_ascii_isdigit(text[0])) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR, "bad CPU number '%s' in a CPU list", text);
        return false;
    }
    *out = (unsigned)value;
    return true;
}

bool host_parse_cpu_list(const char *text, GArray *ids, GError **error)
{
    g_autofree char *copy = g_strstrip(g_strdup(text));
    if (copy[0] == '\0')
        return true;
    g_auto(GStrv) ranges = g_strsplit(copy, ",", -1);
    for (char **range = ranges; *range; range++) {
        char *dash = strchr(*range, '-');
        unsigned first, last;
        if (dash)
            *dash = '\0';
        if (!parse_cpu_number(*range, &first, error) || !parse_cpu_number(dash ? dash + 1 : *range, &last, error))
            return false;
        if (last < first) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR, "bad CPU range %u-%u", first, last);
            return false;
        }
        for (unsigned id = first; id <= last; id++)
            g_array_append_val(ids, id);
    }
    return true;
}
