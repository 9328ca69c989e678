/* virtio-net (device id 1, virtio 1.x over virtio-mmio) on a tap device
 * (tap.h): one receive and one transmit queue plus the control queue.
 *
 * Features: VIRTIO_NET_F_MAC (the config's mac, or a random locally
 * administered one), VIRTIO_NET_F_MTU (when the config gives mtu),
 * VIRTIO_NET_F_STATUS (the link: up unless vm.set-link took it down or the tap
 * vanished), VIRTIO_NET_F_MRG_RXBUF (a frame may span several receive
 * buffers), VIRTIO_NET_F_CTRL_VQ with VIRTIO_NET_F_GUEST_ANNOUNCE (after a
 * restore the device asks the guest to announce itself; the guest acks on
 * the control queue). The 12-byte virtio 1.x header goes to and from the tap
 * as is (IFF_VNET_HDR); no offload is offered, so every frame is whole and
 * checksummed.
 *
 * Every chain is checked before use (virtio-queue.c: buffers inside guest
 * RAM, bounded length, readable and writable parts where they belong); a
 * malformed one is handed back with nothing written, counted and logged a few
 * times, and its frame dropped. A frame from the tap waits (the tap is not
 * read) until the guest posts buffers for it.
 *
 * Threads: the interface's own I/O thread waits (epoll) on the tap and the
 * queues' eventfds and moves frames under the transport lock; vCPU threads
 * only take that lock for register accesses. A tap whose interface is
 * deleted under the running VM is noticed on the next read or write: one log
 * line, link down, the guest's frames dropped.
 *
 * Snapshots: quiesce holds the transport lock (the thread then writes
 * nothing into guest RAM); the state is the transport plus the link and
 * announce bits.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "config/vm-config.h"
#include "devices/virtio-host.h"

struct virtio_net;

/* Open the tap of cfg, build the device as virtio-mmio device number
 * mmio_index, start its I/O thread. */
struct virtio_net *virtio_net_new(const struct virtio_host *host, unsigned mmio_index, const struct net_config *cfg,
                                  GError **error);
/* Stop the thread, close the tap. NULL is fine. */
void virtio_net_free(struct virtio_net *dev);

char *virtio_net_cmdline_entry(const struct virtio_net *dev);
const char *virtio_net_id(const struct virtio_net *dev);
/* The tap's interface name (what the kernel called it). */
const char *virtio_net_tap_name(const struct virtio_net *dev);

/* The link as the guest sees it (VIRTIO_NET_S_LINK_UP), set by vm.set-link;
 * the guest is told through a configuration change. A vanished tap stays
 * down. Any thread. */
void virtio_net_set_link(struct virtio_net *dev, bool up);
/* Ask the guest to announce itself (VIRTIO_NET_S_ANNOUNCE), if its driver
 * took VIRTIO_NET_F_GUEST_ANNOUNCE: after a restore, on a new tap. */
void virtio_net_request_announce(struct virtio_net *dev);

/* vm.counters member named by the id: {"rx_bytes", "rx_frames", "tx_bytes",
 * "tx_frames" (Cloud Hypervisor's names; bytes of frames, without the virtio
 * header), "rx_dropped", "tx_dropped", "guest_errors", "tap_errors", "link"}. */
void virtio_net_add_counters(struct virtio_net *dev, JsonBuilder *b);

void virtio_net_quiesce(struct virtio_net *dev);
void virtio_net_unquiesce(struct virtio_net *dev);
/* {"id", "mac", "link_up", "announce", "transport"}; restore refuses another id. */
void virtio_net_save_state(struct virtio_net *dev, JsonBuilder *b);
bool virtio_net_restore_state(struct virtio_net *dev, JsonObject *obj, GError **error);
