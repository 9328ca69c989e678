/* virtio-net device model (see virtio-net.h): config space, the I/O thread,
 * receive, transmit and control queues, counters and snapshot state. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "devices/device-log.h"
#include "devices/virtio-net.h"

#include <errno.h>
#include <gio/gio.h>
#include <linux/if_tun.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_net.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sandbox/syscall-filter.h"
#include "state/state-json.h"
#include "devices/tap.h"
#include "devices/virtio-mmio.h"
#include "json/vjson.h"

#define QUEUE_RX 0
#define QUEUE_TX 1
#define QUEUE_CTRL 2
#define NQUEUES 3
#define CTRL_QUEUE_SIZE 64
/* The largest frame either way: a 64 KiB frame and its header (what a tap
 * delivers with offloads; without, at most the MTU plus the Ethernet header). */
#define MAX_FRAME 65550u
#define RX_BUF_BYTES (TAP_VNET_HDR_LEN + MAX_FRAME)
/* Frames moved per queue before looking at the others: the control queue
 * and the other direction are not starved by a flood. */
#define BATCH 64u
#define EVENT_TAP 100u
#define EVENT_WAKE 101u

struct net_counters {
    atomic_uint_fast64_t rx_bytes, rx_frames, tx_bytes, tx_frames;
    atomic_uint_fast64_t rx_dropped, tx_dropped, guest_errors, tap_errors;
};

struct virtio_net {
    struct virtio_mmio transport; /* its lock guards the queues and everything the thread does */
    struct virtio_device_ops ops;
    char *id;
    struct tap tap;
    uint8_t mac[6];
    uint16_t mtu; /* 0: not offered */
    bool offload_csum; /* the config allows checksum offload (offered both ways) */

    /* Guarded by the transport lock. */
    bool link_up;  /* vm.set-link's word */
    bool tap_gone; /* the interface vanished: link down for good */
    bool announce; /* VIRTIO_NET_S_ANNOUNCE until the guest acks */

    GThread *thread;
    int epoll_fd, wake_fd;
    atomic_bool stop;
    bool tap_watched;      /* I/O thread: the tap is in the epoll set for reading */
    uint8_t *rx_frame;     /* I/O thread: a frame read from the tap ... */
    size_t rx_len;         /* ... and its length with the header, 0: none waiting */
    struct virtq_chain chain; /* I/O thread: scratch */
    struct net_counters counters;
};

static bool negotiated(const struct virtio_net *dev, unsigned feature)
{
    return dev->transport.driver_features & (1ull << feature);
}

/* Count one guest error and log it only at first (device-log.h): a guest can
 * repeat it at will. */
#define net_guest_error(dev, fmt, ...)                                                                 \
    device_log_limited(G_LOG_LEVEL_MESSAGE, atomic_fetch_add(&(dev)->counters.guest_errors, 1) + 1,   \
                       "guest errors", "net %s: " fmt, (dev)->id, ##__VA_ARGS__)

static bool link_is_up(const struct virtio_net *dev)
{
    return dev->link_up && !dev->tap_gone;
}

/* ---- config space (vCPU threads, transport lock held) ---- */

static void read_config(void *opaque, uint64_t offset, uint8_t *data, unsigned len)
{
    struct virtio_net *dev = opaque;
    struct virtio_net_config c;
    memset(&c, 0, sizeof c);
    memcpy(c.mac, dev->mac, 6);
    c.status = (uint16_t)((link_is_up(dev) ? VIRTIO_NET_S_LINK_UP : 0) | (dev->announce ? VIRTIO_NET_S_ANNOUNCE : 0));
    c.max_virtqueue_pairs = 1;
    c.mtu = dev->mtu;
    const uint8_t *bytes = (const uint8_t *)&c;
    for (unsigned i = 0; i < len; i++)
        data[i] = offset + i < sizeof c ? bytes[offset + i] : 0;
}

/* The status changed: a configuration change interrupt. Lock held. */
static void config_changed(struct virtio_net *dev)
{
    dev->transport.config_generation++;
    if (virtio_mmio_is_active(&dev->transport))
        virtio_mmio_signal_config(&dev->transport);
}

static void wake_thread(struct virtio_net *dev)
{
    uint64_t one = 1;
    if (write(dev->wake_fd, &one, sizeof one) < 0)
        g_warning("net %s: cannot wake its I/O thread: %s", dev->id, g_strerror(errno));
}

/* What the tap may hand the guest: frames whose checksum is left to do
 * (TUN_F_CSUM) only when the driver took VIRTIO_NET_F_GUEST_CSUM. */
static void set_tap_offload(struct virtio_net *dev, bool csum)
{
    g_autoptr(GError) error = NULL;
    if (!dev->tap_gone && !tap_set_offload(&dev->tap, csum ? TUN_F_CSUM : 0, &error))
        g_warning("net %s: %s", dev->id, error->message);
}

static void device_activate(void *opaque)
{
    struct virtio_net *dev = opaque;
    set_tap_offload(dev, negotiated(dev, VIRTIO_NET_F_GUEST_CSUM));
    wake_thread(dev); /* buffers may be posted already (a restore) */
}

static void device_reset(void *opaque)
{
    struct virtio_net *dev = opaque;
    dev->announce = false;
    set_tap_offload(dev, false);
}

/* ---- the tap ---- */

static void watch_tap(struct virtio_net *dev, bool watch)
{
    if (dev->tap_watched == watch || dev->tap_gone)
        return;
    struct epoll_event ev = { .events = watch ? EPOLLIN : 0, .data.u32 = EVENT_TAP };
    if (epoll_ctl(dev->epoll_fd, EPOLL_CTL_MOD, dev->tap.fd, &ev) < 0)
        g_warning("net %s: epoll_ctl on tap %s: %s", dev->id, dev->tap.name, g_strerror(errno));
    dev->tap_watched = watch;
}

/* The interface was deleted (or the tap broke): say so once, link down, stop
 * reading it. Lock held. */
static void tap_lost(struct virtio_net *dev, const char *what, int err)
{
    if (dev->tap_gone)
        return;
    g_warning("net %s: tap %s is gone (%s: %s): the link is down", dev->id, dev->tap.name, what, g_strerror(err));
    atomic_fetch_add(&dev->counters.tap_errors, 1);
    epoll_ctl(dev->epoll_fd, EPOLL_CTL_DEL, dev->tap.fd, NULL);
    dev->tap_watched = false;
    dev->tap_gone = true;
    dev->rx_len = 0;
    config_changed(dev);
}

/* A read or write error: a vanished interface, or a passing one (counted). */
static void tap_error(struct virtio_net *dev, const char *what, int err)
{
    if (err == EBADFD || err == ENXIO || err == ENODEV || err == EIO || err == EPIPE || !tap_attached(&dev->tap)) {
        tap_lost(dev, what, err);
        return;
    }
    device_log_limited(G_LOG_LEVEL_MESSAGE, atomic_fetch_add(&dev->counters.tap_errors, 1) + 1, "tap errors",
                       "net %s: tap %s: %s: %s", dev->id, dev->tap.name, what, g_strerror(err));
}

/* ---- receive: tap -> guest ---- */

/* Put the waiting frame into as many receive buffers as it needs (one unless
 * MRG_RXBUF). false when the guest has not posted enough: everything taken is
 * put back and the frame waits. Lock held. */
static bool deliver_frame(struct virtio_net *dev, struct virtq *q)
{
    bool merge = negotiated(dev, VIRTIO_NET_F_MRG_RXBUF);
    uint16_t heads[VIRTQ_MAX_SIZE];
    uint32_t lens[VIRTQ_MAX_SIZE];
    unsigned used = 0, taken = 0;
    size_t off = 0;
    uint64_t first_hdr_gpa = 0;
    uint8_t *first_hdr = NULL;
    while (off < dev->rx_len) {
        g_autoptr(GError) error = NULL;
        if (taken == q->size) { /* more than the whole ring holds: it can never fit */
            net_guest_error(dev, "receive buffers too small for a %zu-byte frame",
                            dev->rx_len);
            atomic_fetch_add(&dev->counters.rx_dropped, 1);
            break;
        }
        int r = virtq_pop(q, &dev->chain, &error);
        if (r == 0) { /* not enough posted yet: put back what was taken */
            for (; taken > 0; taken--)
                virtq_unpop(q);
            return false;
        }
        taken++;
        const char *why = r < 0 ? error->message
                          : dev->chain.nread ? "a receive buffer the device may only read"
                          : !dev->chain.nwrite ? "a receive buffer of no bytes"
                          : !first_hdr && dev->chain.write[0].iov_len < TAP_VNET_HDR_LEN ? "a receive buffer shorter than the header"
                          : NULL;
        if (why) { /* handed back empty; before the frame's first buffer it goes to the next ones */
            net_guest_error(dev, "receive queue: %s", why);
            heads[used] = dev->chain.head, lens[used++] = 0;
            if (!first_hdr)
                continue;
            atomic_fetch_add(&dev->counters.rx_dropped, 1); /* in the middle of a frame: it is lost */
            break;
        }
        size_t n = MIN(dev->chain.write_len, dev->rx_len - off);
        if (!merge && n < dev->rx_len) { /* too small and no merging: drop the frame */
            net_guest_error(dev, "receive buffer of %zu bytes for a %zu-byte frame",
                            dev->chain.write_len, dev->rx_len);
            heads[used] = dev->chain.head, lens[used++] = 0;
            atomic_fetch_add(&dev->counters.rx_dropped, 1);
            off = dev->rx_len;
            break;
        }
        if (!first_hdr) { /* its first descriptor holds the whole header (checked above) */
            first_hdr = dev->chain.write[0].iov_base;
            first_hdr_gpa = dev->chain.write_gpa[0];
        }
        virtq_chain_write(q, &dev->chain, 0, dev->rx_frame + off, n);
        heads[used] = dev->chain.head, lens[used++] = (uint32_t)n;
        off += n;
    }
    if (first_hdr && off == dev->rx_len && lens[used - 1] > 0) { /* num_buffers: the chains that carry it */
        unsigned carriers = 0;
        for (unsigned i = 0; i < used; i++)
            carriers += lens[i] > 0;
        uint16_t nbuf = (uint16_t)carriers;
        memcpy(first_hdr + 10, &nbuf, 2);
        dev->transport.host.mark_dirty(dev->transport.host.opaque, first_hdr_gpa + 10, 2);
        atomic_fetch_add(&dev->counters.rx_frames, 1);
        atomic_fetch_add(&dev->counters.rx_bytes, dev->rx_len - TAP_VNET_HDR_LEN);
    }
    bool whole = first_hdr && off == dev->rx_len && lens[used - 1] > 0;
    for (unsigned i = 0; i < used; i++)
        virtq_push(q, heads[i], whole ? lens[i] : 0); /* a dropped frame's buffers come back empty */
    return true;
}

/* Read the next frame from the tap into rx_frame; false when there is none. */
static bool read_frame(struct virtio_net *dev)
{
    for (;;) {
        ssize_t n = read(dev->tap.fd, dev->rx_frame, RX_BUF_BYTES);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            if (errno != EAGAIN)
                tap_error(dev, "read", errno);
            return false;
        }
        if ((size_t)n <= TAP_VNET_HDR_LEN) {
            atomic_fetch_add(&dev->counters.rx_dropped, 1);
            continue;
        }
        dev->rx_len = (size_t)n;
        return true;
    }
}

/* Move frames from the tap to the guest until the tap is empty, the guest has
 * no buffers (then wait for it, not for the tap) or a batch is done. */
static bool service_rx(struct virtio_net *dev)
{
    struct virtq *q = &dev->transport.queues[QUEUE_RX];
    bool delivered = false;
    for (unsigned n = 0; n < BATCH && !dev->tap_gone; n++) {
        if (!dev->rx_len && !read_frame(dev))
            break;
        if (!link_is_up(dev) || !q->ready) { /* a cable pulled: frames go nowhere */
            atomic_fetch_add(&dev->counters.rx_dropped, 1);
            dev->rx_len = 0;
            continue;
        }
        if (!deliver_frame(dev, q)) {
            virtq_set_notify_wanted(q, true);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            if (virtq_has_available(q))
                continue; /* posted meanwhile */
            watch_tap(dev, false);
            break;
        }
        delivered = true;
        dev->rx_len = 0;
    }
    if (!dev->rx_len) {
        virtq_set_notify_wanted(q, false); /* a polled guest posts buffers without an exit */
        watch_tap(dev, true);
    }
    if (delivered)
        virtio_mmio_signal_used(&dev->transport, q);
    return delivered;
}

/* ---- transmit: guest -> tap ---- */

static void transmit_chain(struct virtio_net *dev, struct virtq *q)
{
    const struct virtq_chain *c = &dev->chain;
    if (c->nwrite > 0 || c->read_len <= TAP_VNET_HDR_LEN || c->read_len > TAP_VNET_HDR_LEN + MAX_FRAME) {
        net_guest_error(dev, "transmit chain of %zu readable and %zu writable bytes dropped",
                        c->read_len, c->write_len);
        return;
    }
    if (!link_is_up(dev)) {
        atomic_fetch_add(&dev->counters.tx_dropped, 1);
        return;
    }
    /* The tap gets the guest's checksum request when VIRTIO_NET_F_CSUM was
     * negotiated (the kernel checks csum_start and csum_offset against the
     * frame), never segmentation (not offered), and nothing else. */
    struct virtio_net_hdr_v1 hdr;
    memset(&hdr, 0, sizeof hdr);
    if (negotiated(dev, VIRTIO_NET_F_CSUM)) {
        struct virtio_net_hdr_v1 guest;
        virtq_chain_read(c, 0, &guest, sizeof guest);
        if (guest.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
            hdr.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
            hdr.csum_start = guest.csum_start;
            hdr.csum_offset = guest.csum_offset;
        }
    }
    struct iovec iov[VIRTQ_MAX_CHAIN + 1] = { { .iov_base = &hdr, .iov_len = TAP_VNET_HDR_LEN } };
    unsigned n = 1 + virtq_chain_read_iov(c, TAP_VNET_HDR_LEN, MAX_FRAME, iov + 1);
    ssize_t done;
    do {
        done = writev(dev->tap.fd, iov, (int)n);
    } while (done < 0 && errno == EINTR);
    if (done < 0) {
        atomic_fetch_add(&dev->counters.tx_dropped, 1);
        if (errno == EINVAL) /* the kernel refused the header: csum_start or csum_offset past the frame */
            net_guest_error(dev, "the tap refused a frame's checksum request");
        else if (errno != EAGAIN && errno != ENOBUFS)
            tap_error(dev, "write", errno);
        return;
    }
    atomic_fetch_add(&dev->counters.tx_frames, 1);
    atomic_fetch_add(&dev->counters.tx_bytes, c->read_len - TAP_VNET_HDR_LEN);
}

static bool service_tx(struct virtio_net *dev)
{
    struct virtq *q = &dev->transport.queues[QUEUE_TX];
    unsigned n = 0;
    for (; n < BATCH; n++) {
        g_autoptr(GError) error = NULL;
        int r = virtq_pop(q, &dev->chain, &error);
        if (r == 0)
            break;
        if (r < 0)
            net_guest_error(dev, "transmit queue: %s", error->message);
        else
            transmit_chain(dev, q);
        virtq_push(q, dev->chain.head, 0);
    }
    if (n)
        virtio_mmio_signal_used(&dev->transport, q);
    return n == BATCH; /* more may be waiting */
}

/* ---- control queue: class, command, data; the device writes one ack byte ---- */

static void service_ctrl(struct virtio_net *dev)
{
    struct virtq *q = &dev->transport.queues[QUEUE_CTRL];
    bool any = false;
    for (;;) {
        g_autoptr(GError) error = NULL;
        int r = virtq_pop(q, &dev->chain, &error);
        if (r == 0)
            break;
        any = true;
        uint8_t cmd[2] = { 0xff, 0xff };
        uint8_t ack = VIRTIO_NET_ERR;
        if (r < 0)
            net_guest_error(dev, "control queue: %s", error->message);
        else if (virtq_chain_read(&dev->chain, 0, cmd, 2) == 2 && cmd[0] == VIRTIO_NET_CTRL_ANNOUNCE &&
                 cmd[1] == VIRTIO_NET_CTRL_ANNOUNCE_ACK) {
            dev->announce = false;
            dev->transport.config_generation++;
            ack = VIRTIO_NET_OK;
        }
        bool wrote = r > 0 && virtq_chain_write_tail_byte(q, &dev->chain, ack);
        virtq_push(q, dev->chain.head, wrote ? 1 : 0);
    }
    if (any)
        virtio_mmio_signal_used(&dev->transport, q);
}

/* ---- the I/O thread ---- */

static bool queue_live(struct virtio_net *dev, unsigned i)
{
    return virtio_mmio_is_active(&dev->transport) && dev->transport.queues[i].ready;
}

/* One pass over everything; true if work may be left. */
static bool service(struct virtio_net *dev)
{
    bool more = false;
    g_mutex_lock(&dev->transport.lock);
    if (queue_live(dev, QUEUE_CTRL))
        service_ctrl(dev);
    if (queue_live(dev, QUEUE_TX))
        more |= service_tx(dev);
    if (virtio_mmio_is_active(&dev->transport))
        more |= service_rx(dev) && dev->tap_watched;
    else if (!dev->tap_gone) { /* no driver: frames go nowhere, do not let them pile up */
        while (read_frame(dev))
            atomic_fetch_add(&dev->counters.rx_dropped, 1);
        dev->rx_len = 0;
    }
    g_mutex_unlock(&dev->transport.lock);
    return more;
}

static gpointer io_thread(gpointer data)
{
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_DEVICE);
    struct virtio_net *dev = data;
    bool more = true;
    while (!atomic_load(&dev->stop)) {
        struct epoll_event events[NQUEUES + 2];
        int n = epoll_wait(dev->epoll_fd, events, G_N_ELEMENTS(events), more ? 0 : -1);
        if (n < 0 && errno != EINTR) {
            g_warning("net %s: epoll_wait: %s; its I/O thread stops", dev->id, g_strerror(errno));
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            uint32_t what = events[i].data.u32;
            uint64_t count;
            if (what < NQUEUES)
                virtio_mmio_take_notify(&dev->transport, what);
            else if (what == EVENT_WAKE && read(dev->wake_fd, &count, sizeof count) < 0 && errno != EAGAIN)
                g_warning("net %s: wake eventfd: %s", dev->id, g_strerror(errno));
            else if (what == EVENT_TAP && (events[i].events & (EPOLLERR | EPOLLHUP))) {
                g_mutex_lock(&dev->transport.lock);
                tap_lost(dev, "poll", EPOLLERR & events[i].events ? EIO : EPIPE);
                g_mutex_unlock(&dev->transport.lock);
            }
        }
        more = service(dev);
    }
    return NULL;
}

/* ---- construction ---- */

static void pick_mac(struct virtio_net *dev, const struct net_config *cfg)
{
    if (cfg->mac && net_mac_parse(cfg->mac, dev->mac))
        return;
    /* Random, locally administered, unicast (as Cloud Hypervisor does). */
    for (unsigned i = 0; i < 6; i++)
        dev->mac[i] = (uint8_t)g_random_int_range(0, 256);
    dev->mac[0] = (uint8_t)((dev->mac[0] & 0xfe) | 0x02);
}

static uint64_t features_for(const struct virtio_net *dev)
{
    uint64_t f = 1ull << VIRTIO_NET_F_MAC | 1ull << VIRTIO_NET_F_STATUS | 1ull << VIRTIO_NET_F_MRG_RXBUF |
                 1ull << VIRTIO_NET_F_CTRL_VQ | 1ull << VIRTIO_NET_F_GUEST_ANNOUNCE;
    if (dev->mtu)
        f |= 1ull << VIRTIO_NET_F_MTU;
    if (dev->offload_csum) /* both ways: frames with the checksum left to the other side */
        f |= 1ull << VIRTIO_NET_F_CSUM | 1ull << VIRTIO_NET_F_GUEST_CSUM;
    return f;
}

static bool open_thread_fds(struct virtio_net *dev, GError **error)
{
    dev->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    dev->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    bool ok = dev->epoll_fd >= 0 && dev->wake_fd >= 0;
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = EVENT_WAKE };
    ok = ok && epoll_ctl(dev->epoll_fd, EPOLL_CTL_ADD, dev->wake_fd, &ev) == 0;
    for (unsigned i = 0; ok && i < NQUEUES; i++) {
        ev.data.u32 = i;
        ok = epoll_ctl(dev->epoll_fd, EPOLL_CTL_ADD, dev->transport.notify_fd[i], &ev) == 0;
    }
    ev.data.u32 = EVENT_TAP;
    ok = ok && epoll_ctl(dev->epoll_fd, EPOLL_CTL_ADD, dev->tap.fd, &ev) == 0;
    dev->tap_watched = ok;
    if (!ok)
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "net %s: cannot set up its I/O thread: %s",
                    dev->id, g_strerror(errno));
    return ok;
}

struct virtio_net *virtio_net_new(const struct virtio_host *host, unsigned mmio_index, const struct net_config *cfg,
                                  GError **error)
{
    struct virtio_net *dev = g_new0(struct virtio_net, 1);
    dev->id = g_strdup(cfg->id);
    dev->epoll_fd = dev->wake_fd = -1;
    dev->tap.fd = -1;
    dev->link_up = true;
    dev->mtu = (uint16_t)cfg->mtu;
    dev->offload_csum = cfg->offload_csum;
    dev->rx_frame = g_malloc(RX_BUF_BYTES);
    pick_mac(dev, cfg);
    dev->ops = (struct virtio_device_ops){
        .name = "virtio-net",
        .device_id = VIRTIO_ID_NET,
        .features = features_for(dev),
        .nqueues = NQUEUES,
        .queue_size_max = (uint16_t)cfg->queue_size,
        .read_config = read_config,
        .activate = device_activate,
        .reset = device_reset,
    };
    if (!tap_open(&dev->tap, cfg, error)) {
        virtio_net_free(dev);
        return NULL;
    }
    bool transport = virtio_mmio_init(&dev->transport, host, mmio_index, &dev->ops, dev, error);
    if (!transport || !open_thread_fds(dev, error)) {
        if (!transport) {
            virtio_mmio_release(&dev->transport);
            dev->transport.ops = NULL;
        }
        virtio_net_free(dev);
        return NULL;
    }
    dev->thread = g_thread_new("virtio-net", io_thread, dev);
    return dev;
}

void virtio_net_free(struct virtio_net *dev)
{
    if (!dev)
        return;
    if (dev->thread) {
        atomic_store(&dev->stop, true);
        wake_thread(dev);
        g_thread_join(dev->thread);
    }
    if (dev->epoll_fd >= 0)
        close(dev->epoll_fd);
    if (dev->wake_fd >= 0)
        close(dev->wake_fd);
    if (dev->transport.ops)
        virtio_mmio_release(&dev->transport);
    tap_close(&dev->tap);
    g_free(dev->rx_frame);
    g_free(dev->id);
    g_free(dev);
}

char *virtio_net_cmdline_entry(const struct virtio_net *dev)
{
    return virtio_mmio_cmdline_entry(&dev->transport);
}

const char *virtio_net_id(const struct virtio_net *dev)
{
    return dev->id;
}

const char *virtio_net_tap_name(const struct virtio_net *dev)
{
    return dev->tap.name;
}

void virtio_net_set_link(struct virtio_net *dev, bool up)
{
    g_mutex_lock(&dev->transport.lock);
    if (dev->link_up != up) {
        dev->link_up = up;
        config_changed(dev);
    }
    g_mutex_unlock(&dev->transport.lock);
    wake_thread(dev);
}

void virtio_net_request_announce(struct virtio_net *dev)
{
    g_mutex_lock(&dev->transport.lock);
    if (virtio_mmio_is_active(&dev->transport) && negotiated(dev, VIRTIO_NET_F_GUEST_ANNOUNCE)) {
        dev->announce = true;
        config_changed(dev);
    }
    g_mutex_unlock(&dev->transport.lock);
}

void virtio_net_add_counters(struct virtio_net *dev, JsonBuilder *b)
{
    const struct net_counters *c = &dev->counters;
    struct {
        const char *name;
        uint64_t value;
    } items[] = {
        {"rx_bytes", atomic_load(&c->rx_bytes)},     {"rx_frames", atomic_load(&c->rx_frames)},
        {"tx_bytes", atomic_load(&c->tx_bytes)},     {"tx_frames", atomic_load(&c->tx_frames)},
        {"rx_dropped", atomic_load(&c->rx_dropped)}, {"tx_dropped", atomic_load(&c->tx_dropped)},
        {"guest_errors", atomic_load(&c->guest_errors)}, {"tap_errors", atomic_load(&c->tap_errors)},
    };
    g_mutex_lock(&dev->transport.lock);
    bool up = link_is_up(dev);
    g_mutex_unlock(&dev->transport.lock);
    vjson_object_begin(b, dev->id);
    for (unsigned i = 0; i < G_N_ELEMENTS(items); i++) {
        vjson_int(b, items[i].name, (gint64)items[i].value);
    }
    vjson_int(b, "link", up);
    vjson_object_end(b);
}

/* ---- snapshot state ---- */

void virtio_net_quiesce(struct virtio_net *dev)
{
    g_mutex_lock(&dev->transport.lock);
}

void virtio_net_unquiesce(struct virtio_net *dev)
{
    g_mutex_unlock(&dev->transport.lock);
}

/* Called quiesced (the lock is the caller's). */
void virtio_net_save_state(struct virtio_net *dev, JsonBuilder *b)
{
    g_autofree char *mac = g_strdup_printf("%02x:%02x:%02x:%02x:%02x:%02x", dev->mac[0], dev->mac[1], dev->mac[2],
                                           dev->mac[3], dev->mac[4], dev->mac[5]);
    vjson_object_begin(b, NULL);
    vjson_str(b, "id", dev->id);
    vjson_str(b, "mac", mac);
    vjson_uint(b, "link_up", dev->link_up);
    vjson_uint(b, "announce", dev->announce);
    vjson_member(b, "transport");
    virtio_mmio_save_state(&dev->transport, b);
    vjson_object_end(b);
}

bool virtio_net_restore_state(struct virtio_net *dev, JsonObject *obj, GError **error)
{
    g_autofree char *what = g_strdup_printf("net %s", dev->id);
    uint64_t link_up, announce;
    const char *id = state_get_string(obj, "id", what, error);
    if (!id || !state_get_uint(obj, "link_up", 1, &link_up, what, error) ||
        !state_get_uint(obj, "announce", 1, &announce, what, error))
        return false;
    JsonObject *transport = state_get_object(obj, "transport", what, error);
    if (!transport)
        return false;
    if (strcmp(id, dev->id) != 0) {
        g_set_error(error, STATE_ERROR, STATE_ERROR_INVALID, "the snapshot's net %s is net %s in the config", id,
                    dev->id);
        return false;
    }
    g_mutex_lock(&dev->transport.lock);
    dev->link_up = link_up;
    dev->announce = announce;
    bool ok = virtio_mmio_restore_state(&dev->transport, transport, error);
    g_mutex_unlock(&dev->transport.lock);
    return ok;
}
