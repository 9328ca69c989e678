/* Polled virtio-vsock driver (see vsockdrv.h). Packet format and credit rules
 * from the virtio spec, section 5.10. */
#include "vsockdrv.h"

#include "io.h"
#include "libc.h"
#include "serial.h"
#include "virtio.h"

#define VIRTIO_ID_VSOCK 19u
#define QUEUE_RX 0
#define QUEUE_TX 1
#define QUEUE_EVENT 2

#define RX_QUEUE_SIZE 64
#define RX_BUF_SIZE (16u * 1024u)
#define TX_QUEUE_SIZE 128
#define TX_SLOT_SIZE (16u * 1024u + 64u)
#define TX_PAYLOAD_MAX (16u * 1024u)
#define TX_CTRL_RESERVE 8 /* slots data may not take, so replies always fit */
#define EVENT_QUEUE_SIZE 4
#define RING_SIZE (64u * 1024u) /* per-socket receive ring: our buf_alloc */
#define MAX_LISTENERS 4
#define CLOSE_TIMEOUT_MS 2000
#define LOCAL_PORT_FIRST 49152u

#define OP_REQUEST 1
#define OP_RESPONSE 2
#define OP_RST 3
#define OP_SHUTDOWN 4
#define OP_RW 5
#define OP_CREDIT_UPDATE 6
#define OP_CREDIT_REQUEST 7
#define SHUTDOWN_RCV 1u
#define SHUTDOWN_SEND 2u
#define TYPE_STREAM 1
#define EVENT_TRANSPORT_RESET 0

struct pkt_hdr {
    uint64_t src_cid, dst_cid;
    uint32_t src_port, dst_port;
    uint32_t len;
    uint16_t type, op;
    uint32_t flags, buf_alloc, fwd_cnt;
} __attribute__((packed));

struct vsock_socket {
    enum vsock_state state;
    uint32_t local_port, peer_port;
    bool unaccepted; /* incoming, not yet handed out by vsock_accept */
    /* receive side */
    uint8_t *ring;
    uint32_t rx_head, rx_count;
    uint32_t fwd_cnt, fwd_cnt_sent;
    bool peer_shut_send, peer_shut_recv;
    bool credit_update_due;
    /* send side */
    uint32_t peer_buf_alloc, peer_fwd_cnt, tx_cnt;
    bool shut_send_sent;
    uint64_t close_deadline;
};

struct driver {
    bool up;
    struct virtio_dev dev;
    uint64_t cid, tsc_khz;
    struct vq rx, tx, event;
    uint16_t tx_free[TX_QUEUE_SIZE];
    unsigned ntx_free;
    uint32_t listeners[MAX_LISTENERS];
    unsigned nlisteners;
    uint32_t next_local_port;
    uint64_t transport_resets;
    struct vsock_socket sockets[VSOCK_MAX_SOCKETS];
};

static struct driver drv;

/* Rings and buffers: static, so below 16 MiB with the image. */
static struct vring_desc rx_desc[RX_QUEUE_SIZE] __attribute__((aligned(16)));
static uint16_t rx_avail[2 + RX_QUEUE_SIZE] __attribute__((aligned(2)));
static uint32_t rx_used[1 + 2 * RX_QUEUE_SIZE] __attribute__((aligned(4)));
static uint8_t rx_buffers[RX_QUEUE_SIZE][RX_BUF_SIZE] __attribute__((aligned(4096)));
static struct vring_desc tx_desc[TX_QUEUE_SIZE] __attribute__((aligned(16)));
static uint16_t tx_avail[2 + TX_QUEUE_SIZE] __attribute__((aligned(2)));
static uint32_t tx_used[1 + 2 * TX_QUEUE_SIZE] __attribute__((aligned(4)));
static uint8_t tx_slots[TX_QUEUE_SIZE][TX_SLOT_SIZE] __attribute__((aligned(64)));
static struct vring_desc ev_desc[EVENT_QUEUE_SIZE] __attribute__((aligned(16)));
static uint16_t ev_avail[2 + EVENT_QUEUE_SIZE] __attribute__((aligned(2)));
static uint32_t ev_used[1 + 2 * EVENT_QUEUE_SIZE] __attribute__((aligned(4)));
static uint32_t ev_buffers[EVENT_QUEUE_SIZE][2];
static uint8_t socket_rings[VSOCK_MAX_SOCKETS][RING_SIZE];

/* memcpy in libc.c goes byte by byte; bulk data wants rep movsb (CPL3 runs
 * natively, so it is fast). */
static void copy(void *dst, const void *src, size_t n)
{
    __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

static uint64_t now_ms(void)
{
    return rdtsc() / drv.tsc_khz;
}

/* ---- queues ---- */

static void post_rx_buffer(uint16_t id)
{
    rx_desc[id].addr = (uintptr_t)rx_buffers[id];
    rx_desc[id].len = RX_BUF_SIZE;
    rx_desc[id].flags = VRING_DESC_F_WRITE;
    rx_desc[id].next = 0;
    vq_publish(&drv.rx, id);
}

static void post_event_buffer(uint16_t id)
{
    ev_desc[id].addr = (uintptr_t)ev_buffers[id];
    ev_desc[id].len = sizeof ev_buffers[id];
    ev_desc[id].flags = VRING_DESC_F_WRITE;
    ev_desc[id].next = 0;
    vq_publish(&drv.event, id);
}

static void reclaim_tx(void)
{
    struct vring_used_elem elem;
    while (vq_take_used(&drv.tx, &elem))
        if (elem.id < TX_QUEUE_SIZE)
            drv.tx_free[drv.ntx_free++] = (uint16_t)elem.id;
}

/* A TX slot, keeping TX_CTRL_RESERVE back unless this is a control packet. */
static int take_tx_slot(bool control)
{
    if (drv.ntx_free <= (control ? 0u : (unsigned)TX_CTRL_RESERVE))
        reclaim_tx();
    if (drv.ntx_free <= (control ? 0u : (unsigned)TX_CTRL_RESERVE))
        return -1;
    return drv.tx_free[--drv.ntx_free];
}

static void fill_hdr(struct pkt_hdr *h, uint32_t local_port, uint32_t peer_port, uint16_t op)
{
    memset(h, 0, sizeof *h);
    h->src_cid = drv.cid;
    h->dst_cid = VSOCK_HOST_CID;
    h->src_port = local_port;
    h->dst_port = peer_port;
    h->type = TYPE_STREAM;
    h->op = op;
    h->buf_alloc = RING_SIZE;
}

static void publish_tx(int slot, uint32_t len)
{
    tx_desc[slot].addr = (uintptr_t)tx_slots[slot];
    tx_desc[slot].len = len;
    tx_desc[slot].flags = 0;
    tx_desc[slot].next = 0;
    vq_publish(&drv.tx, (uint16_t)slot);
}

/* A packet without payload. false if no TX slot was free. */
static bool send_ctrl(uint32_t local_port, uint32_t peer_port, uint16_t op, uint32_t flags,
                      struct vsock_socket *s)
{
    int slot = take_tx_slot(true);
    if (slot < 0)
        return false;
    struct pkt_hdr *h = (struct pkt_hdr *)tx_slots[slot];
    fill_hdr(h, local_port, peer_port, op);
    h->flags = flags;
    if (s) {
        h->fwd_cnt = s->fwd_cnt;
        s->fwd_cnt_sent = s->fwd_cnt;
    }
    publish_tx(slot, sizeof *h);
    return true;
}

/* ---- sockets ---- */

static struct vsock_socket *find_socket(uint32_t local_port, uint32_t peer_port)
{
    for (unsigned i = 0; i < VSOCK_MAX_SOCKETS; i++) {
        struct vsock_socket *s = &drv.sockets[i];
        if (s->state != VS_FREE && s->local_port == local_port && s->peer_port == peer_port)
            return s;
    }
    return NULL;
}

static struct vsock_socket *new_socket(uint32_t local_port, uint32_t peer_port)
{
    for (unsigned i = 0; i < VSOCK_MAX_SOCKETS; i++) {
        struct vsock_socket *s = &drv.sockets[i];
        if (s->state != VS_FREE)
            continue;
        memset(s, 0, sizeof *s);
        s->ring = socket_rings[i];
        s->local_port = local_port;
        s->peer_port = peer_port;
        return s;
    }
    return NULL;
}

static void free_socket(struct vsock_socket *s)
{
    s->state = VS_FREE;
}

static bool is_listening(uint32_t port)
{
    for (unsigned i = 0; i < drv.nlisteners; i++)
        if (drv.listeners[i] == port)
            return true;
    return false;
}

static void peer_reset(struct vsock_socket *s)
{
    /* A closing socket is finished; an open one tells its owner. */
    if (s->state == VS_CLOSING || s->unaccepted)
        free_socket(s);
    else
        s->state = VS_RESET;
}

static void handle_request(const struct pkt_hdr *h)
{
    struct vsock_socket *s = NULL;
    if (is_listening(h->dst_port) && !find_socket(h->dst_port, h->src_port))
        s = new_socket(h->dst_port, h->src_port);
    if (!s) {
        send_ctrl(h->dst_port, h->src_port, OP_RST, 0, NULL);
        return;
    }
    s->state = VS_ESTABLISHED;
    s->unaccepted = true;
    s->peer_buf_alloc = h->buf_alloc;
    s->peer_fwd_cnt = h->fwd_cnt;
    send_ctrl(s->local_port, s->peer_port, OP_RESPONSE, 0, s);
}

static void handle_rw(struct vsock_socket *s, const uint8_t *payload, uint32_t len)
{
    if (len > RING_SIZE - s->rx_count || s->peer_shut_send) {
        /* The host overran the credit we gave: the stream is broken. */
        send_ctrl(s->local_port, s->peer_port, OP_RST, 0, NULL);
        s->state = VS_RESET;
        return;
    }
    uint32_t tail = (s->rx_head + s->rx_count) % RING_SIZE;
    uint32_t first = len < RING_SIZE - tail ? len : RING_SIZE - tail;
    copy(s->ring + tail, payload, first);
    copy(s->ring, payload + first, len - first);
    s->rx_count += len;
}

static void handle_shutdown(struct vsock_socket *s, uint32_t flags)
{
    s->peer_shut_send |= (flags & SHUTDOWN_SEND) != 0;
    s->peer_shut_recv |= (flags & SHUTDOWN_RCV) != 0;
    if (s->state == VS_CLOSING && s->peer_shut_send && s->peer_shut_recv) {
        send_ctrl(s->local_port, s->peer_port, OP_RST, 0, NULL);
        free_socket(s);
    }
}

static void handle_packet(const struct pkt_hdr *h, const uint8_t *payload, uint32_t avail)
{
    if (h->dst_cid != drv.cid || h->src_cid != VSOCK_HOST_CID || h->type != TYPE_STREAM ||
        h->len > avail)
        return;
    struct vsock_socket *s = find_socket(h->dst_port, h->src_port);
    if (!s) {
        if (h->op == OP_REQUEST)
            handle_request(h);
        else if (h->op != OP_RST)
            send_ctrl(h->dst_port, h->src_port, OP_RST, 0, NULL);
        return;
    }
    s->peer_buf_alloc = h->buf_alloc;
    s->peer_fwd_cnt = h->fwd_cnt;
    switch (h->op) {
    case OP_RESPONSE:
        if (s->state == VS_CONNECTING)
            s->state = VS_ESTABLISHED;
        break;
    case OP_RST: peer_reset(s); break;
    case OP_SHUTDOWN: handle_shutdown(s, h->flags); break;
    case OP_RW:
        if (s->state == VS_ESTABLISHED)
            handle_rw(s, payload, h->len);
        break;
    case OP_CREDIT_REQUEST: s->credit_update_due = true; break;
    case OP_CREDIT_UPDATE: break;
    default: break;
    }
}

static unsigned take_rx(void)
{
    struct vring_used_elem elem;
    unsigned packets = 0;
    while (vq_take_used(&drv.rx, &elem)) {
        if (elem.id >= RX_QUEUE_SIZE)
            continue;
        const uint8_t *buf = rx_buffers[elem.id];
        if (elem.len >= sizeof(struct pkt_hdr) && elem.len <= RX_BUF_SIZE) {
            struct pkt_hdr h;
            copy(&h, buf, sizeof h);
            handle_packet(&h, buf + sizeof h, elem.len - (uint32_t)sizeof h);
        }
        post_rx_buffer((uint16_t)elem.id);
        packets++;
    }
    return packets;
}

static void reset_all_sockets(void)
{
    for (unsigned i = 0; i < VSOCK_MAX_SOCKETS; i++) {
        struct vsock_socket *s = &drv.sockets[i];
        if (s->state == VS_FREE)
            continue;
        if (s->state == VS_CLOSING || s->unaccepted)
            free_socket(s);
        else
            s->state = VS_RESET;
    }
}

static void take_events(void)
{
    struct vring_used_elem elem;
    while (vq_take_used(&drv.event, &elem)) {
        if (elem.id >= EVENT_QUEUE_SIZE)
            continue;
        if (elem.len >= 4 && ev_buffers[elem.id][0] == EVENT_TRANSPORT_RESET) {
            drv.transport_resets++;
            /* As Linux: the CID may have changed (a restored clone). */
            drv.cid = virtio_config_read64(&drv.dev, 0);
            reset_all_sockets();
        }
        post_event_buffer((uint16_t)elem.id);
    }
}

static void housekeeping(void)
{
    uint64_t now = now_ms();
    for (unsigned i = 0; i < VSOCK_MAX_SOCKETS; i++) {
        struct vsock_socket *s = &drv.sockets[i];
        if (s->state == VS_CLOSING && now >= s->close_deadline) {
            send_ctrl(s->local_port, s->peer_port, OP_RST, 0, NULL);
            free_socket(s);
        } else if (s->state == VS_ESTABLISHED && s->credit_update_due &&
                   send_ctrl(s->local_port, s->peer_port, OP_CREDIT_UPDATE, 0, s)) {
            s->credit_update_due = false;
        }
    }
}

unsigned vsock_poll(void)
{
    if (!drv.up)
        return 0;
    /* Events first: a transport reset (posted by the shim when it restored
     * the device) predates any packet in the RX queue, so a host connection
     * made right after a restore must not be accepted and then dropped. */
    take_events();
    unsigned packets = take_rx();
    reclaim_tx();
    housekeeping();
    vq_flush(&drv.dev, &drv.rx);
    vq_flush(&drv.dev, &drv.event);
    vq_flush(&drv.dev, &drv.tx);
    return packets;
}

/* ---- robustness test ---- */

/* One malformed packet in a TX slot; fix(h, &len, &addr) spoils it. */
static bool send_spoiled(void (*spoil)(struct pkt_hdr *h, uint32_t *len, uint64_t *addr))
{
    int slot = take_tx_slot(true);
    if (slot < 0)
        return false;
    struct pkt_hdr *h = (struct pkt_hdr *)tx_slots[slot];
    fill_hdr(h, 0x7777, 0x8888, OP_RW);
    h->len = 16;
    uint32_t len = sizeof *h + 16;
    uint64_t addr = (uintptr_t)tx_slots[slot];
    spoil(h, &len, &addr);
    tx_desc[slot].addr = addr;
    tx_desc[slot].len = len;
    tx_desc[slot].flags = 0;
    tx_desc[slot].next = 0;
    vq_publish(&drv.tx, (uint16_t)slot);
    return true;
}

static void short_header(struct pkt_hdr *h, uint32_t *len, uint64_t *addr) { *len = 10; }
static void unknown_connection(struct pkt_hdr *h, uint32_t *len, uint64_t *addr) { }
static void wrong_type(struct pkt_hdr *h, uint32_t *len, uint64_t *addr) { h->type = 2; h->op = OP_REQUEST; }
static void length_beyond_buffer(struct pkt_hdr *h, uint32_t *len, uint64_t *addr) { h->len = 1u << 20; }
static void spoofed_cid(struct pkt_hdr *h, uint32_t *len, uint64_t *addr) { h->src_cid = 77; h->op = OP_REQUEST; }
static void unknown_op(struct pkt_hdr *h, uint32_t *len, uint64_t *addr) { h->op = 99; }
static void outside_ram(struct pkt_hdr *h, uint32_t *len, uint64_t *addr) { *addr = 0x7fff00000000ull; }
static void zero_length(struct pkt_hdr *h, uint32_t *len, uint64_t *addr) { *len = 0; }

unsigned vsock_send_malformed(void)
{
    void (*spoilers[])(struct pkt_hdr *, uint32_t *, uint64_t *) = {
        short_header, unknown_connection, wrong_type, length_beyond_buffer,
        spoofed_cid, unknown_op, outside_ram, zero_length,
    };
    unsigned sent = 0;
    for (unsigned i = 0; i < sizeof spoilers / sizeof spoilers[0]; i++)
        sent += send_spoiled(spoilers[i]);
    vq_flush(&drv.dev, &drv.tx);
    return sent;
}

/* ---- set-up ---- */

static bool setup_queues(void)
{
    if (!virtio_setup_queue(&drv.dev, &drv.rx, QUEUE_RX, RX_QUEUE_SIZE, rx_desc, rx_avail,
                            (volatile uint16_t *)rx_used) ||
        !virtio_setup_queue(&drv.dev, &drv.tx, QUEUE_TX, TX_QUEUE_SIZE, tx_desc, tx_avail,
                            (volatile uint16_t *)tx_used) ||
        !virtio_setup_queue(&drv.dev, &drv.event, QUEUE_EVENT, EVENT_QUEUE_SIZE, ev_desc,
                            ev_avail, (volatile uint16_t *)ev_used))
        return false;
    for (uint16_t i = 0; i < RX_QUEUE_SIZE; i++)
        post_rx_buffer(i);
    for (uint16_t i = 0; i < EVENT_QUEUE_SIZE; i++)
        post_event_buffer(i);
    drv.ntx_free = 0;
    for (uint16_t i = 0; i < TX_QUEUE_SIZE; i++)
        drv.tx_free[drv.ntx_free++] = (uint16_t)(TX_QUEUE_SIZE - 1 - i);
    return true;
}

bool vsock_init(const char *cmdline, uint64_t tsc_khz)
{
    drv.tsc_khz = tsc_khz ? tsc_khz : 1000000;
    drv.next_local_port = LOCAL_PORT_FIRST;
    if (!virtio_find(cmdline, VIRTIO_ID_VSOCK, &drv.dev))
        return false;
    if (!virtio_negotiate(&drv.dev) || !setup_queues()) {
        serial_log("error: the virtio-vsock device refused the driver");
        return false;
    }
    drv.cid = virtio_config_read64(&drv.dev, 0);
    virtio_driver_ok(&drv.dev);
    drv.up = true;
    vsock_poll(); /* rings the RX and event doorbells once */
    return true;
}

uint64_t vsock_guest_cid(void)
{
    return drv.cid;
}

uint64_t vsock_transport_resets(void)
{
    return drv.transport_resets;
}

/* ---- socket API ---- */

bool vsock_listen(uint32_t port)
{
    if (is_listening(port) || drv.nlisteners == MAX_LISTENERS)
        return false;
    drv.listeners[drv.nlisteners++] = port;
    return true;
}

struct vsock_socket *vsock_accept(uint32_t port)
{
    for (unsigned i = 0; i < VSOCK_MAX_SOCKETS; i++) {
        struct vsock_socket *s = &drv.sockets[i];
        if (s->state != VS_FREE && s->unaccepted && s->local_port == port) {
            s->unaccepted = false;
            return s;
        }
    }
    return NULL;
}

static uint32_t allocate_local_port(void)
{
    for (;;) {
        uint32_t port = drv.next_local_port++;
        if (drv.next_local_port < LOCAL_PORT_FIRST)
            drv.next_local_port = LOCAL_PORT_FIRST;
        bool used = is_listening(port);
        for (unsigned i = 0; i < VSOCK_MAX_SOCKETS && !used; i++)
            used = drv.sockets[i].state != VS_FREE && drv.sockets[i].local_port == port;
        if (!used)
            return port;
    }
}

struct vsock_socket *vsock_connect(uint32_t port)
{
    struct vsock_socket *s = drv.up ? new_socket(allocate_local_port(), port) : NULL;
    if (!s)
        return NULL;
    s->state = VS_CONNECTING;
    if (!send_ctrl(s->local_port, s->peer_port, OP_REQUEST, 0, s)) {
        free_socket(s);
        return NULL;
    }
    return s;
}

enum vsock_state vsock_socket_state(const struct vsock_socket *s)
{
    return s->state;
}

size_t vsock_send(struct vsock_socket *s, const void *data, size_t len)
{
    if (s->state != VS_ESTABLISHED || s->shut_send_sent || s->peer_shut_recv)
        return 0;
    uint32_t in_flight = s->tx_cnt - s->peer_fwd_cnt;
    uint32_t credit = in_flight >= s->peer_buf_alloc ? 0 : s->peer_buf_alloc - in_flight;
    size_t n = len < credit ? len : credit;
    if (n > TX_PAYLOAD_MAX)
        n = TX_PAYLOAD_MAX;
    if (n == 0)
        return 0;
    int slot = take_tx_slot(false);
    if (slot < 0)
        return 0;
    struct pkt_hdr *h = (struct pkt_hdr *)tx_slots[slot];
    fill_hdr(h, s->local_port, s->peer_port, OP_RW);
    h->len = (uint32_t)n;
    h->fwd_cnt = s->fwd_cnt;
    s->fwd_cnt_sent = s->fwd_cnt;
    copy(tx_slots[slot] + sizeof *h, data, n);
    publish_tx(slot, (uint32_t)(sizeof *h + n));
    s->tx_cnt += (uint32_t)n;
    return n;
}

size_t vsock_recv(struct vsock_socket *s, void *data, size_t len)
{
    size_t n = len < s->rx_count ? len : s->rx_count;
    uint32_t first = (uint32_t)(n < RING_SIZE - s->rx_head ? n : RING_SIZE - s->rx_head);
    copy(data, s->ring + s->rx_head, first);
    copy((uint8_t *)data + first, s->ring, n - first);
    s->rx_head = (uint32_t)((s->rx_head + n) % RING_SIZE);
    s->rx_count -= (uint32_t)n;
    s->fwd_cnt += (uint32_t)n;
    /* The host only learns of freed space from our headers. */
    if (s->fwd_cnt - s->fwd_cnt_sent >= RING_SIZE / 4)
        s->credit_update_due = true;
    return n;
}

size_t vsock_readable(const struct vsock_socket *s)
{
    return s->rx_count;
}

bool vsock_eof(const struct vsock_socket *s)
{
    return s->rx_count == 0 && (s->peer_shut_send || s->state == VS_RESET);
}

bool vsock_peer_stopped_reading(const struct vsock_socket *s)
{
    return s->peer_shut_recv;
}

void vsock_shutdown_send(struct vsock_socket *s)
{
    if (s->state == VS_ESTABLISHED && !s->shut_send_sent &&
        send_ctrl(s->local_port, s->peer_port, OP_SHUTDOWN, SHUTDOWN_SEND, s))
        s->shut_send_sent = true;
}

void vsock_close(struct vsock_socket *s)
{
    if (s->state == VS_RESET || s->state == VS_FREE) {
        free_socket(s);
        return;
    }
    if (s->peer_shut_send && s->peer_shut_recv) {
        /* The host already closed both ways: our RST completes the close. */
        send_ctrl(s->local_port, s->peer_port, OP_RST, 0, NULL);
        free_socket(s);
        return;
    }
    send_ctrl(s->local_port, s->peer_port, OP_SHUTDOWN, SHUTDOWN_SEND | SHUTDOWN_RCV, s);
    s->state = VS_CLOSING;
    s->close_deadline = now_ms() + CLOSE_TIMEOUT_MS;
}

void vsock_release(struct vsock_socket *s)
{
    free_socket(s);
}
