/* virtio-vsock (device id 19) with Cloud Hypervisor's / Firecracker's hybrid
 * backend: the guest's host side is a UNIX socket.
 *
 *  - host-initiated: a program connects to the socket and writes
 *    "CONNECT <port>\n"; once a guest program accepts on that vsock port the
 *    shim answers "OK <host port>\n" and the connection carries the stream. If
 *    the guest refuses (RST) the UNIX connection is closed without an OK.
 *  - guest-initiated: a connection to CID 2 port P is dialled to "<socket>_P".
 *  - a port with a struct vsock_port_handler (virtio_vsock_serve_port) is
 *    served inside the shim instead, with no socket behind it: the VMM's
 *    readiness port is one.
 *
 * The device runs one thread (epoll over the sockets and the queue eventfds).
 *
 * Snapshots: the transport's registers and each queue's struct virtq
 * (addresses, size, last_avail_idx, used_idx) are all that is saved; rings and
 * buffers are guest RAM, and every device write to them was marked dirty. Host
 * sockets cannot be saved, so a restored device starts with an empty
 * connection table and calls virtio_vsock_transport_reset(): the guest's
 * sockets see a reset and its agent announces readiness with generation + 1.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/vm-config.h"
#include "devices/virtio-host.h"

struct virtio_vsock;

/* Create the device as virtio-mmio device number mmio_index, bind the UNIX
 * socket (a stale socket file is replaced; a live one is an error) and start
 * the device thread. */
struct virtio_vsock *virtio_vsock_new(const struct virtio_host *host, unsigned mmio_index,
                                      const struct vsock_config *cfg, GError **error);

/* A service on a vsock port that the shim serves itself. Guest connections to
 * `port` are accepted (no UNIX socket is dialled): open makes the session,
 * receive gets the guest's bytes and appends what goes back to `reply`,
 * close ends the session when the connection goes. They run on the device
 * thread with the device lock held: they must not block. receive returning
 * false resets the connection (the session is beyond repair). */
struct vsock_port_handler {
    uint32_t port;
    void *(*open)(void *opaque);
    bool (*receive)(void *opaque, void *session, const uint8_t *data, size_t len, GByteArray *reply);
    void (*close)(void *opaque, void *session);
    void *opaque;
};

/* Serve handler->port with handler, which must outlive the device. Before the
 * guest runs (a connection already open to that port stays as it is). Fails
 * if the port is served already. */
bool virtio_vsock_serve_port(struct virtio_vsock *dev, const struct vsock_port_handler *handler,
                             GError **error);

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

/* Snapshots. quiesce holds the device still (its thread waits,
 * nothing is written into guest RAM) until unquiesce; save_state runs between
 * the two. restore_state loads the transport and queues of a snapshot into a
 * fresh device; connections are not restored: call
 * virtio_vsock_transport_reset afterwards. */
void virtio_vsock_quiesce(struct virtio_vsock *dev);
void virtio_vsock_unquiesce(struct virtio_vsock *dev);
void virtio_vsock_save_state(struct virtio_vsock *dev, JsonBuilder *b);
bool virtio_vsock_restore_state(struct virtio_vsock *dev, JsonObject *obj, GError **error);
