#include "node.h"

#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "virt-error.h"

static uint64_t meminfo_total_kib(void)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents("/proc/meminfo", &text, NULL, NULL))
        return 0;
    const char *line = strstr(text, "MemTotal:");
    return line ? g_ascii_strtoull(line + strlen("MemTotal:"), NULL, 10) : 0;
}

/* First "cpu MHz" line of /proc/cpuinfo (0 when the kernel does not say). */
static int cpu_mhz(void)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents("/proc/cpuinfo", &text, NULL, NULL))
        return 0;
    const char *line = strstr(text, "cpu MHz");
    const char *colon = line ? strchr(line, ':') : NULL;
    return colon ? (int)g_ascii_strtod(colon + 1, NULL) : 0;
}

void node_get_info(struct node_info *info)
{
    struct utsname uts;
    memset(info, 0, sizeof(*info));
    if (uname(&uts) == 0)
        g_strlcpy(info->model, uts.machine, sizeof(info->model));
    info->memory_kib = meminfo_total_kib();
    info->cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    info->mhz = cpu_mhz();
    /* One NUMA node, one socket, one thread per core: the topology details
     * do not matter to microVMs and the totals stay right. */
    info->nodes = 1;
    info->sockets = 1;
    info->cores = info->cpus;
    info->threads = 1;
}

static char *host_uuid(void)
{
    g_autofree char *id = NULL;
    if (!g_file_get_contents("/etc/machine-id", &id, NULL, NULL) || strlen(g_strstrip(id)) != 32)
        return g_strdup("00000000-0000-0000-0000-000000000000");
    return g_strdup_printf("%.8s-%.4s-%.4s-%.4s-%.12s", id, id + 8, id + 12, id + 16, id + 20);
}

/* Until plugin/conf provides the capabilities document, describe what vsnap
 * runs: x86_64 hvm guests, domain type 'kvm' as in vsnap's domain XML. */
char *node_capabilities_xml(GError **error)
{
    struct node_info info;
    node_get_info(&info);
    g_autofree char *uuid = host_uuid();
    GString *xml = g_string_new("<capabilities>\n\n  <host>\n");
    g_string_append_printf(xml, "    <uuid>%s</uuid>\n", uuid);
    g_string_append_printf(xml,
                           "    <cpu>\n      <arch>%s</arch>\n"
                           "      <topology sockets='%d' dies='1' cores='%d' threads='%d'/>\n"
                           "    </cpu>\n",
                           info.model, info.sockets, info.cores, info.threads);
    g_string_append(xml, "    <power_management/>\n    <iommu support='no'/>\n");
    g_string_append(xml, "    <migration_features/>\n");
    g_string_append_printf(xml,
                           "    <topology>\n      <cells num='1'>\n"
                           "        <cell id='0'>\n"
                           "          <memory unit='KiB'>%" G_GUINT64_FORMAT "</memory>\n"
                           "          <cpus num='%d'>\n",
                           info.memory_kib, info.cpus);
    for (int i = 0; i < info.cpus; i++)
        g_string_append_printf(xml,
                               "            <cpu id='%d' socket_id='0' die_id='0' core_id='%d' "
                               "siblings='%d'/>\n",
                               i, i, i);
    g_string_append(xml, "          </cpus>\n        </cell>\n      </cells>\n    </topology>\n");
    g_string_append(xml, "  </host>\n\n");
    g_string_append_printf(xml,
                           "  <guest>\n    <os_type>hvm</os_type>\n"
                           "    <arch name='%s'>\n      <wordsize>64</wordsize>\n"
                           "      <domain type='kvm'/>\n    </arch>\n"
                           "    <features>\n      <acpi default='on' toggle='no'/>\n"
                           "    </features>\n  </guest>\n\n",
                           info.model);
    g_string_append(xml, "</capabilities>\n");
    return g_string_free(xml, FALSE);
}
