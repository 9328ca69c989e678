/* <capabilities>: the host as probed, and one guest (hvm, x86_64, kvm) whose
 * emulator is the shim. Shapes follow libvirt's capability.rng. */
#include "conf/capabilities.h"

#include <string.h>

#include "conf/domain-conf.h"
#include "limits/vsnap-limits.h"

#define VSNAP_MACHINE "vsnap"

static void append_escaped_element(GString *out, const char *indent, const char *name, const char *text)
{
    g_autofree char *escaped = g_markup_escape_text(text, -1);
    g_string_append_printf(out, "%s<%s>%s</%s>\n", indent, name, escaped, name);
}

/* libvirt's feature names are [a-zA-Z0-9_-]+; a flag outside that is skipped
 * rather than producing XML its clients refuse. */
static bool is_feature_name(const char *name)
{
    for (const char *c = name; *c; c++)
        if (!g_ascii_isalnum(*c) && *c != '_' && *c != '-')
            return false;
    return name[0] != '\0';
}

static bool has_flag(const struct host_cpu_info *cpu, const char *flag)
{
    for (guint i = 0; i < cpu->flags->len; i++)
        if (strcmp(cpu->flags->pdata[i], flag) == 0)
            return true;
    return false;
}

static void format_cpu_features(GString *out, const struct host_cpu_info *cpu)
{
    static const char *const named[] = {"pae", "vmx", "svm"};
    g_string_append(out, "      <features>\n");
    for (size_t i = 0; i < G_N_ELEMENTS(named); i++)
        if (has_flag(cpu, named[i]))
            g_string_append_printf(out, "        <%s/>\n", named[i]);
    g_string_append(out, "      </features>\n");
}

static void format_host_cpu(GString *out, const struct host_info *host)
{
    const struct host_cpu_info *cpu = &host->cpu;
    g_string_append(out, "    <cpu>\n      <arch>x86_64</arch>\n");
    format_cpu_features(out, cpu);
    if (cpu->model)
        append_escaped_element(out, "      ", "model", cpu->model);
    append_escaped_element(out, "      ", "vendor", cpu->vendor);
    if (cpu->microcode)
        g_string_append_printf(out, "      <microcode version='%" G_GUINT64_FORMAT "'/>\n", cpu->microcode);
    if (cpu->family)
        g_string_append_printf(out, "      <signature family='%u' model='%u' stepping='%u'/>\n", cpu->family,
                               cpu->model_number, cpu->stepping);
    g_string_append_printf(out, "      <topology sockets='%u' dies='%u' cores='%u' threads='%u'/>\n",
                           host->sockets, host->dies, host->cores, host->threads);
    if (cpu->phys_bits)
        g_string_append_printf(out, "      <maxphysaddr mode='passthrough' bits='%u'/>\n", cpu->phys_bits);
    for (guint i = 0; i < cpu->flags->len; i++)
        if (is_feature_name(cpu->flags->pdata[i]))
            g_string_append_printf(out, "      <feature name='%s'/>\n", (const char *)cpu->flags->pdata[i]);
    g_string_append(out, "      <pages unit='KiB' size='4'/>\n      <pages unit='KiB' size='2048'/>\n    </cpu>\n");
}

static const struct host_cpu_topology *find_cpu(const struct host_info *host, unsigned id)
{
    for (guint i = 0; i < host->cpus->len; i++)
        if (g_array_index(host->cpus, struct host_cpu_topology, i).id == id)
            return &g_array_index(host->cpus, struct host_cpu_topology, i);
    return NULL;
}

/* No cluster_id: libvirt 9.0's capability.rng (Debian 12) does not know it. */
static void format_cell_cpus(GString *out, const struct host_info *host, const struct host_numa_cell *cell)
{
    g_string_append_printf(out, "          <cpus num='%u'>\n", cell->cpus->len);
    for (guint i = 0; i < cell->cpus->len; i++) {
        unsigned id = g_array_index(cell->cpus, unsigned, i);
        const struct host_cpu_topology *cpu = find_cpu(host, id);
        if (cpu)
            g_string_append_printf(out,
                                   "            <cpu id='%u' socket_id='%u' die_id='%u' core_id='%u' siblings='%s'/>\n",
                                   id, cpu->socket_id, cpu->die_id, cpu->core_id, cpu->siblings);
        else /* offline CPU of the cell: libvirt lists only its id */
            g_string_append_printf(out, "            <cpu id='%u'/>\n", id);
    }
    g_string_append(out, "          </cpus>\n");
}

static void format_cell(GString *out, const struct host_info *host, const struct host_numa_cell *cell)
{
    g_string_append_printf(out, "        <cell id='%u'>\n          <memory unit='KiB'>%" G_GUINT64_FORMAT
                                "</memory>\n",
                           cell->id, cell->memory_kib);
    if (cell->distances->len) {
        g_string_append(out, "          <distances>\n");
        for (guint i = 0; i < cell->distances->len; i++)
            g_string_append_printf(out, "            <sibling id='%u' value='%u'/>\n",
                                   g_array_index(cell->distance_ids, unsigned, i),
                                   g_array_index(cell->distances, unsigned, i));
        g_string_append(out, "          </distances>\n");
    }
    format_cell_cpus(out, host, cell);
    g_string_append(out, "        </cell>\n");
}

static void format_host(GString *out, const struct host_info *host)
{
    g_string_append(out, "  <host>\n");
    if (host->has_uuid) {
        char uuid[DOMAIN_UUID_STRING_LEN];
        domain_uuid_format(host->uuid, uuid);
        g_string_append_printf(out, "    <uuid>%s</uuid>\n", uuid);
    }
    format_host_cpu(out, host);
    /* vsnap neither suspends the host nor migrates domains. */
    g_string_append(out, "    <power_management/>\n    <migration_features/>\n");
    g_string_append_printf(out, "    <topology>\n      <cells num='%u'>\n", host->cells->len);
    for (guint i = 0; i < host->cells->len; i++)
        format_cell(out, host, host->cells->pdata[i]);
    g_string_append(out, "      </cells>\n    </topology>\n");
    /* No security driver confines the shim (yet): say so, as libvirt does. */
    g_string_append(out, "    <secmodel>\n      <model>none</model>\n      <doi>0</doi>\n    </secmodel>\n");
    g_string_append(out, "  </host>\n");
}

static void format_guest(GString *out, const char *emulator)
{
    g_autofree char *escaped = g_markup_escape_text(emulator, -1);
    g_string_append_printf(out,
                           "  <guest>\n"
                           "    <os_type>hvm</os_type>\n"
                           "    <arch name='x86_64'>\n"
                           "      <wordsize>64</wordsize>\n"
                           "      <emulator>%s</emulator>\n"
                           "      <machine maxCpus='%d'>%s</machine>\n"
                           "      <domain type='kvm'/>\n"
                           "    </arch>\n"
                           "    <features>\n"
                           "      <acpi default='on' toggle='no'/>\n"
                           "      <apic default='on' toggle='no'/>\n"
                           "    </features>\n"
                           "  </guest>\n",
                           escaped, VSNAP_MAX_VCPUS, VSNAP_MACHINE);
}

char *capabilities_format(const struct host_info *host, const char *emulator, GError **error)
{
    if (!emulator || emulator[0] != '/') {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                    "the shim's path must be absolute, not '%s'", emulator ? emulator : "");
        return NULL;
    }
    GString *out = g_string_new("<capabilities>\n");
    format_host(out, host);
    format_guest(out, emulator);
    g_string_append(out, "</capabilities>\n");
    return g_string_free(out, false);
}

char *capabilities_get_xml(const char *emulator, GError **error)
{
    g_autoptr(host_info) host = host_info_probe(error);
    return host ? capabilities_format(host, emulator, error) : NULL;
}
