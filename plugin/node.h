/* Facts about the host: virNodeInfo and the capabilities XML. */
#pragma once

#include <glib.h>
#include <stdint.h>

struct node_info {
    char model[32];
    uint64_t memory_kib;
    int cpus, mhz, nodes, sockets, cores, threads;
};

void node_get_info(struct node_info *info);
char *node_capabilities_xml(GError **error);
