/* virtio-vsock device model: configuration, lifecycle, and the device thread's
 * event loop. Packet handling is in virtio-vsock-rxtx.c, connections in
 * virtio-vsock-conn.c, the UNIX side in virtio-vsock-unix.c. */
#include "devices/virtio-vsock.h"

#include <errno.h>
#include <linux/virtio_ids.h>
#include <gio/gio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "devices/virtio-vsock-priv.h"
#include "sandbox/syscall-filter.h"
#include "json/vjson.h"

#define TIMER_PERIOD_NS (100 * 1000 * 1000) /* deadline checks: 100 ms granularity */
#define EPOLL_BATCH 64

void vsock_epoll_set(struct virtio_vsock *dev, int fd, struct vsock_watch *watch,
                     uint32_t *current, uint32_t wanted)
{
    if (*current == wanted && wanted != 0)
        return;
    struct epoll_event ev = {.events = wanted, .data.ptr = watch};
    int op = *current ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    /* A registration with no events still reports EPOLLHUP/EPOLLERR, which is
     * what a connection waiting for its peer wants. */
    if (epoll_ctl(dev->epoll_fd, op, fd, &ev) < 0)
        g_warning("virtio-vsock: epoll_ctl(fd %d): %s", fd, g_strerror(errno));
    /* Mark "registered" even with wanted == 0 so the next call uses MOD. */
    *current = wanted ? wanted : EPOLLHUP;
}

void vsock_epoll_remove(struct virtio_vsock *dev, int fd, uint32_t *current)
{
    if (*current && epoll_ctl(dev->epoll_fd, EPOLL_CTL_DEL, fd, NULL) < 0)
        g_warning("virtio-vsock: epoll_ctl(DEL fd %d): %s", fd, g_strerror(errno));
    *current = 0;
}

static void add_watch(struct virtio_vsock *dev, int fd, struct vsock_watch *watch,
                      enum vsock_watch_kind kind, unsigned index)
{
    uint32_t current = 0;
    watch->kind = kind;
    watch->index = index;
    watch->owner = dev;
    vsock_epoll_set(dev, fd, watch, &current, EPOLLIN);
}

static void read_config(void *opaque, uint64_t offset, uint8_t *data, unsigned len)
{
    struct virtio_vsock *dev = opaque;
    uint8_t config[8];
    memcpy(config, &dev->guest_cid, sizeof config); /* le64 guest_cid */
    for (unsigned i = 0; i < len; i++)
        data[i] = offset + i < sizeof config ? config[offset + i] : 0;
}

static void drop_all_connections(struct virtio_vsock *dev)
{
    GList *conns = g_hash_table_get_values(dev->conns);
    for (GList *l = conns; l; l = l->next)
        vsock_conn_destroy(dev, l->data);
    g_list_free(conns);
    struct virtio_vsock_hdr *hdr;
    while ((hdr = g_queue_pop_head(&dev->ctrl_queue)))
        g_free(hdr);
}

static void device_activate(void *opaque)
{
    struct virtio_vsock *dev = opaque;
    /* Buffers may already be posted: look at the queues at once instead of
     * waiting for the first notification. */
    uint64_t one = 1;
    for (unsigned i = 0; i < VSOCK_NQUEUES; i++)
        if (write(dev->transport.notify_fd[i], &one, sizeof one) < 0)
            g_warning("virtio-vsock: notify eventfd: %s", g_strerror(errno));
}

static void device_reset(void *opaque)
{
    struct virtio_vsock *dev = opaque;
    drop_all_connections(dev);
    dev->event_pending = false;
}

static const struct virtio_device_ops vsock_ops = {
    .name = "virtio-vsock",
    .device_id = VIRTIO_ID_VSOCK,
    .features = 0, /* stream sockets only: no SEQPACKET, no EVENT_IDX */
    .nqueues = VSOCK_NQUEUES,
    .queue_size_max = VSOCK_QUEUE_SIZE,
    .read_config = read_config,
    .activate = device_activate,
    .reset = device_reset,
};

static void handle_notify(struct virtio_vsock *dev, unsigned queue)
{
    virtio_mmio_take_notify(&dev->transport, queue);
    if (!virtio_mmio_is_active(&dev->transport))
        return;
    if (queue == VSOCK_QUEUE_TX)
        vsock_process_tx(dev);
    else if (queue == VSOCK_QUEUE_EVENT)
        vsock_process_event(dev);
    /* New RX buffers, or packets TX processing queued for the guest. */
    vsock_process_rx(dev);
}

static void handle_timer(struct virtio_vsock *dev)
{
    uint64_t expirations;
    if (read(dev->timer_fd, &expirations, sizeof expirations) < 0)
        return;
    gint64 now = g_get_monotonic_time();
    vsock_unix_check_timeouts(dev, now);
    vsock_conn_check_timeouts(dev, now);
    vsock_process_rx(dev);
}

/* The device thread's half of virtio_vsock_transport_reset, first thing
 * after it wakes (a host connection accepted after the request survives) and
 * again on the request's own eventfd: a request made while the thread was
 * already awake, after that first look, must not wait for another wake-up. */
static void reset_if_requested(struct virtio_vsock *dev)
{
    if (!__atomic_exchange_n(&dev->reset_requested, false, __ATOMIC_ACQ_REL))
        return;
    drop_all_connections(dev);
    dev->event_pending = true;
    if (virtio_mmio_is_active(&dev->transport))
        vsock_process_event(dev);
}

static void handle_reset_request(struct virtio_vsock *dev)
{
    uint64_t count;
    if (read(dev->reset_fd, &count, sizeof count) < 0 && errno != EAGAIN)
        g_warning("virtio-vsock: reset eventfd: %s", g_strerror(errno));
    reset_if_requested(dev);
}

/* One epoll event; returns false when the thread must stop. */
static bool dispatch(struct virtio_vsock *dev, struct vsock_watch *watch, uint32_t events)
{
    switch (watch->kind) {
    case WATCH_STOP:
        return false;
    case WATCH_RESET:
        handle_reset_request(dev);
        break;
    case WATCH_NOTIFY:
        handle_notify(dev, watch->index);
        break;
    case WATCH_TIMER:
        handle_timer(dev);
        break;
    case WATCH_LISTENER:
        vsock_unix_accept(dev);
        break;
    case WATCH_HANDSHAKE:
        if (((struct vsock_handshake *)watch->owner)->dead)
            break;
        vsock_unix_handshake_event(dev, watch->owner);
        vsock_process_rx(dev);
        break;
    case WATCH_CONN:
        if (((struct vsock_conn *)watch->owner)->dead)
            break;
        vsock_conn_handle_fd_event(dev, watch->owner, events);
        vsock_process_rx(dev);
        break;
    }
    return true;
}

static gpointer device_thread(gpointer data)
{
    struct virtio_vsock *dev = data;
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_DEVICE);
    struct epoll_event events[EPOLL_BATCH];
    for (;;) {
        int n = epoll_wait(dev->epoll_fd, events, EPOLL_BATCH, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            g_warning("virtio-vsock: epoll_wait: %s; device thread stops", g_strerror(errno));
            return NULL;
        }
        g_mutex_lock(&dev->transport.lock);
        reset_if_requested(dev);
        bool go_on = true;
        for (int i = 0; i < n && go_on; i++)
            go_on = dispatch(dev, events[i].data.ptr, events[i].events);
        vsock_free_dead(dev);
        g_mutex_unlock(&dev->transport.lock);
        if (!go_on)
            return NULL;
    }
}

static bool open_loop_fds(struct virtio_vsock *dev, GError **error)
{
    dev->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    dev->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    dev->reset_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    dev->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (dev->epoll_fd < 0 || dev->stop_fd < 0 || dev->reset_fd < 0 || dev->timer_fd < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
                    "virtio-vsock: cannot create its event loop: %s", g_strerror(errno));
        return false;
    }
    struct itimerspec period = {
        .it_interval = {.tv_nsec = TIMER_PERIOD_NS},
        .it_value = {.tv_nsec = TIMER_PERIOD_NS},
    };
    timerfd_settime(dev->timer_fd, 0, &period, NULL);
    add_watch(dev, dev->stop_fd, &dev->stop_watch, WATCH_STOP, 0);
    add_watch(dev, dev->reset_fd, &dev->reset_watch, WATCH_RESET, 0);
    add_watch(dev, dev->timer_fd, &dev->timer_watch, WATCH_TIMER, 0);
    for (unsigned i = 0; i < VSOCK_NQUEUES; i++)
        add_watch(dev, dev->transport.notify_fd[i], &dev->notify_watch[i], WATCH_NOTIFY, i);
    return true;
}

static bool check_config(const struct vsock_config *cfg, GError **error)
{
    if (cfg->cid < 3) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "vsock cid %u is reserved: a guest CID must be 3 or more", cfg->cid);
        return false;
    }
    if (!cfg->socket || !*cfg->socket) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "vsock needs a socket path");
        return false;
    }
    return true;
}

struct virtio_vsock *virtio_vsock_new(const struct virtio_host *host, unsigned mmio_index,
                                      const struct vsock_config *cfg, GError **error)
{
    if (!check_config(cfg, error))
        return NULL;
    struct virtio_vsock *dev = g_new0(struct virtio_vsock, 1);
    dev->guest_cid = cfg->cid;
    dev->handlers = g_ptr_array_new();
    dev->socket_path = g_strdup(cfg->socket);
    dev->epoll_fd = dev->listen_fd = dev->stop_fd = dev->reset_fd = dev->timer_fd = -1;
    dev->conns = g_hash_table_new(g_int64_hash, g_int64_equal);
    g_queue_init(&dev->ctrl_queue);
    g_queue_init(&dev->rx_ready);
    dev->next_local_port = VSOCK_LOCAL_PORT_FIRST;
    if (!virtio_mmio_init(&dev->transport, host, mmio_index, &vsock_ops, dev, error)) {
        virtio_mmio_release(&dev->transport);
        g_hash_table_destroy(dev->conns);
        g_ptr_array_unref(dev->handlers);
        g_free(dev->socket_path);
        g_free(dev);
        return NULL;
    }
    if (!open_loop_fds(dev, error) || !vsock_unix_listen(dev, error)) {
        virtio_vsock_free(dev);
        return NULL;
    }
    dev->thread = g_thread_new("virtio-vsock", device_thread, dev);
    return dev;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

void virtio_vsock_free(struct virtio_vsock *dev)
{
    if (!dev)
        return;
    if (dev->thread) {
        uint64_t one = 1;
        if (write(dev->stop_fd, &one, sizeof one) < 0)
            g_warning("virtio-vsock: cannot stop the device thread: %s", g_strerror(errno));
        g_thread_join(dev->thread);
    }
    g_mutex_lock(&dev->transport.lock);
    drop_all_connections(dev);
    while (dev->handshakes)
        vsock_unix_handshake_free(dev, dev->handshakes->data);
    vsock_free_dead(dev);
    g_mutex_unlock(&dev->transport.lock);
    vsock_unix_close_listener(dev);
    close_fd(&dev->timer_fd);
    close_fd(&dev->stop_fd);
    close_fd(&dev->reset_fd);
    close_fd(&dev->epoll_fd);
    virtio_mmio_release(&dev->transport);
    g_hash_table_destroy(dev->conns);
    g_ptr_array_unref(dev->handlers);
    g_free(dev->socket_path);
    g_free(dev);
}

const struct vsock_port_handler *vsock_port_handler_for(struct virtio_vsock *dev, uint32_t port)
{
    for (guint i = 0; i < dev->handlers->len; i++) {
        const struct vsock_port_handler *h = g_ptr_array_index(dev->handlers, i);
        if (h->port == port)
            return h;
    }
    return NULL;
}

bool virtio_vsock_serve_port(struct virtio_vsock *dev, const struct vsock_port_handler *handler,
                             GError **error)
{
    g_mutex_lock(&dev->transport.lock);
    bool taken = vsock_port_handler_for(dev, handler->port) != NULL;
    if (!taken)
        g_ptr_array_add(dev->handlers, (gpointer)handler);
    g_mutex_unlock(&dev->transport.lock);
    if (taken)
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_EXISTS, "virtio-vsock: port %u is served already",
                    handler->port);
    return !taken;
}

char *virtio_vsock_cmdline_entry(const struct virtio_vsock *dev)
{
    return virtio_mmio_cmdline_entry(&dev->transport);
}

void virtio_vsock_add_counters(struct virtio_vsock *dev, JsonBuilder *builder)
{
    g_mutex_lock(&dev->transport.lock);
    struct vsock_counters c = dev->counters;
    guint open = g_hash_table_size(dev->conns);
    g_mutex_unlock(&dev->transport.lock);
    vjson_object_begin(builder, "vsock");
    struct {
        const char *name;
        uint64_t value;
    } items[] = {
        {"rx_bytes", c.rx_bytes},
        {"tx_bytes", c.tx_bytes},
        {"rx_packets", c.rx_packets},
        {"tx_packets", c.tx_packets},
        {"host_connections", c.connections_host},
        {"guest_connections", c.connections_guest},
        {"open_connections", open},
        {"resets", c.resets},
        {"local_connections", c.local_connections},
        {"guest_errors", c.guest_errors},
        {"reset_delivery_us", c.reset_delivery_us},
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(items); i++) {
        vjson_int(builder, items[i].name, (gint64)items[i].value);
    }
    vjson_object_end(builder);
}

void virtio_vsock_transport_reset(struct virtio_vsock *dev)
{
    __atomic_store_n(&dev->reset_requested_us, g_get_monotonic_time(), __ATOMIC_RELAXED);
    __atomic_store_n(&dev->reset_requested, true, __ATOMIC_RELEASE);
    /* Its own eventfd, not the event queue's notification: the device thread
     * reads (consumes) that one while handling the guest's kicks, which could
     * swallow this wake-up and leave the event to the next timer tick (100 ms
     * later: about every second restore announced READY that late). */
    uint64_t one = 1;
    if (write(dev->reset_fd, &one, sizeof one) < 0)
        g_warning("virtio-vsock: reset eventfd: %s", g_strerror(errno));
}

/* ---- snapshot state ---- */

void virtio_vsock_quiesce(struct virtio_vsock *dev)
{
    g_mutex_lock(&dev->transport.lock);
}

void virtio_vsock_unquiesce(struct virtio_vsock *dev)
{
    g_mutex_unlock(&dev->transport.lock);
}

void virtio_vsock_save_state(struct virtio_vsock *dev, JsonBuilder *b)
{
    vjson_object_begin(b, NULL);
    vjson_int(b, "guest_cid", (gint64)dev->guest_cid);
    /* The host ports of host-initiated connections go on from here after a
     * restore: Linux keeps a closed connection in its table until the close
     * handshake ends (up to 8 s), and a restored shim that handed out the
     * same port again had its first connection taken for that one and reset. */
    vjson_int(b, "next_local_port", (gint64)dev->next_local_port);
    vjson_member(b, "transport");
    virtio_mmio_save_state(&dev->transport, b);
    vjson_object_end(b);
}

bool virtio_vsock_restore_state(struct virtio_vsock *dev, JsonObject *obj, GError **error)
{
    JsonNode *node = json_object_get_member(obj, "transport");
    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "virtio-vsock state: \"transport\" is missing");
        return false;
    }
    /* Absent in snapshots of older shims: they start from the first port. */
    gint64 next = json_object_get_int_member_with_default(obj, "next_local_port", VSOCK_LOCAL_PORT_FIRST);
    g_mutex_lock(&dev->transport.lock);
    if (next >= VSOCK_LOCAL_PORT_FIRST && next <= G_MAXUINT32)
        dev->next_local_port = (uint32_t)next;
    bool ok = virtio_mmio_restore_state(&dev->transport, json_node_get_object(node), error);
    g_mutex_unlock(&dev->transport.lock);
    return ok;
}
