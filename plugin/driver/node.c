#include "driver/node.h"

#include <string.h>
#include <sys/utsname.h>

#include "conf/capabilities.h"

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
    info->memory_kib = host->memory_kib;   /* MemTotal, as libvirt reports it */
    info->cpus = (int)host->online_cpus;
    info->mhz = (int)host->cpu.mhz;
    info->nodes = host->cells ? (int)host->cells->len : 1;
    info->sockets = (int)host->sockets;
    info->cores = (int)host->cores;
    info->threads = (int)host->threads;
    return true;
}
