/* Facts about the host for NODE_GET_INFO and the capabilities documents,
 * from plugin/conf's host probe. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct node_info {
    char model[32];
    uint64_t memory_kib;
    int cpus, mhz, nodes, sockets, cores, threads;
};

bool node_get_info(struct node_info *info, GError **error);
