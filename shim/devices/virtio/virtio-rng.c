/* virtio-rng device model: fills the guest's request buffers from the
 * entropy source, within the rate limit. See virtio-rng.h. */
#include "devices/device-log.h"
#include "devices/virtio-rng.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <linux/virtio_ids.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "devices/token-bucket.h"
#include "devices/virtio-mmio.h"
#include "sandbox/syscall-filter.h"
#include "json/vjson.h"

#define QUEUE_REQUEST 0
#define QUEUE_SIZE 256
#define MAX_PER_REQUEST (64u * 1024u) /* bytes one buffer gets at most */

struct virtio_rng {
    struct virtio_mmio transport; /* its lock guards the queue, the bucket and the counters */
    char *src;
    int src_fd;
    int stop_fd;
    int timer_fd; /* armed while the bucket holds a request back */
    GThread *thread;
    struct token_bucket bucket;
    uint64_t rx_bytes, requests, throttled, guest_errors, source_errors;
};

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* virtio-rng has no configuration space. */
static void read_config(void *opaque, uint64_t offset, uint8_t *data, unsigned len)
{
    memset(data, 0, len);
}

static void wake_device_thread(struct virtio_rng *dev)
{
    uint64_t one = 1;
    if (write(dev->transport.notify_fd[QUEUE_REQUEST], &one, sizeof one) < 0)
        g_warning("virtio-rng: notify eventfd: %s", g_strerror(errno));
}

/* Buffers may be posted already (a restore): look at the queue now. */
static void device_activate(void *opaque)
{
    wake_device_thread(opaque);
}

static void device_reset(void *opaque)
{
}

static const struct virtio_device_ops rng_ops = {
    .name = "virtio-rng",
    .device_id = VIRTIO_ID_RNG,
    .features = 0,
    .nqueues = 1,
    .queue_size_max = QUEUE_SIZE,
    .read_config = read_config,
    .activate = device_activate,
    .reset = device_reset,
};

static void arm_timer(struct virtio_rng *dev, uint64_t ns)
{
    struct itimerspec when = { .it_value = { .tv_sec = (time_t)(ns / 1000000000ull),
                                             .tv_nsec = (long)(ns % 1000000000ull) } };
    if (timerfd_settime(dev->timer_fd, 0, &when, NULL) < 0)
        g_warning("virtio-rng: timerfd_settime: %s", g_strerror(errno));
}

/* Read n bytes of the source straight into the chain's writable buffers;
 * returns how many arrived. */
static size_t fill_chain(struct virtio_rng *dev, struct virtq *q, const struct virtq_chain *chain, size_t n)
{
    struct iovec iov[VIRTQ_MAX_CHAIN];
    unsigned niov = virtq_chain_write_iov(chain, 0, n, iov);
    ssize_t got;
    do {
        got = readv(dev->src_fd, iov, (int)niov);
    } while (got < 0 && errno == EINTR);
    if (got <= 0) {
        g_autofree char *why = g_strdup_printf("reading %s: %s", dev->src, got < 0 ? g_strerror(errno) : "end of file");
        device_log_limited(G_LOG_LEVEL_MESSAGE, ++dev->source_errors, "source errors", "virtio-rng: %s", why);
        return 0;
    }
    virtq_chain_mark_written(q, chain, 0, (size_t)got);
    return (size_t)got;
}

/* Serve every request the bucket can pay for. Lock held. */
static void process_requests(struct virtio_rng *dev)
{
    struct virtq *q = &dev->transport.queues[QUEUE_REQUEST];
    if (!virtio_mmio_is_active(&dev->transport) || !q->ready)
        return;
    bool used = false;
    for (;;) {
        struct virtq_chain chain;
        g_autoptr(GError) error = NULL;
        int got = virtq_pop(q, &chain, &error);
        if (got == 0)
            break;
        size_t want = got < 0 ? 0 : MIN(chain.write_len, (size_t)MAX_PER_REQUEST);
        uint64_t now = monotonic_ns();
        size_t allowed = want ? (size_t)token_bucket_take(&dev->bucket, want, now) : 0;
        if (want && !allowed) { /* throttled: wait for the bucket, keep the buffer */
            virtq_unpop(q);
            dev->throttled++;
            arm_timer(dev, token_bucket_wait_ns(&dev->bucket, want, now));
            break;
        }
        if (got < 0)
            device_log_limited(G_LOG_LEVEL_MESSAGE, ++dev->guest_errors, "guest errors", "virtio-rng: %s",
                               error->message);
        size_t n = allowed ? fill_chain(dev, q, &chain, allowed) : 0;
        virtq_push(q, chain.head, (uint32_t)n);
        dev->rx_bytes += n;
        dev->requests++;
        used = true;
    }
    if (used)
        virtio_mmio_signal_used(&dev->transport, q);
}

static gpointer device_thread(gpointer data)
{
    struct virtio_rng *dev = data;
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_DEVICE);
    for (;;) {
        struct pollfd p[] = {
            { .fd = dev->stop_fd, .events = POLLIN },
            { .fd = dev->transport.notify_fd[QUEUE_REQUEST], .events = POLLIN },
            { .fd = dev->timer_fd, .events = POLLIN },
        };
        if (poll(p, G_N_ELEMENTS(p), -1) < 0) {
            if (errno == EINTR)
                continue;
            g_warning("virtio-rng: poll: %s; device thread stops", g_strerror(errno));
            return NULL;
        }
        if (p[0].revents)
            return NULL;
        uint64_t expirations;
        if (p[2].revents && read(dev->timer_fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
            g_warning("virtio-rng: timerfd: %s", g_strerror(errno));
        g_mutex_lock(&dev->transport.lock);
        if (p[1].revents)
            virtio_mmio_take_notify(&dev->transport, QUEUE_REQUEST);
        process_requests(dev);
        g_mutex_unlock(&dev->transport.lock);
    }
}

static bool failed(GError **error, const char *what)
{
    int e = errno;
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "virtio-rng: %s: %s", what, g_strerror(e));
    return false;
}

static bool open_fds(struct virtio_rng *dev, GError **error)
{
    dev->src_fd = open(dev->src, O_RDONLY | O_CLOEXEC);
    if (dev->src_fd < 0) {
        g_autofree char *what = g_strdup_printf("cannot open rng.src %s", dev->src);
        return failed(error, what);
    }
    dev->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (dev->stop_fd < 0)
        return failed(error, "eventfd");
    dev->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (dev->timer_fd < 0)
        return failed(error, "timerfd_create");
    return true;
}

struct virtio_rng *virtio_rng_new(const struct virtio_host *host, unsigned mmio_index, const struct rng_config *cfg,
                                  GError **error)
{
    struct virtio_rng *dev = g_new0(struct virtio_rng, 1);
    dev->src_fd = dev->stop_fd = dev->timer_fd = -1;
    dev->src = g_strdup(cfg->src);
    token_bucket_init(&dev->bucket, cfg->bandwidth.size, cfg->bandwidth.one_time_burst, cfg->bandwidth.refill_time_ms,
                      monotonic_ns());
    if (!virtio_mmio_init(&dev->transport, host, mmio_index, &rng_ops, dev, error)) {
        virtio_mmio_release(&dev->transport);
        g_free(dev->src);
        g_free(dev);
        return NULL;
    }
    if (!open_fds(dev, error)) {
        virtio_rng_free(dev);
        return NULL;
    }
    dev->thread = g_thread_new("virtio-rng", device_thread, dev);
    return dev;
}

void virtio_rng_free(struct virtio_rng *dev)
{
    if (!dev)
        return;
    if (dev->thread) {
        uint64_t one = 1;
        if (write(dev->stop_fd, &one, sizeof one) < 0)
            g_warning("virtio-rng: cannot stop the device thread: %s", g_strerror(errno));
        g_thread_join(dev->thread);
    }
    int fds[] = { dev->src_fd, dev->stop_fd, dev->timer_fd };
    for (size_t i = 0; i < G_N_ELEMENTS(fds); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    virtio_mmio_release(&dev->transport);
    g_free(dev->src);
    g_free(dev);
}

char *virtio_rng_cmdline_entry(const struct virtio_rng *dev)
{
    return virtio_mmio_cmdline_entry(&dev->transport);
}

void virtio_rng_add_counters(struct virtio_rng *dev, JsonBuilder *b)
{
    g_mutex_lock(&dev->transport.lock);
    uint64_t counts[] = { dev->rx_bytes, dev->requests, dev->throttled, dev->guest_errors, dev->source_errors };
    g_mutex_unlock(&dev->transport.lock);
    static const char *const names[] = { "rx_bytes", "requests", "throttled", "guest_errors", "source_errors" };
    vjson_object_begin(b, "rng");
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        vjson_int(b, names[i], (gint64)counts[i]);
    }
    vjson_object_end(b);
}

/* ---- snapshot state ---- */

void virtio_rng_quiesce(struct virtio_rng *dev)
{
    g_mutex_lock(&dev->transport.lock);
}

void virtio_rng_unquiesce(struct virtio_rng *dev)
{
    g_mutex_unlock(&dev->transport.lock);
}

void virtio_rng_save_state(struct virtio_rng *dev, JsonBuilder *b)
{
    vjson_object_begin(b, NULL);
    vjson_member(b, "transport");
    virtio_mmio_save_state(&dev->transport, b);
    vjson_object_end(b);
}

bool virtio_rng_restore_state(struct virtio_rng *dev, JsonObject *obj, GError **error)
{
    JsonNode *node = json_object_get_member(obj, "transport");
    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "virtio-rng state: \"transport\" is missing");
        return false;
    }
    g_mutex_lock(&dev->transport.lock);
    bool ok = virtio_mmio_restore_state(&dev->transport, json_node_get_object(node), error);
    g_mutex_unlock(&dev->transport.lock);
    return ok;
}
