/* The host side of a domain's network interfaces: tap devices and the host
 * bridges they join, in the daemon's network namespace.
 *
 * A tap the daemon creates is never persistent: the kernel deletes it when
 * its last descriptor closes. The daemon hands the descriptor to the shim
 * and closes its own, so the tap lives exactly as long as the shim - a shim
 * that is stopped, crashes or is killed with SIGKILL takes its tap with it,
 * whether or not a daemon is running then. netdev_tap_delete is the second
 * line: it removes a tap left persistent by someone else's tool under the
 * name a domain used. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

/* libvirt's names for taps it names itself (the kernel picks the number). */
#define NETDEV_TAP_TEMPLATE "vnet%d"

struct netdev_tap_request {
    const char *name;            /* the tap's name, or NETDEV_TAP_TEMPLATE */
    bool existing;               /* managed='no': open a tap that exists; never create one */
    const unsigned char *mac;    /* the guest's MAC; the tap's own is the same with 0xfe first */
    uint32_t mtu;                /* 0: the bridge's MTU (or the kernel's default) */
    const char *bridge;          /* NULL, or the host bridge the tap joins */
};

/* Open (create, unless existing) the tap with IFF_TAP, IFF_NO_PI and
 * IFF_VNET_HDR (virtio 1.x's 12-byte header), set its MAC and MTU, attach
 * it to the bridge, bring it up. Returns the descriptor (close-on-exec) and
 * the tap's name in name_out (IFNAMSIZ bytes), or -1 with
 * VIR_ERR_SYSTEM_ERROR / VIR_ERR_OPERATION_INVALID naming the tap. */
int netdev_tap_open(const struct netdev_tap_request *request, char name_out[16], GError **error);

/* Remove the tap called name if it is a tap nobody holds (a persistent one
 * left behind); a tap a process still holds, or no such interface, is left
 * alone. Never fails: what it finds is logged. */
void netdev_tap_delete(const char *name);

/* Whether an interface called name exists in the daemon's namespace. */
bool netdev_exists(const char *name);

/* Counters of an interface as the kernel keeps them (/proc/net/dev), from
 * the host's side: what the tap received is what the guest sent. */
struct netdev_stats {
    uint64_t rx_bytes, rx_packets, rx_errs, rx_drop;
    uint64_t tx_bytes, tx_packets, tx_errs, tx_drop;
};
bool netdev_read_stats(const char *name, struct netdev_stats *stats, GError **error);

/* The IPv4 addresses the kernel's neighbour table (/proc/net/arp) holds
 * for mac in the daemon's namespace: what the host has heard the guest
 * answer from. NULL-terminated, possibly empty. */
char **netdev_neighbours(const unsigned char mac[6]);
