#include "node.h"

#include <string.h>
#include <sys/utsname.h>

#include "conf/capabilities.h"

/* As libvirt: the node's memory is /proc/meminfo's MemTotal. The NUMA
 * cells' meminfo can add up to less (memory outside any node). */
static uint64_t meminfo_total_kib(void)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents("/proc/meminfo", &text, NULL, NULL))
        return 0;
    const char *line = strstr(text, "MemTotal:");
    return line ? g_ascii_strtoull(line + strlen("MemTotal:"), NULL, 10) : 0;
}

bool node_get_info(struct node_info *info, GError **error)
{
    g_autoptr(host_info) host = host_info_probe(error);
    if (!host)
        return false;
    struct utsname uts;
    memset(info, 0, sizeof(*info));
    /* virNodeInfo.model is the architecture name, as libvirt fills it. */
    if (uname(&uts) == 0)
        g_strlcpy(info->model, uts.machine, sizeof(info->model));
    info->memory_kib = meminfo_total_kib();
    if (info->memory_kib == 0)
        info->memory_kib = host->memory_kib;
    info->cpus = (int)host->online_cpus;
    info->mhz = (int)host->cpu.mhz;
    info->nodes = host->cells ? (int)host->cells->len : 1;
    info->sockets = (int)host->sockets;
    info->cores = (int)host->cores;
    info->threads = (int)host->threads;
    return true;
}
