/* The host's libvirt networks, as clients of the vsnap connection see them
 * (virt-manager lists them to offer <interface type='network'>): read from
 * the host's network driver (network-port.h's URI) when it answers, and an
 * empty list when there is none. Read-only: networks are defined and
 * started on the network driver's own connection (network:///system). */
#pragma once

#include <glib.h>
#include <stdbool.h>

struct host_network {
    char *name;
    unsigned char uuid[16];
};
void host_network_clear(struct host_network *net);

/* virConnectListAllNetworks' flags (VIR_CONNECT_LIST_NETWORKS_*); an
 * array of struct host_network, empty without a network driver. */
GArray *host_networks_list(const char *uri, unsigned flags);

/* By name (uuid NULL) or uuid: VIR_ERR_NO_NETWORK when the driver does not
 * know it or does not answer. */
bool host_network_lookup(const char *uri, const char *name, const unsigned char *uuid,
                         struct host_network *out, GError **error);

enum host_network_fact { HOST_NETWORK_ACTIVE, HOST_NETWORK_PERSISTENT, HOST_NETWORK_AUTOSTART };
/* 0 or 1; -1 with error. */
int host_network_fact(const char *uri, const char *name, enum host_network_fact fact, GError **error);
char *host_network_xml(const char *uri, const char *name, unsigned flags, GError **error);
char *host_network_bridge(const char *uri, const char *name, GError **error);
