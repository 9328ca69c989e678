/* Internals shared by the virtio-vsock files:
 *   virtio-vsock.c        device model, thread and event loop
 *   virtio-vsock-rxtx.c   guest packets in (TX queue), packets out (RX queue)
 *   virtio-vsock-conn.c   connection table, credit accounting, teardown
 *   virtio-vsock-unix.c   the hybrid UNIX-socket side (listen, CONNECT, dial)
 *
 * All state below is protected by dev->transport.lock, which the device
 * thread holds while it handles an event and vCPU threads hold while they
 * access registers (reset_requested excepted).
 */
#pragma once

#include <glib.h>
#include <linux/virtio_vsock.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/vm-config.h"
#include "devices/device-log.h"
#include "devices/virtio-mmio.h"
#include "devices/virtio-vsock.h"

#define VSOCK_HOST_CID 2u
#define VSOCK_QUEUE_RX 0u
#define VSOCK_QUEUE_TX 1u
#define VSOCK_QUEUE_EVENT 2u
#define VSOCK_NQUEUES 3u
#define VSOCK_QUEUE_SIZE 256u
#define VSOCK_HDR_SIZE ((uint32_t)sizeof(struct virtio_vsock_hdr))
/* Bytes the host side of one connection buffers for the guest (buf_alloc). */
#define VSOCK_CONN_BUF_ALLOC (256u * 1024u)
/* Largest payload accepted in one guest packet (Linux sends at most 64 KiB). */
#define VSOCK_MAX_PKT_PAYLOAD (64u * 1024u)
/* Ports the shim gives its side of host-initiated connections, as Firecracker. */
#define VSOCK_LOCAL_PORT_FIRST (1u << 30)
#define VSOCK_CONNECT_LINE_MAX 64u
/* A host-initiated REQUEST the guest does not answer is given up after this. */
#define VSOCK_CONNECT_TIMEOUT_US (2 * G_USEC_PER_SEC)
/* A UNIX client that does not send its CONNECT line within this is dropped. */
#define VSOCK_HANDSHAKE_TIMEOUT_US (5 * G_USEC_PER_SEC)
/* After the shim asked the guest to close, it waits this long for the RST. */
#define VSOCK_CLOSE_TIMEOUT_US (5 * G_USEC_PER_SEC)
/* A host program that does not read what a closed guest connection still
 * holds for it (at most VSOCK_CONN_BUF_ALLOC bytes) loses it after this. */
#define VSOCK_DRAIN_TIMEOUT_US (30 * G_USEC_PER_SEC)
/* Control packets waiting for RX buffers; past this, new ones are dropped
 * (a guest that floods RSTs without posting buffers gets no more). */
#define VSOCK_CTRL_QUEUE_MAX 4096u

/* What an epoll entry points at. */
enum vsock_watch_kind {
    WATCH_LISTENER,
    WATCH_NOTIFY,    /* a queue eventfd; index in the watch */
    WATCH_STOP,
    WATCH_RESET,     /* virtio_vsock_transport_reset's own eventfd */
    WATCH_TIMER,
    WATCH_HANDSHAKE, /* accepted UNIX client before its CONNECT line */
    WATCH_CONN,
};

struct vsock_watch {
    enum vsock_watch_kind kind;
    unsigned index;
    void *owner;
};

enum vsock_conn_state {
    CONN_CONNECTING,  /* host-initiated: REQUEST sent, waiting for RESPONSE */
    CONN_ESTABLISHED,
    CONN_CLOSING,     /* shim sent SHUTDOWN(both), waiting for the guest's RST */
    CONN_DRAINING,    /* the guest closed (and got its RST); what it sent before
                       * is still being written to the host side */
};

enum vsock_backend {
    BACKEND_UNIX,  /* a UNIX stream socket */
    BACKEND_LOCAL, /* a struct vsock_port_handler inside the shim */
};

struct vsock_conn {
    uint64_t key;         /* local_port << 32 | peer_port: hash table key */
    uint32_t local_port;  /* the host (CID 2) side */
    uint32_t peer_port;   /* the guest side */
    enum vsock_conn_state state;
    enum vsock_backend backend;
    bool host_initiated;
    int fd;               /* BACKEND_UNIX */
    const struct vsock_port_handler *handler; /* BACKEND_LOCAL, with its session */
    void *session;
    struct vsock_watch watch;
    uint32_t epoll_events; /* interest currently registered, 0 if not in epoll */
    gint64 deadline_us;   /* CONNECTING or CLOSING timeout, 0 if none */

    /* guest -> host */
    uint32_t fwd_cnt;            /* bytes taken from the guest and passed on */
    uint32_t fwd_cnt_advertised; /* fwd_cnt the guest last heard of */
    GByteArray *to_host;         /* taken from the guest, not yet written to fd */
    bool guest_shut_send, guest_shut_recv;
    bool credit_update_queued;

    /* host -> guest */
    uint32_t peer_buf_alloc, peer_fwd_cnt; /* from the guest's last header */
    uint32_t tx_cnt;                        /* payload bytes sent to the guest */
    GByteArray *to_guest;                   /* BACKEND_LOCAL replies */
    bool host_eof;       /* host side will send no more (SHUTDOWN SEND sent) */
    bool hup;            /* fd removed from epoll after EPOLLHUP */
    bool in_rx_ready;    /* queued in dev->rx_ready */
    bool credit_blocked; /* has data for the guest but no credit */

    bool dead; /* destroyed; freed after the current epoll batch */
};

/* A UNIX client that has connected but not yet sent "CONNECT <port>\n". */
struct vsock_handshake {
    int fd;
    struct vsock_watch watch;
    uint32_t epoll_events;
    gint64 deadline_us;
    bool dead;
};

struct vsock_counters {
    uint64_t rx_bytes, tx_bytes; /* payload to / from the guest */
    uint64_t rx_packets, tx_packets;
    uint64_t connections_host, connections_guest, resets;
    uint64_t local_connections; /* to ports the shim serves itself */
    uint64_t guest_errors; /* malformed packets or buffers from the guest */
    uint64_t reset_delivery_us; /* the last reset: request to the event in the guest's queue */
};

struct virtio_vsock {
    struct virtio_mmio transport;
    uint64_t guest_cid;
    GPtrArray *handlers;    /* const struct vsock_port_handler *, not owned */
    char *socket_path;
    bool socket_bound; /* we created socket_path and unlink it */

    int epoll_fd, listen_fd, stop_fd, reset_fd, timer_fd;
    struct vsock_watch listen_watch, stop_watch, reset_watch, timer_watch;
    struct vsock_watch notify_watch[VSOCK_NQUEUES];
    GThread *thread;

    GHashTable *conns;      /* key -> struct vsock_conn*, owns them */
    GList *handshakes;      /* struct vsock_handshake* */
    GQueue ctrl_queue;      /* struct virtio_vsock_hdr* waiting for RX buffers */
    GQueue rx_ready;        /* struct vsock_conn* with data for the guest */
    uint32_t next_local_port;
    bool event_pending;     /* a TRANSPORT_RESET event waits for a buffer */
    bool reset_requested;   /* atomic: virtio_vsock_transport_reset was called */
    gint64 reset_requested_us; /* atomic: when (monotonic), for counters.reset_delivery_us */
    /* Destroyed connections and handshakes: a later event of the same epoll
     * batch may still point at them, so they are freed after the batch. */
    GSList *dead_conns, *dead_handshakes;
    struct vsock_counters counters;
};

/* virtio-vsock.c */
void vsock_epoll_set(struct virtio_vsock *dev, int fd, struct vsock_watch *watch,
                     uint32_t *current, uint32_t wanted);
void vsock_epoll_remove(struct virtio_vsock *dev, int fd, uint32_t *current);

void vsock_free_dead(struct virtio_vsock *dev);
/* The handler serving port inside the shim, or NULL (then a guest connection
 * is dialled to the UNIX side). */
const struct vsock_port_handler *vsock_port_handler_for(struct virtio_vsock *dev, uint32_t port);
/* Count what a guest did wrong in counters.guest_errors and log it only the
 * first few times (devices/device-log.h): a guest must not be able to flood
 * the host's log. Device-thread only, like the counters. */
#define vsock_log_guest_error(dev, fmt, ...)                                                        \
    device_log_limited(G_LOG_LEVEL_MESSAGE, ++(dev)->counters.guest_errors, "guest errors",         \
                       "virtio-vsock: " fmt, ##__VA_ARGS__)

/* virtio-vsock-rxtx.c */
void vsock_process_tx(struct virtio_vsock *dev);
void vsock_process_rx(struct virtio_vsock *dev);
void vsock_process_event(struct virtio_vsock *dev);
/* Queue a control packet (no payload) to the guest; false if the queue is
 * full (VSOCK_CTRL_QUEUE_MAX) and the packet was dropped. */
bool vsock_queue_ctrl(struct virtio_vsock *dev, uint32_t local_port, uint32_t peer_port,
                      uint16_t op, uint32_t flags);

/* virtio-vsock-conn.c */
uint64_t vsock_conn_key(uint32_t local_port, uint32_t peer_port);
struct vsock_conn *vsock_conn_new(struct virtio_vsock *dev, uint32_t local_port,
                                  uint32_t peer_port, enum vsock_backend backend, int fd);
struct vsock_conn *vsock_conn_lookup(struct virtio_vsock *dev, uint32_t local_port,
                                     uint32_t peer_port);
bool vsock_local_port_in_use(struct virtio_vsock *dev, uint32_t local_port);
/* Free the connection and drop it from every queue. */
void vsock_conn_destroy(struct virtio_vsock *dev, struct vsock_conn *conn);
/* Send RST to the guest and destroy. */
void vsock_conn_reset(struct virtio_vsock *dev, struct vsock_conn *conn);
/* Bytes the guest can still take on this connection. */
uint32_t vsock_conn_peer_credit(const struct vsock_conn *conn);
void vsock_conn_update_peer_credit(struct virtio_vsock *dev, struct vsock_conn *conn,
                                   const struct virtio_vsock_hdr *hdr);
/* Fill the credit fields of a header from the connection and note that the
 * guest now knows fwd_cnt. */
void vsock_conn_fill_credit(struct vsock_conn *conn, struct virtio_vsock_hdr *hdr);
/* Register the fd interest the connection needs now (EPOLLIN while it can
 * take data from the host, EPOLLOUT while to_host is not empty). */
void vsock_conn_update_interest(struct virtio_vsock *dev, struct vsock_conn *conn);
void vsock_conn_mark_rx_ready(struct virtio_vsock *dev, struct vsock_conn *conn);
/* Payload from the guest: write through to the host side. */
void vsock_conn_from_guest(struct virtio_vsock *dev, struct vsock_conn *conn,
                           const struct iovec *iov, unsigned niov, size_t len);
/* The fd became writable: flush to_host. */
void vsock_conn_flush_to_host(struct virtio_vsock *dev, struct vsock_conn *conn);
void vsock_conn_handle_guest_shutdown(struct virtio_vsock *dev, struct vsock_conn *conn,
                                      uint32_t flags);
void vsock_conn_handle_fd_event(struct virtio_vsock *dev, struct vsock_conn *conn,
                                uint32_t events);
/* The host side is closed both ways: SHUTDOWN(both) to the guest, then wait
 * (bounded) for its RST. */
void vsock_conn_start_close(struct virtio_vsock *dev, struct vsock_conn *conn);
/* Walk deadlines (connect and close timeouts). */
void vsock_conn_check_timeouts(struct virtio_vsock *dev, gint64 now_us);
void vsock_conn_count_credit(struct virtio_vsock *dev, struct vsock_conn *conn, uint32_t consumed);

/* virtio-vsock-unix.c */
bool vsock_unix_listen(struct virtio_vsock *dev, GError **error);
void vsock_unix_close_listener(struct virtio_vsock *dev);
void vsock_unix_accept(struct virtio_vsock *dev);
void vsock_unix_handshake_event(struct virtio_vsock *dev, struct vsock_handshake *hs);
void vsock_unix_handshake_free(struct virtio_vsock *dev, struct vsock_handshake *hs);
void vsock_unix_check_timeouts(struct virtio_vsock *dev, gint64 now_us);
/* Guest REQUEST to host port: dial "<socket>_<port>"; -1 if nobody listens. */
int vsock_unix_dial(struct virtio_vsock *dev, uint32_t port);
/* The guest accepted a host-initiated connection: "OK <local port>\n". */
bool vsock_unix_send_ok(struct vsock_conn *conn);
/* Parse "CONNECT <port>" (without the newline). Exposed for unit tests. */
bool vsock_parse_connect_line(const char *line, size_t len, uint32_t *port, GError **error);
