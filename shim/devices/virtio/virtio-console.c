/* virtio-console device model: one port, polled by a device thread for the
 * guest's output, fed by the serial backend's input thread. See
 * virtio-console.h. */
#include "devices/device-log.h"
#include "devices/virtio-console.h"

#include <errno.h>
#include <gio/gio.h>
#include <linux/virtio_ids.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "devices/serial-backend.h"
#include "devices/virtio-mmio.h"
#include "sandbox/syscall-filter.h"
#include "json/vjson.h"

#define QUEUE_RX 0 /* receiveq: host to guest */
#define QUEUE_TX 1 /* transmitq: guest to host */
#define NQUEUES 2
#define QUEUE_SIZE 256

struct virtio_console {
    struct virtio_mmio transport; /* its lock guards the queues and the counters */
    struct serial_backend *backend;
    int stop_fd;
    GThread *thread;
    uint64_t tx_bytes, rx_bytes, guest_errors;
};

/* Counted, and logged only at first (device-log.h): the guest can repeat it. */
static void log_guest_error(struct virtio_console *dev, const GError *error)
{
    device_log_limited(G_LOG_LEVEL_MESSAGE, ++dev->guest_errors, "guest errors", "virtio-console: %s",
                       error->message);
}

/* No F_SIZE, no MULTIPORT, no EMERG_WRITE: the configuration space says nothing. */
static void read_config(void *opaque, uint64_t offset, uint8_t *data, unsigned len)
{
    memset(data, 0, len);
}

static void wake_device_thread(struct virtio_console *dev)
{
    uint64_t one = 1;
    if (write(dev->transport.notify_fd[QUEUE_TX], &one, sizeof one) < 0)
        g_warning("virtio-console: notify eventfd: %s", g_strerror(errno));
}

/* Buffers may be posted already: look at both queues now. */
static void device_activate(void *opaque)
{
    struct virtio_console *dev = opaque;
    wake_device_thread(dev);
    if (dev->backend)
        serial_backend_input_room(dev->backend);
}

static void device_reset(void *opaque)
{
}

static const struct virtio_device_ops console_ops = {
    .name = "virtio-console",
    .device_id = VIRTIO_ID_CONSOLE,
    .features = 0,
    .nqueues = NQUEUES,
    .queue_size_max = QUEUE_SIZE,
    .read_config = read_config,
    .activate = device_activate,
    .reset = device_reset,
};

static bool queue_live(struct virtio_console *dev, unsigned index)
{
    return virtio_mmio_is_active(&dev->transport) && dev->transport.queues[index].ready;
}

/* Every chain the guest queued for output goes to the backend; the device
 * writes nothing into them. Lock held. */
static void process_tx(struct virtio_console *dev)
{
    struct virtq *q = &dev->transport.queues[QUEUE_TX];
    struct virtq_chain chain;
    bool used = false;
    if (!queue_live(dev, QUEUE_TX))
        return;
    for (;;) {
        g_autoptr(GError) error = NULL;
        int got = virtq_pop(q, &chain, &error);
        if (got == 0)
            break;
        if (got < 0) {
            log_guest_error(dev, error);
        } else {
            for (unsigned i = 0; i < chain.nread; i++)
                serial_backend_write_bytes(dev->backend, chain.read[i].iov_base, chain.read[i].iov_len);
            dev->tx_bytes += chain.read_len;
        }
        virtq_push(q, chain.head, 0);
        used = true;
    }
    if (used)
        virtio_mmio_signal_used(&dev->transport, q);
}

/* The backend's input thread: as much input as the guest's receive buffers
 * hold; the rest waits for serial_backend_input_room. */
static size_t deliver_input(void *opaque, const uint8_t *bytes, size_t len)
{
    struct virtio_console *dev = opaque;
    struct virtq *q = &dev->transport.queues[QUEUE_RX];
    struct virtq_chain chain;
    size_t taken = 0;
    bool used = false;
    g_mutex_lock(&dev->transport.lock);
    while (queue_live(dev, QUEUE_RX) && taken < len) {
        g_autoptr(GError) error = NULL;
        int got = virtq_pop(q, &chain, &error);
        if (got == 0)
            break;
        size_t n = 0;
        if (got < 0)
            log_guest_error(dev, error);
        else
            n = virtq_chain_write(q, &chain, 0, bytes + taken, len - taken);
        virtq_push(q, chain.head, (uint32_t)n);
        taken += n;
        used = true;
    }
    if (used)
        virtio_mmio_signal_used(&dev->transport, q);
    dev->rx_bytes += taken;
    g_mutex_unlock(&dev->transport.lock);
    return taken;
}

static gpointer device_thread(gpointer data)
{
    struct virtio_console *dev = data;
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_DEVICE);
    for (;;) {
        struct pollfd p[] = {
            { .fd = dev->stop_fd, .events = POLLIN },
            { .fd = dev->transport.notify_fd[QUEUE_RX], .events = POLLIN },
            { .fd = dev->transport.notify_fd[QUEUE_TX], .events = POLLIN },
        };
        if (poll(p, G_N_ELEMENTS(p), -1) < 0) {
            if (errno == EINTR)
                continue;
            g_warning("virtio-console: poll: %s; device thread stops", g_strerror(errno));
            return NULL;
        }
        if (p[0].revents)
            return NULL;
        g_mutex_lock(&dev->transport.lock);
        /* New receive buffers: input the backend holds back may fit now. */
        if (p[1].revents && virtio_mmio_take_notify(&dev->transport, QUEUE_RX))
            serial_backend_input_room(dev->backend);
        if (p[2].revents && virtio_mmio_take_notify(&dev->transport, QUEUE_TX))
            process_tx(dev);
        g_mutex_unlock(&dev->transport.lock);
    }
}

struct virtio_console *virtio_console_new(const struct virtio_host *host, unsigned mmio_index,
                                          const struct console_config *cfg, GError **error)
{
    struct virtio_console *dev = g_new0(struct virtio_console, 1);
    dev->stop_fd = -1;
    if (!virtio_mmio_init(&dev->transport, host, mmio_index, &console_ops, dev, error)) {
        virtio_mmio_release(&dev->transport);
        g_free(dev);
        return NULL;
    }
    dev->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (dev->stop_fd < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "virtio-console: eventfd: %s",
                    g_strerror(errno));
        virtio_console_free(dev);
        return NULL;
    }
    /* After the transport: input may arrive as soon as the backend is open. */
    dev->backend = serial_backend_new("console", cfg, deliver_input, dev, error);
    if (!dev->backend) {
        g_prefix_error(error, "virtio-console: ");
        virtio_console_free(dev);
        return NULL;
    }
    dev->thread = g_thread_new("virtio-console", device_thread, dev);
    return dev;
}

void virtio_console_free(struct virtio_console *dev)
{
    if (!dev)
        return;
    if (dev->thread) {
        uint64_t one = 1;
        if (write(dev->stop_fd, &one, sizeof one) < 0)
            g_warning("virtio-console: cannot stop the device thread: %s", g_strerror(errno));
        g_thread_join(dev->thread);
    }
    serial_backend_free(dev->backend); /* joins the input thread, the other user of the queues */
    if (dev->stop_fd >= 0)
        close(dev->stop_fd);
    virtio_mmio_release(&dev->transport);
    g_free(dev);
}

char *virtio_console_cmdline_entry(const struct virtio_console *dev)
{
    return virtio_mmio_cmdline_entry(&dev->transport);
}

const char *virtio_console_pty_path(struct virtio_console *dev)
{
    return serial_backend_pty_path(dev->backend);
}

void virtio_console_add_counters(struct virtio_console *dev, JsonBuilder *b)
{
    g_mutex_lock(&dev->transport.lock);
    uint64_t tx = dev->tx_bytes, rx = dev->rx_bytes;
    g_mutex_unlock(&dev->transport.lock);
    vjson_object_begin(b, "console");
    vjson_int(b, "tx_bytes", (gint64)tx);
    vjson_int(b, "rx_bytes", (gint64)rx);
    vjson_object_end(b);
}

/* ---- snapshot state ---- */

void virtio_console_quiesce(struct virtio_console *dev)
{
    g_mutex_lock(&dev->transport.lock);
}

void virtio_console_unquiesce(struct virtio_console *dev)
{
    g_mutex_unlock(&dev->transport.lock);
}

void virtio_console_save_state(struct virtio_console *dev, JsonBuilder *b)
{
    vjson_object_begin(b, NULL);
    vjson_member(b, "transport");
    virtio_mmio_save_state(&dev->transport, b);
    vjson_object_end(b);
}

bool virtio_console_restore_state(struct virtio_console *dev, JsonObject *obj, GError **error)
{
    JsonNode *node = json_object_get_member(obj, "transport");
    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "virtio-console state: \"transport\" is missing");
        return false;
    }
    g_mutex_lock(&dev->transport.lock);
    bool ok = virtio_mmio_restore_state(&dev->transport, json_node_get_object(node), error);
    g_mutex_unlock(&dev->transport.lock);
    return ok;
}
