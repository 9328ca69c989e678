/* Polled virtio-net driver and the guest's IPv4 host (see netdrv.h). Frames
 * carry the 12-byte virtio 1.x header (virtio spec 5.1.6); queue 0 receives,
 * 1 transmits, 2 is the control queue. */
#include "netdrv.h"

#include "io.h"
#include "libc.h"
#include "serial.h"
#include "virtio.h"

#define VIRTIO_ID_NET 1u
#define F_CSUM (1u << 0)
#define F_GUEST_CSUM (1u << 1)
#define F_MTU (1u << 3)
#define F_MAC (1u << 5)
#define F_MRG_RXBUF (1u << 15)
#define F_STATUS (1u << 16)
#define F_CTRL_VQ (1u << 17)
#define F_GUEST_ANNOUNCE (1u << 21)
#define WANTED (F_CSUM | F_GUEST_CSUM | F_MTU | F_MAC | F_MRG_RXBUF | F_STATUS | F_CTRL_VQ | F_GUEST_ANNOUNCE)
#define HDR_NEEDS_CSUM 1u
#define S_LINK_UP 1u
#define S_ANNOUNCE 2u
#define CTRL_ANNOUNCE 3u
#define CTRL_ANNOUNCE_ACK 0u

#define HDR 12u
#define RX_SIZE 128u
#define RX_BUF 2048u
#define TX_SIZE 128u
#define TX_SLOTS 32u         /* descriptors 0..31 carry frames; the rest are NETBADPKT's */
#define TX_BUF (HDR + 9216u) /* an MTU 9000 frame and its header */
#define CTRL_SIZE 8u
#define FRAME_MAX 16384u
#define CONFIG_POLL_MS 10u
/* Announcements go out three times, 100 ms apart, as Linux's
 * num_grat_arp-style repeats do: a bridge port that just came up may not
 * forward the first. */
#define ANNOUNCEMENTS 3u
#define ANNOUNCE_GAP_MS 100u

#define ETH_ARP 0x0806u
#define ETH_IPV4 0x0800u
#define IP_ICMP 1u
#define IP_UDP 17u
#define UDP_ECHO_PORT 7u

#define USED_BYTES(n) ((6 + 8 * (n) + 3) & ~3u)

static struct vring_desc rx_desc[RX_SIZE] __attribute__((aligned(16)));
static uint16_t rx_avail[3 + RX_SIZE] __attribute__((aligned(2)));
static uint8_t rx_used[USED_BYTES(RX_SIZE)] __attribute__((aligned(4)));
static uint8_t rx_bufs[RX_SIZE][RX_BUF] __attribute__((aligned(64)));
static struct vring_desc tx_desc[TX_SIZE] __attribute__((aligned(16)));
static uint16_t tx_avail[3 + TX_SIZE] __attribute__((aligned(2)));
static uint8_t tx_used[USED_BYTES(TX_SIZE)] __attribute__((aligned(4)));
static uint8_t tx_bufs[TX_SLOTS][TX_BUF] __attribute__((aligned(64)));
static struct vring_desc ctrl_desc[CTRL_SIZE] __attribute__((aligned(16)));
static uint16_t ctrl_avail[3 + CTRL_SIZE] __attribute__((aligned(2)));
static uint8_t ctrl_used[USED_BYTES(CTRL_SIZE)] __attribute__((aligned(4)));
static uint8_t ctrl_buf[4];
static uint8_t frame[FRAME_MAX];
static uint8_t frame_hdr[HDR]; /* the received frame's virtio header */

static struct {
    bool active;
    struct virtio_dev dev;
    struct vq rx, tx, ctrl;
    uint32_t features;
    uint8_t mac[6];
    uint32_t ip, netmask;
    uint16_t mtu;
    bool link_up;
    bool tx_busy[TX_SLOTS];
    unsigned tx_free;
    uint64_t rx_packets, tx_packets;
    uint64_t tsc_khz, next_config_tsc;
    unsigned bad_rx_left;      /* NETBADPKT: receive buffers still to post malformed */
    bool bad_rx[RX_SIZE];      /* ... and those posted so (they come back empty) */
    unsigned bad_rx_returned;
    unsigned announcements_left; /* gratuitous ARPs still to send, ANNOUNCE_GAP_MS apart */
    uint64_t next_announce_tsc;
} net;

/* ---- bytes ---- */

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, (uint16_t)(v >> 16));
    put16(p + 2, (uint16_t)v);
}

static bool same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* The Internet checksum (RFC 1071) of len bytes. */
static uint16_t inet_checksum(const uint8_t *p, size_t len)
{
    uint64_t sum = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        sum += get16(p + i);
    if (len & 1)
        sum += (uint32_t)p[len - 1] << 8;
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

/* ---- the command line ---- */

static const char *option(const char *cmdline, const char *name, size_t *len)
{
    size_t n = strlen(name);
    for (const char *p = cmdline; *p; p++) {
        if (p != cmdline && p[-1] != ' ')
            continue;
        size_t i = 0;
        while (i < n && p[i] == name[i])
            i++;
        if (i < n || p[n] != '=')
            continue;
        const char *value = p + n + 1;
        *len = 0;
        while (value[*len] && value[*len] != ' ')
            (*len)++;
        return value;
    }
    return 0;
}

/* "A.B.C.D/N" */
static bool parse_ip(const char *s, size_t len, uint32_t *ip, uint32_t *mask)
{
    uint32_t v = 0;
    unsigned part = 0;
    size_t i = 0;
    for (; part < 4; part++) {
        uint32_t octet = 0;
        size_t start = i;
        while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 3)
            octet = octet * 10 + (uint32_t)(s[i++] - '0');
        if (i == start || octet > 255)
            return false;
        v = v << 8 | octet;
        if (part < 3 && (i >= len || s[i++] != '.'))
            return false;
    }
    uint64_t bits = 32;
    if (i < len && s[i] == '/') {
        if (!parse_u64(s + i + 1, len - i - 1, &bits) || bits > 32)
            return false;
    } else if (i != len) {
        return false;
    }
    *ip = v;
    *mask = bits ? ~0u << (32 - bits) : 0;
    return true;
}

static void put_mac(const uint8_t mac[6])
{
    static const char hex[] = "0123456789abcdef";
    char text[18];
    for (unsigned i = 0; i < 6; i++) {
        text[3 * i] = hex[mac[i] >> 4];
        text[3 * i + 1] = hex[mac[i] & 15];
        text[3 * i + 2] = i < 5 ? ':' : '\0';
    }
    serial_puts(text);
}

static bool parse_mac(const char *s, size_t len, uint8_t mac[6])
{
    if (len != 17)
        return false;
    for (unsigned i = 0; i < 6; i++) {
        uint8_t v = 0;
        for (unsigned k = 0; k < 2; k++) {
            char c = s[3 * i + k];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0)
                return false;
            v = (uint8_t)(v << 4 | d);
        }
        if (i < 5 && s[3 * i + 2] != ':')
            return false;
        mac[i] = v;
    }
    return true;
}

/* ---- the device ---- */

static void read_mac(void)
{
    uint32_t lo = virtio_config_read32(&net.dev, 0), hi = virtio_config_read32(&net.dev, 4);
    for (unsigned i = 0; i < 4; i++)
        net.mac[i] = (uint8_t)(lo >> (8 * i));
    net.mac[4] = (uint8_t)hi;
    net.mac[5] = (uint8_t)(hi >> 8);
}

static uint16_t read_status(void)
{
    return (uint16_t)(virtio_config_read32(&net.dev, 4) >> 16);
}

/* Malformed receive buffers (NETBADPKT): outside RAM, one the device may
 * only read, one shorter than the header, one running off the address space,
 * one of no bytes. */
#define BAD_RX_KINDS 5u
static void post_bad_rx(uint16_t i)
{
    static const struct { uint64_t addr; uint32_t len; uint16_t flags; } kinds[] = {
        { 0x3f00000000ull, RX_BUF, VRING_DESC_F_WRITE },
        { 0, RX_BUF, 0 },
        { 0, 4, VRING_DESC_F_WRITE },
        { 0xfffffffffffff000ull, 0x2000, VRING_DESC_F_WRITE },
        { 0, 0, VRING_DESC_F_WRITE },
    };
    unsigned k = net.bad_rx_left-- % BAD_RX_KINDS;
    rx_desc[i].addr = kinds[k].addr ? kinds[k].addr : (uintptr_t)rx_bufs[i];
    rx_desc[i].len = kinds[k].len;
    rx_desc[i].flags = kinds[k].flags;
    net.bad_rx[i] = true;
    vq_publish(&net.rx, i);
}

static void post_rx(uint16_t i)
{
    if (net.bad_rx[i]) { /* a malformed one came back */
        net.bad_rx[i] = false;
        net.bad_rx_returned++;
    } else if (net.bad_rx_left) {
        post_bad_rx(i);
        return;
    }
    rx_desc[i].addr = (uintptr_t)rx_bufs[i];
    rx_desc[i].len = RX_BUF;
    rx_desc[i].flags = VRING_DESC_F_WRITE;
    vq_publish(&net.rx, i);
}

static bool start_device(void)
{
    if (!virtio_negotiate_features(&net.dev, WANTED, &net.features))
        return false;
    if (!virtio_setup_queue(&net.dev, &net.rx, 0, RX_SIZE, rx_desc, rx_avail, (volatile uint16_t *)rx_used) ||
        !virtio_setup_queue(&net.dev, &net.tx, 1, TX_SIZE, tx_desc, tx_avail, (volatile uint16_t *)tx_used))
        return false;
    if ((net.features & F_CTRL_VQ) &&
        !virtio_setup_queue(&net.dev, &net.ctrl, 2, CTRL_SIZE, ctrl_desc, ctrl_avail, (volatile uint16_t *)ctrl_used))
        return false;
    for (uint16_t i = 0; i < RX_SIZE; i++)
        post_rx(i);
    virtio_driver_ok(&net.dev);
    vq_flush(&net.dev, &net.rx);
    net.tx_free = TX_SLOTS;
    if (net.features & F_MAC)
        read_mac();
    net.mtu = net.features & F_MTU ? (uint16_t)(virtio_config_read32(&net.dev, 8) >> 16) : 1500;
    net.link_up = !(net.features & F_STATUS) || (read_status() & S_LINK_UP);
    return true;
}

/* ---- transmit ---- */

static void reclaim_tx(void)
{
    struct vring_used_elem e;
    while (vq_take_used(&net.tx, &e)) {
        if (e.id < TX_SLOTS && net.tx_busy[e.id]) {
            net.tx_busy[e.id] = false;
            net.tx_free++;
        }
    }
}

/* A free slot's buffer (frame after the header), or 0 when the device holds
 * every slot for longer than a few ms (the frame is dropped). */
static int take_slot(void)
{
    uint64_t deadline = rdtsc() + net.tsc_khz * 5;
    while (net.tx_free == 0) {
        vq_flush(&net.dev, &net.tx);
        reclaim_tx();
        if (net.tx_free == 0 && rdtsc() > deadline)
            return -1;
    }
    for (unsigned i = 0; i < TX_SLOTS; i++)
        if (!net.tx_busy[i])
            return (int)i;
    return -1;
}

/* Queue the frame in slot (its bytes are in tx_bufs[slot] + HDR already;
 * the header is zero unless the caller wrote one). */
static void send_slot(int slot, size_t len)
{
    tx_desc[slot].addr = (uintptr_t)tx_bufs[slot];
    tx_desc[slot].len = (uint32_t)(HDR + len);
    tx_desc[slot].flags = 0;
    net.tx_busy[slot] = true;
    net.tx_free--;
    net.tx_packets++;
    vq_publish(&net.tx, (uint16_t)slot);
}

static void send_frame(const uint8_t *data, size_t len)
{
    int slot = take_slot();
    if (slot < 0 || len > TX_BUF - HDR)
        return;
    memset(tx_bufs[slot], 0, HDR);
    memcpy(tx_bufs[slot] + HDR, data, len);
    send_slot(slot, len);
}

static void gratuitous_arp(void)
{
    uint8_t f[42];
    memset(f, 0xff, 6);
    memcpy(f + 6, net.mac, 6);
    put16(f + 12, ETH_ARP);
    put16(f + 14, 1);
    put16(f + 16, ETH_IPV4);
    f[18] = 6;
    f[19] = 4;
    put16(f + 20, 1); /* a request for our own address: everyone updates its cache */
    memcpy(f + 22, net.mac, 6);
    put32(f + 28, net.ip);
    memset(f + 32, 0, 6);
    put32(f + 38, net.ip);
    send_frame(f, sizeof f);
    vq_flush(&net.dev, &net.tx);
}

/* ---- receive ---- */

/* The reply to frame f in a free slot (*slot): its virtio header zeroed, its
 * Ethernet addresses back to f's sender from us; NULL when the device holds
 * every buffer. */
static uint8_t *start_reply(const uint8_t *f, int *slot)
{
    *slot = take_slot();
    if (*slot < 0)
        return NULL;
    memset(tx_bufs[*slot], 0, HDR);
    uint8_t *r = tx_bufs[*slot] + HDR;
    memcpy(r, f + 6, 6);
    memcpy(r + 6, net.mac, 6);
    return r;
}

static void answer_arp(const uint8_t *f, size_t len)
{
    if (len < 42 || get16(f + 14) != 1 || get16(f + 16) != ETH_IPV4 || get16(f + 20) != 1 || get32(f + 38) != net.ip)
        return;
    int slot;
    uint8_t *r = start_reply(f, &slot);
    if (!r)
        return;
    memcpy(r + 12, f + 12, 8);
    put16(r + 20, 2);
    memcpy(r + 22, net.mac, 6);
    put32(r + 28, net.ip);
    memcpy(r + 32, f + 22, 10); /* the asker's MAC and address */
    send_slot(slot, 42);
}

/* ICMP echo request or UDP to port 7: the same bytes back, addresses and
 * ports swapped (which leaves the UDP checksum as it was). */
static void answer_ipv4(const uint8_t *f, size_t len)
{
    if (len < 34 || (f[14] >> 4) != 4)
        return;
    size_t ihl = (size_t)(f[14] & 15) * 4, total = get16(f + 16);
    if (ihl < 20 || total < ihl || 14 + total > len || get32(f + 30) != net.ip || (get16(f + 20) & 0x3fff))
        return; /* not ours, or a fragment */
    const uint8_t *l4 = f + 14 + ihl;
    size_t l4len = total - ihl;
    bool icmp = f[23] == IP_ICMP && l4len >= 8 && l4[0] == 8;
    bool udp = f[23] == IP_UDP && l4len >= 8 && get16(l4 + 2) == UDP_ECHO_PORT;
    if (!icmp && !udp)
        return;
    int slot;
    uint8_t *r = start_reply(f, &slot);
    if (!r)
        return;
    memcpy(r + 12, f + 12, 2 + total);   /* the type, then the datagram */
    memcpy(r + 26, f + 30, 4);
    memcpy(r + 30, f + 26, 4);
    r[22] = 64;
    put16(r + 24, 0);
    put16(r + 24, inet_checksum(r + 14, ihl));
    uint8_t *rl4 = r + 14 + ihl;
    if (icmp) {
        rl4[0] = 0;
        put16(rl4 + 2, 0);
        put16(rl4 + 2, inet_checksum(rl4, l4len));
    } else {
        memcpy(rl4, l4 + 2, 2);
        memcpy(rl4 + 2, l4, 2);
        /* A datagram whose checksum the sender left to do (checksum offload)
         * goes back the same way: its partial sum (the pseudo-header's) is
         * unchanged by the swap. */
        if ((net.features & F_CSUM) && (frame_hdr[0] & HDR_NEEDS_CSUM)) {
            tx_bufs[slot][0] = HDR_NEEDS_CSUM;
            memcpy(tx_bufs[slot] + 6, frame_hdr + 6, 4); /* csum_start, csum_offset */
        }
    }
    send_slot(slot, 14 + total);
}

static void handle_frame(const uint8_t *f, size_t len)
{
    net.rx_packets++;
    if (len < 14 || !net.link_up)
        return;
    static const uint8_t broadcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
    if (!same_bytes(f, net.mac, 6) && !same_bytes(f, broadcast, 6))
        return;
    uint16_t type = get16(f + 12);
    if (type == ETH_ARP)
        answer_arp(f, len);
    else if (type == ETH_IPV4)
        answer_ipv4(f, len);
}

/* The next used receive entry, waiting a moment for the rest of a merged
 * frame (the device publishes its buffers one by one). */
static bool take_rx(struct vring_used_elem *e, bool wait)
{
    uint64_t deadline = rdtsc() + net.tsc_khz;
    while (!vq_take_used(&net.rx, e))
        if (!wait || rdtsc() > deadline)
            return false;
    return true;
}

static bool receive_one(void)
{
    struct vring_used_elem e;
    if (!take_rx(&e, false))
        return false;
    uint16_t nbuf = 1;
    size_t len = 0;
    bool ok = e.id < RX_SIZE && e.len >= HDR && !net.bad_rx[e.id];
    if (ok) {
        const uint8_t *b = rx_bufs[e.id];
        nbuf = (net.features & F_MRG_RXBUF) ? (uint16_t)(b[10] | b[11] << 8) : 1;
        len = e.len - HDR;
        ok = nbuf >= 1 && len <= FRAME_MAX;
        if (ok) {
            memcpy(frame_hdr, b, HDR);
            memcpy(frame, b + HDR, len);
        }
    }
    if (e.id < RX_SIZE)
        post_rx((uint16_t)e.id);
    for (uint16_t k = 1; k < nbuf; k++) {
        if (!take_rx(&e, true))
            return true;
        if (e.id >= RX_SIZE)
            continue;
        ok = ok && !net.bad_rx[e.id] && e.len > 0;
        if (ok && len + e.len <= FRAME_MAX && e.len <= RX_BUF)
            memcpy(frame + len, rx_bufs[e.id], e.len);
        len += e.len;
        post_rx((uint16_t)e.id);
    }
    if (ok && len <= FRAME_MAX)
        handle_frame(frame, len);
    return true;
}

/* ---- the configuration: link and announce ---- */

static void ack_announce(void)
{
    ctrl_buf[0] = CTRL_ANNOUNCE;
    ctrl_buf[1] = CTRL_ANNOUNCE_ACK;
    ctrl_buf[2] = 0xff;
    ctrl_desc[0] = (struct vring_desc){ .addr = (uintptr_t)ctrl_buf, .len = 2, .flags = VRING_DESC_F_NEXT, .next = 1 };
    ctrl_desc[1] = (struct vring_desc){ .addr = (uintptr_t)(ctrl_buf + 2), .len = 1, .flags = VRING_DESC_F_WRITE };
    vq_publish(&net.ctrl, 0);
    vq_flush(&net.dev, &net.ctrl);
    struct vring_used_elem e;
    uint64_t deadline = rdtsc() + net.tsc_khz * 100;
    while (!vq_take_used(&net.ctrl, &e) && rdtsc() < deadline)
        cpu_relax();
}

static void announce(void)
{
    net.announcements_left = ANNOUNCEMENTS;
    net.next_announce_tsc = rdtsc();
}

static void send_announcements(void)
{
    uint64_t now = rdtsc();
    if (!net.announcements_left || now < net.next_announce_tsc)
        return;
    net.announcements_left--;
    net.next_announce_tsc = now + net.tsc_khz * ANNOUNCE_GAP_MS;
    if (net.link_up)
        gratuitous_arp();
}

static void check_config(void)
{
    uint64_t now = rdtsc();
    if (now < net.next_config_tsc || !(net.features & F_STATUS))
        return;
    net.next_config_tsc = now + net.tsc_khz * CONFIG_POLL_MS;
    uint16_t status = read_status();
    net.link_up = status & S_LINK_UP;
    if (!(status & S_ANNOUNCE) || !(net.features & F_GUEST_ANNOUNCE))
        return;
    read_mac(); /* a clone may have been given another */
    announce();
    serial_puts("vsnap-testguest: net announce ");
    put_mac(net.mac);
    serial_puts("\n");
    ack_announce();
}

/* ---- the interface ---- */

bool net_init(const char *cmdline, uint64_t tsc_khz)
{
    net.tsc_khz = tsc_khz ? tsc_khz : 1000000;
    if (!virtio_find(cmdline, VIRTIO_ID_NET, &net.dev))
        return false;
    size_t len;
    const char *ip = option(cmdline, "vsnap.ip", &len);
    if (!ip || !parse_ip(ip, len, &net.ip, &net.netmask)) {
        serial_log(ip ? "error: vsnap.ip: expected A.B.C.D/N" : "warning: a virtio-net device but no vsnap.ip; it stays down");
        return false;
    }
    if (!start_device()) {
        serial_log("error: the virtio-net device refused the driver");
        return false;
    }
    const char *want = option(cmdline, "vsnap.mac", &len);
    uint8_t mac[6];
    if (want && (!parse_mac(want, len, mac) || !same_bytes(mac, net.mac, 6))) {
        serial_puts("vsnap-testguest: error: vsnap.mac does not match the device's ");
        put_mac(net.mac);
        serial_puts("\n");
    }
    net.active = true;
    serial_puts("vsnap-testguest: net ");
    put_mac(net.mac);
    serial_puts(" mtu ");
    serial_put_dec(net.mtu);
    serial_puts(net.link_up ? " link up\n" : " link down\n");
    announce();
    return true;
}

bool net_active(void)
{
    return net.active;
}

bool net_poll(void)
{
    if (!net.active)
        return false;
    bool any = false;
    for (unsigned n = 0; n < 64 && receive_one(); n++)
        any = true;
    vq_flush(&net.dev, &net.rx);
    vq_flush(&net.dev, &net.tx);
    reclaim_tx();
    check_config();
    send_announcements();
    return any;
}

void net_get_info(struct net_info *info)
{
    memcpy(info->mac, net.mac, 6);
    if (net.active && (net.features & F_STATUS))
        net.link_up = read_status() & S_LINK_UP;
    info->link_up = net.active && net.link_up;
    info->rx_packets = net.rx_packets;
    info->tx_packets = net.tx_packets;
}

/* ---- NETBADPKT ---- */

/* Descriptors TX_SLOTS.. are free for this; each chain is published alone. */
static unsigned bad_chain(unsigned kind, uint16_t first)
{
    struct vring_desc *d = tx_desc + first;
    uint64_t buf = (uintptr_t)tx_bufs[0]; /* read only, never sent */
    switch (kind) {
    case 0: /* a buffer outside guest RAM */
        d[0] = (struct vring_desc){ .addr = 0x3f00000000ull, .len = 64 };
        return 1;
    case 1: /* longer than the device takes: 70 descriptors */
        for (unsigned i = 0; i < 70; i++)
            d[i] = (struct vring_desc){ .addr = buf, .len = 16, .flags = i < 69 ? VRING_DESC_F_NEXT : 0,
                                        .next = (uint16_t)(first + i + 1) };
        return 70;
    case 2: /* a writable descriptor in a transmit chain */
        d[0] = (struct vring_desc){ .addr = buf, .len = 64, .flags = VRING_DESC_F_NEXT, .next = (uint16_t)(first + 1) };
        d[1] = (struct vring_desc){ .addr = buf, .len = 64, .flags = VRING_DESC_F_WRITE };
        return 2;
    case 3: /* shorter than the header */
        d[0] = (struct vring_desc){ .addr = buf, .len = 6 };
        return 1;
    case 4: /* a loop */
        d[0] = (struct vring_desc){ .addr = buf, .len = 64, .flags = VRING_DESC_F_NEXT, .next = (uint16_t)(first + 1) };
        d[1] = (struct vring_desc){ .addr = buf, .len = 64, .flags = VRING_DESC_F_NEXT, .next = first };
        return 2;
    case 5: /* an indirect descriptor (not negotiated) */
        d[0] = (struct vring_desc){ .addr = buf, .len = 64, .flags = 4 };
        return 1;
    case 6: /* next names no descriptor */
        d[0] = (struct vring_desc){ .addr = buf, .len = 64, .flags = VRING_DESC_F_NEXT, .next = 0xfff0 };
        return 1;
    case 7: /* a buffer that runs off the end of RAM */
        d[0] = (struct vring_desc){ .addr = 0xfffffffffffff000ull, .len = 0x2000 };
        return 1;
    }
    return 0;
}

unsigned net_send_malformed(void)
{
    static uint16_t never_returned; /* avail entries naming no descriptor, so far */
    if (!net.active)
        return 0;
    unsigned count = 0;
    uint16_t first = TX_SLOTS;
    for (unsigned kind = 0; kind < 8; kind++) {
        if ((unsigned)first + 70 > TX_SIZE)
            first = TX_SLOTS;
        bad_chain(kind, first);
        vq_publish(&net.tx, first);
        vq_flush(&net.dev, &net.tx);
        count++;
        /* The device hands each back (nothing sent): wait for it before the
         * descriptors are reused. */
        uint64_t deadline = rdtsc() + net.tsc_khz * 100;
        uint16_t want = (uint16_t)(net.tx.avail_idx - never_returned);
        while (__atomic_load_n(&net.tx.used[1], __ATOMIC_ACQUIRE) != want && rdtsc() < deadline)
            cpu_relax();
        reclaim_tx();
    }
    /* An available entry that names no descriptor: never handed back. */
    vq_publish(&net.tx, 0xffff);
    vq_flush(&net.dev, &net.tx);
    never_returned++;
    /* The next five receive buffers recycled go back malformed; frames from
     * the peer bring them back (empty) and the good ones are posted again. */
    net.bad_rx_left += BAD_RX_KINDS;
    return count + 1 + BAD_RX_KINDS;
}
