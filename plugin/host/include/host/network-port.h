/* Ports of libvirt networks (<interface type='network'>), allocated from the
 * host's own network driver as libvirt's hypervisor daemons do: open its
 * URI (network:///system) with libvirt's client library, create a port
 * for the domain's MAC on the named network (virNetworkPortCreateXML), and
 * plug the tap into the bridge the port names. The port is deleted when
 * the run ends. Every call has a time limit: the connection uses libvirt's
 * keepalive, so a network daemon that stops answering fails the call. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include <libvirt/libvirt.h>

#include "conf/domain-conf.h"

#define NETWORK_PORT_DEFAULT_URI "network:///system"

/* Allocate a port of net->source for owner's interface net: net->port_id
 * and net->port_bridge are set. VIR_ERR_OPERATION_INVALID when no network
 * driver answers at uri or the network is unknown or inactive,
 * VIR_ERR_CONFIG_UNSUPPORTED for a network whose ports are not plugged
 * into a bridge (macvtap, hostdev pools), else the network driver's
 * message as VIR_ERR_OPERATION_FAILED. */
bool network_port_allocate(const char *uri, const struct domain_def *owner, struct domain_net *net,
                           GError **error);
/* Delete the port net->port_id of net->source (nothing when it has none).
 * A port or network that is gone already counts as deleted. */
bool network_port_release(const char *uri, const struct domain_net *net, GError **error);

/* A connection to the network driver at uri, with keepalive (for
 * host-networks.c, the same module); VIR_ERR_OPERATION_INVALID when none
 * answers. */
virConnectPtr network_driver_open(const char *uri, GError **error);
/* The same for any of the host's libvirt drivers (host-storage.c opens the
 * storage driver's URI): read-only when asked, within the same time limit;
 * "cannot reach the host's <what> driver at <uri>: ..." when none answers. */
virConnectPtr host_driver_open(const char *uri, bool readonly, const char *what, GError **error);
/* error from libvirt's last error: "what: message". */
void network_driver_set_error(GError **error, int code, const char *what);
