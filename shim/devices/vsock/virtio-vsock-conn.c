/* virtio-vsock connections: the table, credit accounting (virtio spec 5.10.6.3)
 * and the host side of each stream. */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "devices/virtio-vsock-priv.h"

uint64_t vsock_conn_key(uint32_t local_port, uint32_t peer_port)
{
    return (uint64_t)local_port << 32 | peer_port;
}

struct vsock_conn *vsock_conn_new(struct virtio_vsock *dev, uint32_t local_port,
                                  uint32_t peer_port, enum vsock_backend backend, int fd)
{
    struct vsock_conn *conn = g_new0(struct vsock_conn, 1);
    conn->key = vsock_conn_key(local_port, peer_port);
    conn->local_port = local_port;
    conn->peer_port = peer_port;
    conn->backend = backend;
    conn->fd = fd;
    conn->watch.kind = WATCH_CONN;
    conn->watch.owner = conn;
    conn->to_host = g_byte_array_new();
    conn->to_guest = g_byte_array_new();
    g_hash_table_insert(dev->conns, &conn->key, conn);
    return conn;
}

struct vsock_conn *vsock_conn_lookup(struct virtio_vsock *dev, uint32_t local_port,
                                     uint32_t peer_port)
{
    uint64_t key = vsock_conn_key(local_port, peer_port);
    return g_hash_table_lookup(dev->conns, &key);
}

bool vsock_local_port_in_use(struct virtio_vsock *dev, uint32_t local_port)
{
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, dev->conns);
    while (g_hash_table_iter_next(&it, NULL, &value))
        if (((struct vsock_conn *)value)->local_port == local_port)
            return true;
    return false;
}

void vsock_conn_destroy(struct virtio_vsock *dev, struct vsock_conn *conn)
{
    if (conn->fd >= 0) {
        vsock_epoll_remove(dev, conn->fd, &conn->epoll_events);
        close(conn->fd);
        conn->fd = -1;
    }
    if (conn->in_rx_ready)
        g_queue_remove(&dev->rx_ready, conn);
    g_hash_table_remove(dev->conns, &conn->key);
    conn->dead = true;
    dev->dead_conns = g_slist_prepend(dev->dead_conns, conn);
}

static void conn_free(struct vsock_conn *conn)
{
    g_byte_array_unref(conn->to_host);
    g_byte_array_unref(conn->to_guest);
    if (conn->handler && conn->handler->close)
        conn->handler->close(conn->handler->opaque, conn->session);
    g_free(conn);
}

void vsock_free_dead(struct virtio_vsock *dev)
{
    g_slist_free_full(dev->dead_conns, (GDestroyNotify)conn_free);
    dev->dead_conns = NULL;
    for (GSList *l = dev->dead_handshakes; l; l = l->next)
        g_free(l->data);
    g_slist_free(dev->dead_handshakes);
    dev->dead_handshakes = NULL;
}

void vsock_conn_reset(struct virtio_vsock *dev, struct vsock_conn *conn)
{
    vsock_queue_ctrl(dev, conn->local_port, conn->peer_port, VIRTIO_VSOCK_OP_RST, 0);
    dev->counters.resets++;
    vsock_conn_destroy(dev, conn);
}

uint32_t vsock_conn_peer_credit(const struct vsock_conn *conn)
{
    /* Unsigned wrap-around is what the spec's counters rely on. */
    uint32_t in_flight = conn->tx_cnt - conn->peer_fwd_cnt;
    return in_flight >= conn->peer_buf_alloc ? 0 : conn->peer_buf_alloc - in_flight;
}

void vsock_conn_update_peer_credit(struct virtio_vsock *dev, struct vsock_conn *conn,
                                   const struct virtio_vsock_hdr *hdr)
{
    conn->peer_buf_alloc = hdr->buf_alloc;
    conn->peer_fwd_cnt = hdr->fwd_cnt;
    if (conn->credit_blocked && vsock_conn_peer_credit(conn) > 0) {
        conn->credit_blocked = false;
        vsock_conn_mark_rx_ready(dev, conn);
    }
}

void vsock_conn_fill_credit(struct vsock_conn *conn, struct virtio_vsock_hdr *hdr)
{
    hdr->buf_alloc = VSOCK_CONN_BUF_ALLOC;
    hdr->fwd_cnt = conn->fwd_cnt;
    conn->fwd_cnt_advertised = conn->fwd_cnt;
}

/* The guest only learns that space freed up from our headers: once a quarter
 * of the buffer was passed on since it last heard, tell it. */
void vsock_conn_count_credit(struct virtio_vsock *dev, struct vsock_conn *conn, uint32_t consumed)
{
    conn->fwd_cnt += consumed;
    if (conn->credit_update_queued ||
        conn->fwd_cnt - conn->fwd_cnt_advertised < VSOCK_CONN_BUF_ALLOC / 4)
        return;
    conn->credit_update_queued = vsock_queue_ctrl(dev, conn->local_port, conn->peer_port,
                                                  VIRTIO_VSOCK_OP_CREDIT_UPDATE, 0);
}

static bool wants_host_data(const struct vsock_conn *conn)
{
    return conn->backend == BACKEND_UNIX && conn->state == CONN_ESTABLISHED && !conn->host_eof &&
           !conn->hup && !conn->in_rx_ready && !conn->credit_blocked && !conn->guest_shut_recv;
}

void vsock_conn_update_interest(struct virtio_vsock *dev, struct vsock_conn *conn)
{
    if (conn->fd < 0 || conn->hup)
        return;
    uint32_t wanted = 0;
    if (wants_host_data(conn))
        wanted |= EPOLLIN;
    if (conn->to_host->len > 0)
        wanted |= EPOLLOUT;
    vsock_epoll_set(dev, conn->fd, &conn->watch, &conn->epoll_events, wanted);
}

void vsock_conn_mark_rx_ready(struct virtio_vsock *dev, struct vsock_conn *conn)
{
    if (conn->in_rx_ready)
        return;
    conn->in_rx_ready = true;
    g_queue_push_tail(&dev->rx_ready, conn);
    vsock_conn_update_interest(dev, conn);
}

/* Write as much of iov as the socket takes without blocking. */
static ssize_t write_some(int fd, const struct iovec *iov, unsigned niov)
{
    struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = niov};
    for (;;) {
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0 || errno != EINTR)
            return n < 0 && errno == EAGAIN ? 0 : n;
    }
}

static void append_iov(GByteArray *buf, const struct iovec *iov, unsigned niov, size_t skip)
{
    for (unsigned i = 0; i < niov; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        g_byte_array_append(buf, (const guint8 *)iov[i].iov_base + skip, iov[i].iov_len - skip);
        skip = 0;
    }
}

static void finish_guest_shutdown_send(struct vsock_conn *conn)
{
    /* The guest sends no more and everything it sent reached the socket. */
    if (conn->guest_shut_send && conn->to_host->len == 0 && conn->fd >= 0)
        shutdown(conn->fd, SHUT_WR);
}

static void from_guest_to_unix(struct virtio_vsock *dev, struct vsock_conn *conn,
                               const struct iovec *iov, unsigned niov, size_t len)
{
    ssize_t written = 0;
    if (conn->hup) {
        vsock_conn_reset(dev, conn); /* the host side is gone: nobody will read it */
        return;
    }
    if (conn->to_host->len == 0) {
        written = write_some(conn->fd, iov, niov);
        if (written < 0) {
            /* The host side is gone (EPIPE, ECONNRESET): the stream is dead. */
            vsock_conn_reset(dev, conn);
            return;
        }
        vsock_conn_count_credit(dev, conn, (uint32_t)written);
    }
    if ((size_t)written < len) {
        append_iov(conn->to_host, iov, niov, (size_t)written);
        vsock_conn_update_interest(dev, conn);
    }
}

static void from_guest_to_local(struct virtio_vsock *dev, struct vsock_conn *conn,
                                const struct iovec *iov, unsigned niov, size_t len)
{
    const struct vsock_port_handler *h = conn->handler;
    for (unsigned i = 0; i < niov; i++) {
        if (!h->receive(h->opaque, conn->session, iov[i].iov_base, iov[i].iov_len, conn->to_guest)) {
            vsock_conn_reset(dev, conn);
            return;
        }
    }
    vsock_conn_count_credit(dev, conn, (uint32_t)len);
    if (conn->to_guest->len > 0)
        vsock_conn_mark_rx_ready(dev, conn);
}

void vsock_conn_from_guest(struct virtio_vsock *dev, struct vsock_conn *conn,
                           const struct iovec *iov, unsigned niov, size_t len)
{
    if (conn->state != CONN_ESTABLISHED || conn->guest_shut_send) {
        vsock_conn_reset(dev, conn); /* data where the protocol allows none */
        return;
    }
    if (conn->to_host->len + len > VSOCK_CONN_BUF_ALLOC) {
        vsock_log_guest_error(dev, "guest port %u overran its credit; connection reset",
                              conn->peer_port);
        vsock_conn_reset(dev, conn);
        return;
    }
    if (conn->backend == BACKEND_LOCAL)
        from_guest_to_local(dev, conn, iov, niov, len);
    else
        from_guest_to_unix(dev, conn, iov, niov, len);
}

void vsock_conn_flush_to_host(struct virtio_vsock *dev, struct vsock_conn *conn)
{
    if (conn->to_host->len == 0)
        return;
    struct iovec iov = {.iov_base = conn->to_host->data, .iov_len = conn->to_host->len};
    ssize_t written = write_some(conn->fd, &iov, 1);
    if (written < 0) {
        vsock_conn_reset(dev, conn);
        return;
    }
    g_byte_array_remove_range(conn->to_host, 0, (guint)written);
    if (conn->state == CONN_DRAINING) {
        if (conn->to_host->len == 0)
            vsock_conn_destroy(dev, conn); /* all delivered: now the host sees EOF */
        return;
    }
    vsock_conn_count_credit(dev, conn, (uint32_t)written);
    finish_guest_shutdown_send(conn);
    vsock_conn_update_interest(dev, conn);
}

static void start_draining(struct virtio_vsock *dev, struct vsock_conn *conn)
{
    conn->state = CONN_DRAINING;
    conn->deadline_us = g_get_monotonic_time() + VSOCK_DRAIN_TIMEOUT_US;
    if (conn->in_rx_ready) {
        g_queue_remove(&dev->rx_ready, conn);
        conn->in_rx_ready = false;
    }
    vsock_conn_update_interest(dev, conn); /* EPOLLOUT only */
}

void vsock_conn_handle_guest_shutdown(struct virtio_vsock *dev, struct vsock_conn *conn,
                                      uint32_t flags)
{
    conn->guest_shut_send |= (flags & VIRTIO_VSOCK_SHUTDOWN_SEND) != 0;
    conn->guest_shut_recv |= (flags & VIRTIO_VSOCK_SHUTDOWN_RCV) != 0;
    if (conn->guest_shut_send && conn->guest_shut_recv) {
        /* The guest closed its socket. RST confirms it, which is how a vsock
         * close completes; what the host side has not taken yet is still
         * delivered before its socket closes. */
        vsock_queue_ctrl(dev, conn->local_port, conn->peer_port, VIRTIO_VSOCK_OP_RST, 0);
        if (conn->fd >= 0 && conn->to_host->len > 0 && !conn->hup) {
            start_draining(dev, conn);
            return;
        }
        vsock_conn_destroy(dev, conn);
        return;
    }
    finish_guest_shutdown_send(conn);
    if (conn->guest_shut_recv && conn->in_rx_ready) {
        g_queue_remove(&dev->rx_ready, conn);
        conn->in_rx_ready = false;
    }
    vsock_conn_update_interest(dev, conn);
}

void vsock_conn_handle_fd_event(struct virtio_vsock *dev, struct vsock_conn *conn,
                                uint32_t events)
{
    if (events & EPOLLOUT)
        vsock_conn_flush_to_host(dev, conn);
    if (conn->dead)
        return;
    if (conn->state == CONN_DRAINING) {
        if (events & (EPOLLHUP | EPOLLERR))
            vsock_conn_destroy(dev, conn); /* the host side left: nobody to deliver to */
        return;
    }
    if (events & (EPOLLHUP | EPOLLERR)) {
        /* Both directions are closed on the host side. What is still in the
         * socket is read out through rx_ready, then the guest hears EOF. It
         * cannot stay in epoll: EPOLLHUP would fire forever. */
        vsock_epoll_remove(dev, conn->fd, &conn->epoll_events);
        conn->hup = true;
        /* Bytes still held for the host can never be delivered: say so. */
        if (conn->state == CONN_CONNECTING || conn->to_host->len > 0)
            vsock_conn_reset(dev, conn);
        else if (conn->host_eof)
            vsock_conn_start_close(dev, conn);
        else
            vsock_conn_mark_rx_ready(dev, conn);
        return;
    }
    if (events & EPOLLIN)
        vsock_conn_mark_rx_ready(dev, conn);
}

void vsock_conn_start_close(struct virtio_vsock *dev, struct vsock_conn *conn)
{
    if (conn->state == CONN_CLOSING)
        return;
    conn->state = CONN_CLOSING;
    conn->deadline_us = g_get_monotonic_time() + VSOCK_CLOSE_TIMEOUT_US;
    vsock_queue_ctrl(dev, conn->local_port, conn->peer_port, VIRTIO_VSOCK_OP_SHUTDOWN,
                     VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND);
}

static void handle_timeout(struct virtio_vsock *dev, struct vsock_conn *conn)
{
    if (conn->state == CONN_DRAINING) {
        vsock_conn_destroy(dev, conn); /* the guest already has its RST */
        return;
    }
    if (conn->state == CONN_CONNECTING)
        vsock_log_guest_error(dev, "guest did not answer a connection to port %u in time",
                              conn->peer_port);
    vsock_conn_reset(dev, conn);
}

void vsock_conn_check_timeouts(struct virtio_vsock *dev, gint64 now_us)
{
    GList *conns = g_hash_table_get_values(dev->conns);
    for (GList *l = conns; l; l = l->next) {
        struct vsock_conn *conn = l->data;
        if (conn->deadline_us && now_us >= conn->deadline_us)
            handle_timeout(dev, conn);
    }
    g_list_free(conns);
}
