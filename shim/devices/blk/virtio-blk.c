/* virtio-blk device model: config space, lifecycle, the I/O thread, pausing,
 * counters and snapshot state. Requests are in virtio-blk-req.c. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "virtio-blk-priv.h"

#include <errno.h>
#include <gio/gio.h>
#include <linux/virtio_ids.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "state/state-json.h"
#include "sandbox/syscall-filter.h"
#include "json/vjson.h"

/* After a batch the thread keeps looking at the rings for this much of its
 * own CPU time (and at most POLL_WALL_MAX_US) before it turns notifications
 * back on and sleeps: a guest's notification is a VM exit (100 us and more on
 * this host), so a driver that submits back to back should find the device
 * still looking. */
#define POLL_AFTER_WORK_NS (100 * 1000)
#define POLL_WALL_MAX_US 2000
/* A disk that does not finish its requests within this is stuck (a hung
 * backend): pausing it fails instead of waiting for ever. */
#define PAUSE_TIMEOUT_US (10 * G_USEC_PER_SEC)

/* ---- transport callbacks (vCPU threads, transport lock held) ---- */

static void read_config(void *opaque, uint64_t offset, uint8_t *data, unsigned len)
{
    struct virtio_blk *dev = opaque;
    const uint8_t *config = (const uint8_t *)&dev->config;
    for (unsigned i = 0; i < len; i++)
        data[i] = offset + i < sizeof dev->config ? config[offset + i] : 0;
}

static void wake_thread(struct virtio_blk *dev)
{
    uint64_t one = 1;
    if (write(dev->wake_fd, &one, sizeof one) < 0)
        g_warning("disk %s: cannot wake its I/O thread: %s", dev->id, g_strerror(errno));
}

/* Buffers may be posted already: look at the queues at once. */
static void device_activate(void *opaque)
{
    wake_thread(opaque);
}

static void device_reset(void *opaque)
{
    struct virtio_blk *dev = opaque;
    dev->generation++;
}

/* ---- the I/O thread ---- */

struct virtq *blk_queue(struct virtio_blk *dev, unsigned i)
{
    return &dev->transport.queues[i];
}

bool blk_queue_live(struct virtio_blk *dev, unsigned i)
{
    return virtio_mmio_is_active(&dev->transport) && blk_queue(dev, i)->ready;
}

/* Hand one finished chain back, and tell the driver. A reset since the chain
 * was taken gave the driver new rings: the chain is not theirs any more. */
void blk_complete(struct virtio_blk *dev, unsigned i, struct blk_request *req)
{
    struct virtq *q = blk_queue(dev, i);
    g_mutex_lock(&dev->transport.lock);
    if (req->generation == dev->generation && blk_queue_live(dev, i)) {
        virtq_push(q, req->chain.head, req->used_len);
        virtio_mmio_signal_used(&dev->transport, q);
    }
    g_mutex_unlock(&dev->transport.lock);
    g_clear_pointer(&req->why, g_free);
}

/* Take up to BLK_BATCH chains of queue i under one lock, then do them one by
 * one, each handed back as soon as it is done (the driver can refill the
 * queue while the rest are still being done). Returns whether there was
 * anything. */
static bool service_queue(struct virtio_blk *dev, unsigned i)
{
    if (dev->ring)
        return blk_service_queue_ring(dev, i);
    struct virtq *q = blk_queue(dev, i);
    unsigned n = 0;
    g_mutex_lock(&dev->transport.lock);
    uint64_t generation = dev->generation;
    if (blk_queue_live(dev, i)) {
        virtq_set_notify_wanted(q, false); /* we are looking anyway */
        for (; n < BLK_BATCH; n++) {
            struct blk_request *req = &dev->batch[n];
            g_autoptr(GError) error = NULL;
            int r = virtq_pop(q, &req->chain, &error);
            if (r == 0)
                break;
            req->malformed = r < 0;
            req->why = r < 0 ? g_strdup(error->message) : NULL;
            req->generation = generation;
        }
    }
    g_mutex_unlock(&dev->transport.lock);
    for (unsigned k = 0; k < n; k++) {
        blk_request_execute(dev, q, &dev->batch[k]);
        blk_complete(dev, i, &dev->batch[k]);
    }
    return n > 0;
}

static bool service_all(struct virtio_blk *dev)
{
    bool worked = false;
    for (unsigned i = 0; i < dev->ops.nqueues; i++)
        worked |= service_queue(dev, i);
    return worked;
}

/* Going to sleep: ask the driver for notifications again, then look once more
 * (a chain published before the flag was seen gets no notification). */
static bool arm_notifications(struct virtio_blk *dev)
{
    bool pending = false;
    g_mutex_lock(&dev->transport.lock);
    for (unsigned i = 0; i < dev->ops.nqueues; i++) {
        if (!blk_queue_live(dev, i))
            continue;
        virtq_set_notify_wanted(blk_queue(dev, i), true);
        __atomic_thread_fence(__ATOMIC_SEQ_CST); /* flag store before the index load */
        pending |= virtq_has_available(blk_queue(dev, i));
    }
    g_mutex_unlock(&dev->transport.lock);
    return pending;
}

static bool any_available(struct virtio_blk *dev)
{
    bool pending = false;
    g_mutex_lock(&dev->transport.lock);
    for (unsigned i = 0; i < dev->ops.nqueues && !pending; i++)
        pending = blk_queue_live(dev, i) && virtq_has_available(blk_queue(dev, i));
    g_mutex_unlock(&dev->transport.lock);
    return pending;
}

/* Wait for a notification or a control request; consume the eventfds. */
static void sleep_until_notified(struct virtio_blk *dev)
{
    struct epoll_event events[VIRTIO_MMIO_MAX_QUEUES + 1];
    int n = epoll_wait(dev->epoll_fd, events, G_N_ELEMENTS(events), -1);
    if (n < 0 && errno != EINTR)
        g_warning("disk %s: epoll_wait: %s", dev->id, g_strerror(errno));
    uint64_t count;
    for (unsigned i = 0; i < dev->ops.nqueues; i++)
        virtio_mmio_take_notify(&dev->transport, i);
    if (read(dev->wake_fd, &count, sizeof count) < 0 && errno != EAGAIN)
        g_warning("disk %s: wake eventfd: %s", dev->id, g_strerror(errno));
}

/* What the controlling thread asks for: 1 pause, 0 run on, -1 stop. */
static int control_request(struct virtio_blk *dev)
{
    g_mutex_lock(&dev->ctl_lock);
    int request = dev->stop ? -1 : dev->pause_count > 0;
    g_mutex_unlock(&dev->ctl_lock);
    return request;
}

/* Asked to pause: finish every chain the guest has published (its vCPUs are
 * parked, so that is a finite amount), then hold still until resumed. Called
 * between batches, so nothing is in flight while the thread holds. false
 * when the thread must end. */
static bool honour_pause(struct virtio_blk *dev)
{
    int request;
    while ((request = control_request(dev)) > 0 && service_all(dev))
        ;
    if (request <= 0)
        return request == 0;
    g_mutex_lock(&dev->ctl_lock);
    while (dev->pause_count > 0 && !dev->stop) {
        dev->thread_idle = true;
        g_cond_broadcast(&dev->ctl_cond);
        g_cond_wait(&dev->ctl_cond, &dev->ctl_lock);
    }
    dev->thread_idle = false;
    bool go_on = !dev->stop;
    g_mutex_unlock(&dev->ctl_lock);
    return go_on;
}

/* CPU time this thread has used, in ns: the polling window counts only time
 * the thread actually ran, so being preempted on a busy host does not end
 * it (the guest would then pay a notification for nothing). */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* After work: look at the rings until something comes, a pause is asked for,
 * or POLL_AFTER_WORK_NS of this thread's CPU time (at most POLL_WALL_MAX_US
 * of wall time) went by. Returns whether something came. */
static bool poll_after_work(struct virtio_blk *dev)
{
    int64_t cpu_end = thread_cpu_ns() + POLL_AFTER_WORK_NS;
    gint64 wall_end = g_get_monotonic_time() + POLL_WALL_MAX_US;
    for (unsigned n = 1;; n++) {
        if (atomic_load(&dev->pause_wanted) || any_available(dev))
            return true;
        /* The clocks cost a system call or so: look at them now and then. */
        if (n % 16 == 0 && (thread_cpu_ns() > cpu_end || g_get_monotonic_time() > wall_end))
            return false;
    }
}

static gpointer io_thread(gpointer data)
{
    struct virtio_blk *dev = data;
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_DISK);
    bool worked = false;
    while (honour_pause(dev)) {
        if (service_all(dev)) {
            worked = true;
            continue;
        }
        if (worked && poll_after_work(dev))
            continue;
        worked = false;
        if (!arm_notifications(dev)) {
            atomic_fetch_add(&dev->counters.sleeps, 1);
            sleep_until_notified(dev);
        }
    }
    return NULL;
}

/* ---- pausing ---- */

bool virtio_blk_pause(struct virtio_blk *dev, GError **error)
{
    g_mutex_lock(&dev->ctl_lock);
    dev->pause_count++;
    atomic_store(&dev->pause_wanted, true);
    wake_thread(dev);
    gint64 deadline = g_get_monotonic_time() + PAUSE_TIMEOUT_US;
    bool idle = true;
    while (!dev->thread_idle && idle)
        idle = g_cond_wait_until(&dev->ctl_cond, &dev->ctl_lock, deadline) || dev->thread_idle;
    g_mutex_unlock(&dev->ctl_lock);
    if (!idle) {
        virtio_blk_resume(dev);
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                    "disk %s: requests in flight did not complete within %d s (is %s stuck?)", dev->id,
                    (int)(PAUSE_TIMEOUT_US / G_USEC_PER_SEC), dev->backend->name);
    }
    return idle;
}

void virtio_blk_resume(struct virtio_blk *dev)
{
    g_mutex_lock(&dev->ctl_lock);
    g_assert(dev->pause_count > 0);
    if (--dev->pause_count == 0) {
        atomic_store(&dev->pause_wanted, false);
        g_cond_broadcast(&dev->ctl_cond);
    }
    g_mutex_unlock(&dev->ctl_lock);
}

/* ---- construction ---- */

static void fill_serial(struct virtio_blk *dev, const struct disk_config *cfg)
{
    const char *serial = cfg->serial ? cfg->serial : cfg->id;
    memset(dev->serial, 0, sizeof dev->serial);
    memcpy(dev->serial, serial, MIN(strlen(serial), sizeof dev->serial));
}

static uint64_t features_for(const struct blk_backend *b, unsigned nqueues)
{
    uint64_t f = 1ull << VIRTIO_BLK_F_SEG_MAX | 1ull << VIRTIO_BLK_F_BLK_SIZE | 1ull << VIRTIO_BLK_F_FLUSH;
    if (b->readonly)
        f |= 1ull << VIRTIO_BLK_F_RO;
    else
        f |= 1ull << VIRTIO_BLK_F_WRITE_ZEROES;
    if (b->can_discard)
        f |= 1ull << VIRTIO_BLK_F_DISCARD;
    if (nqueues > 1)
        f |= 1ull << VIRTIO_BLK_F_MQ;
    return f;
}

static void fill_config(struct virtio_blk *dev)
{
    struct virtio_blk_config *c = &dev->config;
    uint32_t block = dev->backend->block_size;
    memset(c, 0, sizeof *c);
    c->capacity = dev->capacity_sectors;
    c->seg_max = BLK_SEG_MAX;
    c->blk_size = block;
    c->num_queues = (uint16_t)dev->ops.nqueues;
    c->max_discard_sectors = BLK_MAX_DISCARD_SECTORS;
    c->max_discard_seg = BLK_MAX_DISCARD_SEG;
    c->discard_sector_alignment = block / BLK_SECTOR_SIZE;
    c->max_write_zeroes_sectors = BLK_MAX_DISCARD_SECTORS;
    c->max_write_zeroes_seg = BLK_MAX_DISCARD_SEG;
    c->write_zeroes_may_unmap = dev->backend->can_discard;
}

static bool open_thread_fds(struct virtio_blk *dev, GError **error)
{
    dev->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    dev->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    bool ok = dev->epoll_fd >= 0 && dev->wake_fd >= 0;
    struct epoll_event ev = { .events = EPOLLIN };
    ok = ok && epoll_ctl(dev->epoll_fd, EPOLL_CTL_ADD, dev->wake_fd, &ev) == 0;
    for (unsigned i = 0; ok && i < dev->ops.nqueues; i++)
        ok = epoll_ctl(dev->epoll_fd, EPOLL_CTL_ADD, dev->transport.notify_fd[i], &ev) == 0;
    if (!ok)
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "disk %s: cannot set up its I/O thread: %s",
                    dev->id, g_strerror(errno));
    return ok;
}

static struct blk_policy policy_for(const struct disk_config *cfg)
{
    const char *dz = cfg->vsnap_detect_zeroes;
    return (struct blk_policy){
        .write_through = cfg->vsnap_write_through,
        .ignore_flush = cfg->vsnap_ignore_flush,
        .detect_zeroes = !dz || g_str_equal(dz, "off") ? BLK_DETECT_ZEROES_OFF
                         : g_str_equal(dz, "on")       ? BLK_DETECT_ZEROES_ON
                                                       : BLK_DETECT_ZEROES_UNMAP,
    };
}

/* io='io_uring': a ring for the batch, or one line saying why the disk does
 * one transfer at a time as with any other io (never a failed VM). */
static void setup_ring(struct virtio_blk *dev, const struct disk_config *cfg)
{
    for (unsigned k = 0; k < BLK_BATCH; k++)
        dev->free_slots[k] = BLK_BATCH - 1 - k;
    dev->nfree = BLK_BATCH;
    if (!cfg->vsnap_io || !g_str_equal(cfg->vsnap_io, "io_uring"))
        return;
    g_autoptr(GError) error = NULL;
    dev->ring = blk_uring_new(BLK_BATCH, &error);
    if (!dev->ring)
        g_message("disk %s: io_uring: %s; its requests are done one at a time", dev->id, error->message);
}

struct virtio_blk *virtio_blk_new(const struct virtio_host *host, unsigned mmio_index,
                                  const struct disk_config *cfg, struct blk_backend *backend, GError **error)
{
    struct virtio_blk *dev = g_new0(struct virtio_blk, 1);
    dev->backend = backend;
    dev->id = g_strdup(cfg->id);
    dev->epoll_fd = dev->wake_fd = -1;
    g_mutex_init(&dev->ctl_lock);
    g_cond_init(&dev->ctl_cond);
    dev->capacity_sectors = backend->capacity / BLK_SECTOR_SIZE;
    fill_serial(dev, cfg);
    dev->policy = policy_for(cfg);
    dev->ops = (struct virtio_device_ops){
        .name = "virtio-blk",
        .device_id = VIRTIO_ID_BLOCK,
        .features = features_for(backend, cfg->num_queues),
        .nqueues = cfg->num_queues,
        .queue_size_max = (uint16_t)cfg->queue_size,
        .read_config = read_config,
        .activate = device_activate,
        .reset = device_reset,
    };
    fill_config(dev);
    setup_ring(dev, cfg);
    bool transport = virtio_mmio_init(&dev->transport, host, mmio_index, &dev->ops, dev, error);
    if (!transport || !open_thread_fds(dev, error)) {
        if (!transport) { /* virtio_blk_free releases a transport that was set up */
            virtio_mmio_release(&dev->transport);
            dev->transport.ops = NULL;
        }
        virtio_blk_free(dev);
        return NULL;
    }
    dev->thread = g_thread_new("virtio-blk", io_thread, dev);
    return dev;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

void virtio_blk_free(struct virtio_blk *dev)
{
    if (!dev)
        return;
    if (dev->thread) {
        g_mutex_lock(&dev->ctl_lock);
        dev->stop = true;
        g_cond_broadcast(&dev->ctl_cond);
        g_mutex_unlock(&dev->ctl_lock);
        wake_thread(dev);
        g_thread_join(dev->thread);
    }
    blk_uring_free(dev->ring);
    close_fd(&dev->epoll_fd);
    close_fd(&dev->wake_fd);
    if (dev->transport.ops)
        virtio_mmio_release(&dev->transport);
    blk_backend_close(dev->backend);
    g_cond_clear(&dev->ctl_cond);
    g_mutex_clear(&dev->ctl_lock);
    g_free(dev->id);
    g_free(dev);
}

char *virtio_blk_cmdline_entry(const struct virtio_blk *dev)
{
    return virtio_mmio_cmdline_entry(&dev->transport);
}

const char *virtio_blk_id(const struct virtio_blk *dev)
{
    return dev->id;
}

struct blk_backend *virtio_blk_backend(struct virtio_blk *dev)
{
    return dev->backend;
}

struct blk_backend *virtio_blk_replace_backend(struct virtio_blk *dev, struct blk_backend *backend)
{
    g_assert(backend->capacity == dev->backend->capacity && backend->readonly == dev->backend->readonly);
    g_mutex_lock(&dev->ctl_lock);
    g_assert(dev->thread_idle || !dev->thread);
    g_mutex_unlock(&dev->ctl_lock);
    struct blk_backend *old = dev->backend;
    dev->backend = backend;
    return old;
}

void virtio_blk_capacity_changed(struct virtio_blk *dev)
{
    g_mutex_lock(&dev->transport.lock);
    dev->capacity_sectors = dev->backend->capacity / BLK_SECTOR_SIZE;
    dev->config.capacity = dev->capacity_sectors;
    dev->transport.config_generation++;
    virtio_mmio_signal_config(&dev->transport);
    g_mutex_unlock(&dev->transport.lock);
}

void virtio_blk_add_counters(struct virtio_blk *dev, JsonBuilder *b)
{
    const struct blk_counters *c = &dev->counters;
    struct {
        const char *name;
        uint64_t value;
    } items[] = {
        {"read_ops", atomic_load(&c->read_ops)},       {"read_bytes", atomic_load(&c->read_bytes)},
        {"write_ops", atomic_load(&c->write_ops)},     {"write_bytes", atomic_load(&c->write_bytes)},
        {"flush_ops", atomic_load(&c->flush_ops)},     {"discard_ops", atomic_load(&c->discard_ops)},
        {"write_zeroes_ops", atomic_load(&c->write_zeroes_ops)}, {"zero_writes", atomic_load(&c->zero_writes)},
        {"store_flushes", atomic_load(&c->store_flushes)},
        {"io_errors", atomic_load(&c->io_errors)},     {"guest_errors", atomic_load(&c->guest_errors)},
        {"nospace_errors", atomic_load(&c->nospace_errors)}, {"last_errno", atomic_load(&c->last_errno)},
        {"unsupported", atomic_load(&c->unsupported)}, {"sleeps", atomic_load(&c->sleeps)},
        {"ring_transfers", atomic_load(&c->ring_transfers)},
        {"ring_max_in_flight", atomic_load(&c->ring_max_in_flight)},
    };
    vjson_object_begin(b, dev->id);
    for (unsigned i = 0; i < G_N_ELEMENTS(items); i++) {
        vjson_int(b, items[i].name, (gint64)items[i].value);
    }
    vjson_object_end(b);
}

/* ---- snapshot state ---- */

void virtio_blk_save_state(struct virtio_blk *dev, JsonBuilder *b)
{
    vjson_object_begin(b, NULL);
    vjson_str(b, "id", dev->id);
    vjson_hex64(b, "capacity", dev->capacity_sectors);
    vjson_member(b, "transport");
    g_mutex_lock(&dev->transport.lock);
    virtio_mmio_save_state(&dev->transport, b);
    g_mutex_unlock(&dev->transport.lock);
    vjson_object_end(b);
}

bool virtio_blk_restore_state(struct virtio_blk *dev, JsonObject *obj, GError **error)
{
    g_autofree char *what = g_strdup_printf("disk %s", dev->id);
    const char *id = state_get_string(obj, "id", what, error);
    uint64_t capacity;
    if (!id || !state_get_u64(obj, "capacity", &capacity, what, error))
        return false;
    JsonObject *transport = state_get_object(obj, "transport", what, error);
    if (!transport)
        return false;
    if (strcmp(id, dev->id) != 0) {
        g_set_error(error, STATE_ERROR, STATE_ERROR_INVALID, "the snapshot's disk %s is disk %s in the config",
                    id, dev->id);
        return false;
    }
    if (capacity != dev->capacity_sectors) {
        g_set_error(error, STATE_ERROR, STATE_ERROR_INVALID,
                    "disk %s: the guest saw %" G_GUINT64_FORMAT " sectors, %s now holds %" G_GUINT64_FORMAT,
                    dev->id, capacity, dev->backend->name, dev->capacity_sectors);
        return false;
    }
    g_mutex_lock(&dev->transport.lock);
    bool ok = virtio_mmio_restore_state(&dev->transport, transport, error);
    g_mutex_unlock(&dev->transport.lock);
    return ok;
}
