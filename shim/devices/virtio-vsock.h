/* virtio-vsock (device id 19) with Cloud Hypervisor's / Firecracker's hybrid
 * backend: the guest's host side is a UNIX socket.
 *
 *  - host-initiated: a program connects to the socket and writes
 *    "CONNECT <port>\n"; once a guest program accepts on that vsock port the
 *    shim answers "OK <host port>\n" and the connection carries the stream. If
 *    the guest refuses (RST) the UNIX connection is closed without an OK.
 *  - guest-initiated: a connection to CID 2 port P is dialled to "<socket>_P".
 *  - the readiness port (vsock_config.readiness_port) is served by the shim
 *    itself: "READY {json}\n" -> "ACK {json}\n" and vm_callbacks.on_guest_ready.
 *
 * The device runs one thread (epoll over the sockets and the queue eventfds).
 *
 * Snapshots (not implemented yet; the plan the state is shaped for): the
 * transport's registers and each queue's struct virtq (addresses, size,
 * last_avail_idx, used_idx) are all that must be saved; rings and buffers are
 * guest RAM, and every device write to them went through vm_mark_dirty. Host
 * sockets cannot be saved, so a restored device starts with an empty
 * connection table and calls virtio_vsock_transport_reset(): the guest's
 * sockets see a reset and its agent announces readiness with generation + 1.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "config.h"

struct vm;
struct virtio_vsock;

/* Create the device as virtio-mmio device number mmio_index, bind the UNIX
 * socket (a stale socket file is replaced; a live one is an error) and start
 * the device thread. */
struct virtio_vsock *virtio_vsock_new(struct vm *vm, unsigned mmio_index,
                                      const struct vsock_config *cfg, GError **error);

/* Stop the thread, close every connection, unlink the socket. NULL is fine. */
void virtio_vsock_free(struct virtio_vsock *dev);

/* "virtio_mmio.device=4K@0xd0000000:5" for the guest command line. */
char *virtio_vsock_cmdline_entry(const struct virtio_vsock *dev);

/* Counters for vm.counters: {"rx_bytes", "tx_bytes", "connections", ...}. */
void virtio_vsock_add_counters(struct virtio_vsock *dev, JsonBuilder *builder);

/* Reset every connection and post VIRTIO_VSOCK_EVENT_TRANSPORT_RESET to the
 * guest, as after a restore: the guest's sockets see a reset and its agent
 * announces readiness again. The device thread does it, before anything else
 * it handles from then on; the caller neither waits for that thread (which
 * may be waiting on guest RAM restored on demand) nor touches guest RAM. */
void virtio_vsock_transport_reset(struct virtio_vsock *dev);

/* persist: begin (snapshots). quiesce holds the device still (its thread waits,
 * nothing is written into guest RAM) until unquiesce; save_state runs between
 * the two. restore_state loads the transport and queues of a snapshot into a
 * fresh device; connections are not restored: call
 * virtio_vsock_transport_reset afterwards. */
void virtio_vsock_quiesce(struct virtio_vsock *dev);
void virtio_vsock_unquiesce(struct virtio_vsock *dev);
void virtio_vsock_save_state(struct virtio_vsock *dev, JsonBuilder *b);
bool virtio_vsock_restore_state(struct virtio_vsock *dev, JsonObject *obj, GError **error);
/* persist: end */
