/* The host's statistics and SMBIOS identity (see node-stats.h). */
#include "driver/node-stats.h"

#include <libvirt/libvirt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/virt-error.h"

/* ---- memory ---- */

static char *node_meminfo_path(const char *sys, int cell)
{
    return g_strdup_printf("%s/devices/system/node/node%d/meminfo", sys, cell);
}

/* A meminfo line's value in KiB: "Name: N kB", or for a NUMA node's file
 * "Node C Name: N kB". */
static bool meminfo_value(const char *text, const char *name, uint64_t *kib)
{
    g_autofree char *key = g_strdup_printf("%s:", name);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        const char *p = *l;
        if (g_str_has_prefix(p, "Node ")) {
            p = strchr(p + 5, ' ');
            if (!p)
                continue;
            p++;
        }
        if (g_str_has_prefix(p, key)) {
            *kib = g_ascii_strtoull(p + strlen(key), NULL, 10);
            return true;
        }
    }
    return false;
}

static char *read_text(const char *path, GError **error)
{
    char *text = NULL;
    g_autoptr(GError) local = NULL;
    if (g_file_get_contents(path, &text, NULL, &local))
        return text;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot read %s: %s", path, local->message);
    return NULL;
}

static bool node_exists(const char *sys, int cell)
{
    g_autofree char *path = node_meminfo_path(sys, cell);
    return cell >= 0 && g_file_test(path, G_FILE_TEST_EXISTS);
}

bool node_memory_stats(const char *proc, const char *sys, int cell, struct node_stat *out, unsigned *n,
                       GError **error)
{
    if (cell != VIR_NODE_MEMORY_STATS_ALL_CELLS && !node_exists(sys, cell)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "Invalid cell number %d", cell);
        return false;
    }
    g_autofree char *path = cell == VIR_NODE_MEMORY_STATS_ALL_CELLS ? g_strdup_printf("%s/meminfo", proc)
                                                                     : node_meminfo_path(sys, cell);
    g_autofree char *text = read_text(path, error);
    if (!text)
        return false;
    static const struct {
        const char *name, *field;
    } fields[NODE_STATS_MAX] = {
        {"MemTotal", VIR_NODE_MEMORY_STATS_TOTAL}, {"MemFree", VIR_NODE_MEMORY_STATS_FREE},
        {"Buffers", VIR_NODE_MEMORY_STATS_BUFFERS}, {"Cached", VIR_NODE_MEMORY_STATS_CACHED},
    };
    *n = 0;
    for (unsigned i = 0; i < NODE_STATS_MAX; i++) {
        uint64_t kib;
        if (meminfo_value(text, fields[i].name, &kib))
            out[(*n)++] = (struct node_stat){fields[i].field, kib};
    }
    if (*n == 0)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR, "no memory statistics in %s", path);
    return *n > 0;
}

/* ---- CPU ---- */

bool node_cpu_stats(const char *proc, int cpu, struct node_stat *out, unsigned *n, GError **error)
{
    g_autofree char *path = g_strdup_printf("%s/stat", proc);
    g_autofree char *text = read_text(path, error);
    if (!text)
        return false;
    g_autofree char *key = cpu == VIR_NODE_CPU_STATS_ALL_CPUS ? g_strdup("cpu ") : g_strdup_printf("cpu%d ", cpu);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    const char *line = NULL;
    for (char **l = lines; *l && !line; l++)
        if (cpu >= VIR_NODE_CPU_STATS_ALL_CPUS && g_str_has_prefix(*l, key))
            line = *l;
    unsigned long long t[8] = {0}; /* user nice system idle iowait irq softirq steal, in ticks */
    if (!line || sscanf(line + strlen(key), "%llu %llu %llu %llu %llu %llu %llu %llu", &t[0], &t[1], &t[2],
                        &t[3], &t[4], &t[5], &t[6], &t[7]) < 4) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "Invalid cpuNum %d: the host has no such CPU",
                    cpu);
        return false;
    }
    uint64_t ns_per_tick = 1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK);
    out[0] = (struct node_stat){VIR_NODE_CPU_STATS_KERNEL, (t[2] + t[5] + t[6]) * ns_per_tick};
    out[1] = (struct node_stat){VIR_NODE_CPU_STATS_USER, (t[0] + t[1]) * ns_per_tick};
    out[2] = (struct node_stat){VIR_NODE_CPU_STATS_IDLE, t[3] * ns_per_tick};
    out[3] = (struct node_stat){VIR_NODE_CPU_STATS_IOWAIT, t[4] * ns_per_tick};
    *n = 4;
    return true;
}

/* ---- SMBIOS ---- */

/* A DMI attribute, trimmed; NULL when the kernel has none or it is empty
 * (product_serial and product_uuid are root's only: NULL for others too). */
static char *dmi_attr(const char *dir, const char *name)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    g_strstrip(text);
    return *text ? g_steal_pointer(&text) : NULL;
}

struct dmi_entry {
    const char *entry, *attr;
};

/* Appends the block and says whether it had any entry. */
static bool format_block(GString *out, const char *dir, const char *block, const struct dmi_entry *entries,
                         size_t n)
{
    g_autoptr(GString) body = g_string_new(NULL);
    for (size_t i = 0; i < n; i++) {
        g_autofree char *value = dmi_attr(dir, entries[i].attr);
        g_autofree char *escaped = value ? g_markup_escape_text(value, -1) : NULL;
        if (escaped)
            g_string_append_printf(body, "    <entry name='%s'>%s</entry>\n", entries[i].entry, escaped);
    }
    if (body->len)
        g_string_append_printf(out, "  <%s>\n%s  </%s>\n", block, body->str, block);
    return body->len > 0;
}

char *node_sysinfo_xml(const char *dmi_dir, GError **error)
{
    static const struct dmi_entry bios[] = {
        {"vendor", "bios_vendor"}, {"version", "bios_version"}, {"date", "bios_date"},
        {"release", "bios_release"},
    };
    static const struct dmi_entry system[] = {
        {"manufacturer", "sys_vendor"}, {"product", "product_name"}, {"version", "product_version"},
        {"serial", "product_serial"}, {"uuid", "product_uuid"}, {"sku", "product_sku"},
        {"family", "product_family"},
    };
    static const struct dmi_entry board[] = {
        {"manufacturer", "board_vendor"}, {"product", "board_name"}, {"version", "board_version"},
        {"serial", "board_serial"}, {"asset", "board_asset_tag"},
    };
    static const struct dmi_entry chassis[] = {
        {"manufacturer", "chassis_vendor"}, {"version", "chassis_version"}, {"serial", "chassis_serial"},
        {"asset", "chassis_asset_tag"},
    };
    g_autoptr(GString) out = g_string_new("<sysinfo type='smbios'>\n");
    bool any = format_block(out, dmi_dir, "bios", bios, G_N_ELEMENTS(bios));
    any |= format_block(out, dmi_dir, "system", system, G_N_ELEMENTS(system));
    any |= format_block(out, dmi_dir, "baseBoard", board, G_N_ELEMENTS(board));
    any |= format_block(out, dmi_dir, "chassis", chassis, G_N_ELEMENTS(chassis));
    if (!any) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR,
                    "Host SMBIOS information is not available (%s has no DMI attributes)", dmi_dir);
        return NULL;
    }
    g_string_append(out, "</sysinfo>\n");
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* ---- free memory per NUMA node ---- */

static bool cell_free_bytes(const char *proc, const char *sys, int cell, bool numa, uint64_t *bytes,
                            GError **error)
{
    g_autofree char *path = numa ? node_meminfo_path(sys, cell) : g_strdup_printf("%s/meminfo", proc);
    g_autofree char *text = read_text(path, error);
    uint64_t kib;
    if (!text)
        return false;
    if (!meminfo_value(text, "MemFree", &kib)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR, "no MemFree in %s", path);
        return false;
    }
    *bytes = kib * 1024;
    return true;
}

bool node_cells_free_memory(const char *proc, const char *sys, int start, unsigned max, uint64_t *out,
                            unsigned *n, GError **error)
{
    bool numa = node_exists(sys, 0);
    int last = 0;
    while (numa && node_exists(sys, last + 1))
        last++;
    if (start < 0 || start > last) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR, "start cell %d out of range (0-%d)", start,
                    last);
        return false;
    }
    *n = 0;
    for (int cell = start; cell <= last && *n < max; cell++)
        if (!cell_free_bytes(proc, sys, cell, numa, &out[(*n)++], error))
            return false;
    return true;
}
