/* Entry points for a domain's network interfaces (part of the driver
 * module): counters (domifstat, domstats --interface) and device updates
 * (domif-setlink, which is virDomainUpdateDeviceFlags with the interface's
 * XML and another <link state>). */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "host/netdev.h"
#include "domain/state.h"

/* The counters of the running domain's interface called name (its tap or
 * its MAC), as the guest sees them: what the tap received, the guest sent.
 * VIR_ERR_OPERATION_INVALID when not running, VIR_ERR_INVALID_ARG for an
 * unknown interface. */
bool driver_interface_stats(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                            struct netdev_stats *stats, GError **error);

/* Every interface of a running domain and its counters (none when shut
 * off, or when an interface has none). */
struct driver_net_stat {
    char *name;
    struct netdev_stats stats;
};
GArray *driver_interfaces_stats(struct vsnap_driver *drv, struct vsnap_domain *dom);

/* virDomainInterfaceAddresses: with VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_ARP,
 * each interface of the running domain with the IPv4 addresses the host's
 * neighbour table holds for its MAC. The lease source (no DHCP server of
 * vsnap's gives the guest its address) and the agent source (vsnap's guest
 * agent does not report addresses) are refused with VIR_ERR_NO_SUPPORT
 * saying so. */
struct driver_net_addrs {
    char *name;                   /* the tap */
    char mac[DOMAIN_NET_MAC_LEN];
    char **ipv4;                  /* NULL-terminated */
};
GArray *driver_interface_addresses(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned source,
                                   GError **error);

/* virDomainUpdateDeviceFlags for an <interface> (found by its MAC): its
 * link state may change, live (VIR_DOMAIN_AFFECT_LIVE: the guest sees it
 * at once), in the persistent definition (AFFECT_CONFIG), or both; CURRENT
 * is live when running, config otherwise. Any other change is refused
 * with VIR_ERR_OPERATION_UNSUPPORTED naming it. */
bool driver_update_device(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *xml,
                          unsigned flags, GError **error);
