/* virtio-vsock packets: what the guest sends (TX queue) and what the device
 * puts in the guest's receive buffers (RX queue), virtio spec 5.10.6. */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "devices/virtio-vsock-priv.h"

static struct virtq *queue(struct virtio_vsock *dev, unsigned index)
{
    return &dev->transport.queues[index];
}

static void fill_header(struct virtio_vsock *dev, struct virtio_vsock_hdr *hdr,
                        uint32_t local_port, uint32_t peer_port, uint16_t op)
{
    memset(hdr, 0, sizeof *hdr);
    hdr->src_cid = VSOCK_HOST_CID;
    hdr->dst_cid = dev->guest_cid;
    hdr->src_port = local_port;
    hdr->dst_port = peer_port;
    hdr->type = VIRTIO_VSOCK_TYPE_STREAM;
    hdr->op = op;
}

bool vsock_queue_ctrl(struct virtio_vsock *dev, uint32_t local_port, uint32_t peer_port,
                      uint16_t op, uint32_t flags)
{
    if (dev->ctrl_queue.length >= VSOCK_CTRL_QUEUE_MAX)
        return false; /* see VSOCK_CTRL_QUEUE_MAX */
    struct virtio_vsock_hdr *hdr = g_new(struct virtio_vsock_hdr, 1);
    fill_header(dev, hdr, local_port, peer_port, op);
    hdr->flags = flags;
    g_queue_push_tail(&dev->ctrl_queue, hdr);
    return true;
}

/* ---- guest -> device ---- */

static void reply_rst(struct virtio_vsock *dev, const struct virtio_vsock_hdr *hdr)
{
    if (hdr->op != VIRTIO_VSOCK_OP_RST) /* never answer a reset with a reset */
        vsock_queue_ctrl(dev, hdr->dst_port, hdr->src_port, VIRTIO_VSOCK_OP_RST, 0);
}

static void handle_request(struct virtio_vsock *dev, const struct virtio_vsock_hdr *hdr)
{
    struct vsock_conn *conn;
    const struct vsock_port_handler *h = vsock_port_handler_for(dev, hdr->dst_port);
    if (h) {
        conn = vsock_conn_new(dev, hdr->dst_port, hdr->src_port, BACKEND_LOCAL, -1);
        conn->handler = h;
        conn->session = h->open ? h->open(h->opaque) : NULL;
        dev->counters.local_connections++;
    } else {
        int fd = vsock_unix_dial(dev, hdr->dst_port);
        if (fd < 0) {
            reply_rst(dev, hdr);
            return;
        }
        conn = vsock_conn_new(dev, hdr->dst_port, hdr->src_port, BACKEND_UNIX, fd);
    }
    conn->state = CONN_ESTABLISHED;
    dev->counters.connections_guest++;
    vsock_conn_update_peer_credit(dev, conn, hdr);
    vsock_queue_ctrl(dev, conn->local_port, conn->peer_port, VIRTIO_VSOCK_OP_RESPONSE, 0);
    vsock_conn_update_interest(dev, conn);
}

static void handle_response(struct virtio_vsock *dev, struct vsock_conn *conn)
{
    if (conn->state != CONN_CONNECTING) {
        vsock_conn_reset(dev, conn);
        return;
    }
    if (!vsock_unix_send_ok(conn)) {
        vsock_conn_reset(dev, conn); /* the UNIX client left meanwhile */
        return;
    }
    conn->state = CONN_ESTABLISHED;
    conn->deadline_us = 0;
    vsock_conn_update_interest(dev, conn);
}

static void handle_rw(struct virtio_vsock *dev, struct vsock_conn *conn,
                      const struct virtq_chain *chain, uint32_t len)
{
    struct iovec iov[VIRTQ_MAX_CHAIN];
    unsigned niov = virtq_chain_read_iov(chain, VSOCK_HDR_SIZE, len, iov);
    dev->counters.tx_bytes += len;
    if (len > 0)
        vsock_conn_from_guest(dev, conn, iov, niov, len);
}

static void handle_conn_packet(struct virtio_vsock *dev, struct vsock_conn *conn,
                               const struct virtio_vsock_hdr *hdr, const struct virtq_chain *chain)
{
    vsock_conn_update_peer_credit(dev, conn, hdr);
    switch (hdr->op) {
    case VIRTIO_VSOCK_OP_RESPONSE:
        handle_response(dev, conn);
        break;
    case VIRTIO_VSOCK_OP_RST:
        vsock_conn_destroy(dev, conn);
        break;
    case VIRTIO_VSOCK_OP_SHUTDOWN:
        vsock_conn_handle_guest_shutdown(dev, conn, hdr->flags);
        break;
    case VIRTIO_VSOCK_OP_RW:
        handle_rw(dev, conn, chain, hdr->len);
        break;
    case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
        break; /* the credit fields were all it carried */
    case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
        if (!conn->credit_update_queued)
            conn->credit_update_queued = vsock_queue_ctrl(dev, conn->local_port, conn->peer_port,
                                                          VIRTIO_VSOCK_OP_CREDIT_UPDATE, 0);
        break;
    default: /* REQUEST on a live connection, or an unknown op */
        vsock_conn_reset(dev, conn);
        break;
    }
}

static void handle_packet(struct virtio_vsock *dev, const struct virtq_chain *chain)
{
    struct virtio_vsock_hdr hdr;
    if (virtq_chain_read(chain, 0, &hdr, sizeof hdr) < sizeof hdr) {
        vsock_log_guest_error(dev, "TX packet of %zu bytes is shorter than a header", chain->read_len);
        return; /* too short to even answer */
    }
    dev->counters.tx_packets++;
    /* Packets not from our guest to the host are dropped (spec 5.10.6.6). */
    if (hdr.src_cid != dev->guest_cid || hdr.dst_cid != VSOCK_HOST_CID)
        return;
    struct vsock_conn *conn = vsock_conn_lookup(dev, hdr.dst_port, hdr.src_port);
    bool bad_length = hdr.len > chain->read_len - VSOCK_HDR_SIZE || hdr.len > VSOCK_MAX_PKT_PAYLOAD;
    if (bad_length)
        vsock_log_guest_error(dev, "TX packet claims %u payload bytes in a %zu-byte buffer",
                              hdr.len, chain->read_len);
    if (hdr.type != VIRTIO_VSOCK_TYPE_STREAM || bad_length) {
        if (conn)
            vsock_conn_reset(dev, conn);
        else
            reply_rst(dev, &hdr);
        return;
    }
    if (conn)
        handle_conn_packet(dev, conn, &hdr, chain);
    else if (hdr.op == VIRTIO_VSOCK_OP_REQUEST)
        handle_request(dev, &hdr);
    else
        reply_rst(dev, &hdr);
}

void vsock_process_tx(struct virtio_vsock *dev)
{
    struct virtq *txq = queue(dev, VSOCK_QUEUE_TX);
    struct virtq_chain chain;
    bool used = false;
    if (!txq->ready)
        return;
    for (;;) {
        /* While the device drains the queue, a polling driver need not ring. */
        virtq_set_notify_wanted(txq, false);
        int r;
        g_autoptr(GError) error = NULL;
        while ((r = virtq_pop(txq, &chain, &error)) != 0) {
            if (r > 0)
                handle_packet(dev, &chain);
            else
                vsock_log_guest_error(dev, "dropped a TX chain: %s", error->message);
            g_clear_error(&error);
            virtq_push(txq, chain.head, 0);
            used = true;
        }
        virtq_set_notify_wanted(txq, true);
        if (!virtq_has_available(txq))
            break;
    }
    if (used)
        virtio_mmio_signal_used(&dev->transport, txq);
}

/* ---- device -> guest ---- */

static void remove_from_rx_ready(struct virtio_vsock *dev, struct vsock_conn *conn)
{
    g_queue_remove(&dev->rx_ready, conn);
    conn->in_rx_ready = false;
    vsock_conn_update_interest(dev, conn);
}

static uint32_t deliver_ctrl(struct virtio_vsock *dev, struct virtq *rxq,
                             const struct virtq_chain *chain)
{
    struct virtio_vsock_hdr *hdr = g_queue_pop_head(&dev->ctrl_queue);
    struct vsock_conn *conn = vsock_conn_lookup(dev, hdr->src_port, hdr->dst_port);
    if (conn && hdr->op != VIRTIO_VSOCK_OP_RST) {
        vsock_conn_fill_credit(conn, hdr);
        if (hdr->op == VIRTIO_VSOCK_OP_CREDIT_UPDATE)
            conn->credit_update_queued = false;
    } else if (hdr->op == VIRTIO_VSOCK_OP_CREDIT_UPDATE) {
        g_free(hdr); /* the connection is gone: nothing to update */
        return 0;
    }
    virtq_chain_write(rxq, chain, 0, hdr, sizeof *hdr);
    g_free(hdr);
    dev->counters.rx_packets++;
    return VSOCK_HDR_SIZE;
}

/* The host side reached end of stream. */
static void host_eof(struct virtio_vsock *dev, struct vsock_conn *conn)
{
    conn->host_eof = true;
    remove_from_rx_ready(dev, conn);
    if (conn->hup)
        vsock_conn_start_close(dev, conn);
    else
        vsock_queue_ctrl(dev, conn->local_port, conn->peer_port, VIRTIO_VSOCK_OP_SHUTDOWN,
                         VIRTIO_VSOCK_SHUTDOWN_SEND);
}

/* Read from the host side straight into the guest buffer. Returns payload
 * bytes, 0 if this connection has nothing to give now. */
static size_t read_host_data(struct virtio_vsock *dev, struct virtq *rxq, struct vsock_conn *conn,
                             const struct virtq_chain *chain, size_t max)
{
    if (conn->backend == BACKEND_LOCAL) {
        size_t n = MIN(max, conn->to_guest->len);
        virtq_chain_write(rxq, chain, VSOCK_HDR_SIZE, conn->to_guest->data, n);
        g_byte_array_remove_range(conn->to_guest, 0, (guint)n);
        if (conn->to_guest->len == 0)
            remove_from_rx_ready(dev, conn);
        return n;
    }
    struct iovec iov[VIRTQ_MAX_CHAIN];
    unsigned niov = virtq_chain_write_iov(chain, VSOCK_HDR_SIZE, max, iov);
    ssize_t n;
    do {
        n = readv(conn->fd, iov, (int)niov);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        virtq_chain_mark_written(rxq, chain, VSOCK_HDR_SIZE, (size_t)n);
        return (size_t)n;
    }
    if (n == 0)
        host_eof(dev, conn);
    else if (errno == EAGAIN)
        remove_from_rx_ready(dev, conn); /* drained: epoll tells when there is more */
    else
        vsock_conn_reset(dev, conn);
    return 0;
}

static uint32_t deliver_data(struct virtio_vsock *dev, struct virtq *rxq, struct vsock_conn *conn,
                             const struct virtq_chain *chain)
{
    uint32_t credit = vsock_conn_peer_credit(conn);
    if (credit == 0) {
        conn->credit_blocked = true;
        remove_from_rx_ready(dev, conn);
        return 0;
    }
    size_t max = MIN(MIN((size_t)credit, chain->write_len - VSOCK_HDR_SIZE), VSOCK_MAX_PKT_PAYLOAD);
    size_t n = read_host_data(dev, rxq, conn, chain, max);
    if (n == 0)
        return 0;
    struct virtio_vsock_hdr hdr;
    fill_header(dev, &hdr, conn->local_port, conn->peer_port, VIRTIO_VSOCK_OP_RW);
    hdr.len = (uint32_t)n;
    vsock_conn_fill_credit(conn, &hdr);
    virtq_chain_write(rxq, chain, 0, &hdr, sizeof hdr);
    conn->tx_cnt += (uint32_t)n;
    dev->counters.rx_bytes += n;
    dev->counters.rx_packets++;
    if (conn->in_rx_ready) { /* round robin between busy connections */
        g_queue_remove(&dev->rx_ready, conn);
        g_queue_push_tail(&dev->rx_ready, conn);
    }
    return VSOCK_HDR_SIZE + (uint32_t)n;
}

/* Fill one receive buffer with the next thing for the guest; 0 if nothing. */
static uint32_t fill_rx_buffer(struct virtio_vsock *dev, struct virtq *rxq,
                               const struct virtq_chain *chain)
{
    for (;;) {
        if (dev->ctrl_queue.length > 0) {
            uint32_t n = deliver_ctrl(dev, rxq, chain);
            if (n)
                return n;
            continue;
        }
        struct vsock_conn *conn = g_queue_peek_head(&dev->rx_ready);
        /* A buffer with room for a header only takes control packets: data
         * in it would be a zero-length read, which loops here (the
         * connection stays first) or reads as the host's end of stream. */
        if (!conn || chain->write_len <= VSOCK_HDR_SIZE)
            return 0;
        uint32_t n = deliver_data(dev, rxq, conn, chain);
        if (n)
            return n;
    }
}

static bool has_work_for_guest(const struct virtio_vsock *dev)
{
    return dev->ctrl_queue.length > 0 || dev->rx_ready.length > 0;
}

void vsock_process_rx(struct virtio_vsock *dev)
{
    struct virtq *rxq = queue(dev, VSOCK_QUEUE_RX);
    struct virtq_chain chain;
    bool used = false;
    if (!virtio_mmio_is_active(&dev->transport) || !rxq->ready)
        return;
    while (has_work_for_guest(dev)) {
        g_autoptr(GError) error = NULL;
        int r = virtq_pop(rxq, &chain, &error);
        if (r == 0) {
            /* Out of buffers: ask to be told when the guest posts more, then
             * look once more in case it did so meanwhile. */
            virtq_set_notify_wanted(rxq, true);
            if (!virtq_has_available(rxq))
                break;
            continue;
        }
        if (r < 0 || chain.write_len < VSOCK_HDR_SIZE || chain.nread > 0) {
            vsock_log_guest_error(dev, "dropped an unusable RX buffer: %s",
                                  error ? error->message : "too small or device-readable");
            virtq_push(rxq, chain.head, 0);
            used = true;
            continue;
        }
        uint32_t written = fill_rx_buffer(dev, rxq, &chain);
        if (written == 0 && chain.write_len <= VSOCK_HDR_SIZE && dev->rx_ready.length > 0) {
            /* data waits, and this buffer cannot carry it: the next may */
            vsock_log_guest_error(dev, "dropped an RX buffer with no room for data");
            virtq_push(rxq, chain.head, 0);
            used = true;
            continue;
        }
        if (written == 0) {
            virtq_unpop(rxq);
            break;
        }
        virtq_push(rxq, chain.head, written);
        used = true;
    }
    if (!has_work_for_guest(dev))
        virtq_set_notify_wanted(rxq, false);
    if (used)
        virtio_mmio_signal_used(&dev->transport, rxq);
}

void vsock_process_event(struct virtio_vsock *dev)
{
    struct virtq *evq = queue(dev, VSOCK_QUEUE_EVENT);
    struct virtq_chain chain;
    g_autoptr(GError) error = NULL;
    if (!dev->event_pending || !virtio_mmio_is_active(&dev->transport) || !evq->ready)
        return;
    int r = virtq_pop(evq, &chain, &error);
    if (r == 0)
        return; /* sent when the guest posts an event buffer */
    uint32_t written = 0;
    if (r > 0 && chain.write_len >= sizeof(struct virtio_vsock_event)) {
        struct virtio_vsock_event event = {.id = VIRTIO_VSOCK_EVENT_TRANSPORT_RESET};
        written = (uint32_t)virtq_chain_write(evq, &chain, 0, &event, sizeof event);
        dev->event_pending = false;
        gint64 asked = __atomic_load_n(&dev->reset_requested_us, __ATOMIC_RELAXED);
        dev->counters.reset_delivery_us = (uint64_t)MAX(0, g_get_monotonic_time() - asked);
    }
    virtq_push(evq, chain.head, written);
    virtio_mmio_signal_used(&dev->transport, evq);
}
