/* virtio-mmio transport (virtio 1.x register layout). See virtio-mmio.h. */
#include "devices/virtio-mmio.h"

#include <errno.h>
#include <gio/gio.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "platform/bus.h"
#include "config/vm-config.h"
#include "platform/memory.h"
#include "state/state-json.h"
#include "json/vjson.h"

#define VIRTIO_MMIO_MAGIC 0x74726976u /* "virt" */
#define VIRTIO_MMIO_VERSION_MODERN 2u
#define VIRTIO_VENDOR_ID 0x534e5356u  /* "VSNS": any value is allowed */

/* platform/layout.h assigns the lines. */
static const unsigned free_isa_gsis[VIRTIO_MMIO_MAX_DEVICES] = VIRTIO_MMIO_GSIS;
G_STATIC_ASSERT(VIRTIO_MMIO_MAX_DEVICES == VSNAP_MAX_VIRTIO_DEVICES);

unsigned virtio_mmio_gsi(unsigned index)
{
    g_assert(index < VIRTIO_MMIO_MAX_DEVICES);
    return free_isa_gsis[index];
}

static uint64_t offered_features(const struct virtio_mmio *t)
{
    return t->ops->features | (1ull << VIRTIO_F_VERSION_1);
}

static struct virtq *selected_queue(struct virtio_mmio *t)
{
    return t->queue_sel < t->ops->nqueues ? &t->queues[t->queue_sel] : NULL;
}

bool virtio_mmio_is_active(const struct virtio_mmio *t)
{
    return (t->status & VIRTIO_CONFIG_S_DRIVER_OK) && !(t->status & VIRTIO_CONFIG_S_NEEDS_RESET);
}

static void set_irq(struct virtio_mmio *t)
{
    if (t->irq_fd >= 0) {
        uint64_t one = 1;
        if (write(t->irq_fd, &one, sizeof one) < 0)
            g_warning("%s: irqfd write failed: %s", t->ops->name, g_strerror(errno));
        return;
    }
    /* No irqfd: pulse the line, which an edge-triggered pin latches. */
    t->host.set_irq_level(t->host.opaque, t->gsi, true);
    t->host.set_irq_level(t->host.opaque, t->gsi, false);
}

void virtio_mmio_signal_used(struct virtio_mmio *t, struct virtq *q)
{
    if (virtq_interrupt_suppressed(q))
        return;
    t->interrupt_status |= VIRTIO_MMIO_INT_VRING;
    set_irq(t);
}

void virtio_mmio_signal_config(struct virtio_mmio *t)
{
    t->interrupt_status |= VIRTIO_MMIO_INT_CONFIG;
    set_irq(t);
}

bool virtio_mmio_take_notify(struct virtio_mmio *t, unsigned queue)
{
    uint64_t count;
    return read(t->notify_fd[queue], &count, sizeof count) == sizeof count;
}

/* The driver reports an unusable configuration: tell it through NEEDS_RESET
 * (spec 2.1.2) and the log; the VM itself goes on. */
static void device_failed(struct virtio_mmio *t, const char *what)
{
    g_warning("%s: guest driver error: %s; device needs reset", t->ops->name, what);
    t->status |= VIRTIO_CONFIG_S_NEEDS_RESET;
    virtio_mmio_signal_config(t);
}

static void reset_device(struct virtio_mmio *t)
{
    t->ops->reset(t->opaque);
    t->status = 0;
    t->device_features_sel = t->driver_features_sel = 0;
    t->driver_features = 0;
    t->queue_sel = 0;
    t->interrupt_status = 0;
    for (unsigned i = 0; i < t->ops->nqueues; i++)
        virtq_reset(&t->queues[i], &t->host);
}

static uint32_t read_register(struct virtio_mmio *t, uint64_t offset)
{
    struct virtq *q = selected_queue(t);
    switch (offset) {
    case VIRTIO_MMIO_MAGIC_VALUE: return VIRTIO_MMIO_MAGIC;
    case VIRTIO_MMIO_VERSION: return VIRTIO_MMIO_VERSION_MODERN;
    case VIRTIO_MMIO_DEVICE_ID: return t->ops->device_id;
    case VIRTIO_MMIO_VENDOR_ID: return VIRTIO_VENDOR_ID;
    case VIRTIO_MMIO_DEVICE_FEATURES:
        return t->device_features_sel > 1 ? 0
             : (uint32_t)(offered_features(t) >> (32 * t->device_features_sel));
    case VIRTIO_MMIO_QUEUE_NUM_MAX: return q ? t->ops->queue_size_max : 0;
    case VIRTIO_MMIO_QUEUE_READY: return q ? q->ready : 0;
    case VIRTIO_MMIO_INTERRUPT_STATUS: return t->interrupt_status;
    case VIRTIO_MMIO_STATUS: return t->status;
    case VIRTIO_MMIO_CONFIG_GENERATION: return t->config_generation;
    default: return 0; /* write-only or reserved registers read as zero */
    }
}

static void set_queue_address(struct virtq *q, uint64_t *field, bool high, uint32_t value)
{
    if (!q || q->ready)
        return; /* the spec forbids changing a live queue; ignore it */
    if (high)
        *field = (*field & 0xffffffffull) | ((uint64_t)value << 32);
    else
        *field = (*field & ~0xffffffffull) | value;
}

static void set_queue_ready(struct virtio_mmio *t, struct virtq *q, uint32_t value)
{
    if (!q)
        return;
    if (!value) {
        q->ready = false;
        return;
    }
    g_autoptr(GError) error = NULL;
    if (q->size > t->ops->queue_size_max) {
        g_autofree char *what = g_strdup_printf("queue size %u is above QueueNumMax %u", q->size,
                                                t->ops->queue_size_max);
        device_failed(t, what);
        return;
    }
    if (!virtq_validate(q, &error)) {
        device_failed(t, error->message);
        return;
    }
    q->ready = true;
}

static void write_features(struct virtio_mmio *t, uint32_t value)
{
    if (t->driver_features_sel > 1 || (t->status & VIRTIO_CONFIG_S_FEATURES_OK))
        return;
    unsigned shift = 32 * t->driver_features_sel;
    t->driver_features = (t->driver_features & ~(0xffffffffull << shift)) | ((uint64_t)value << shift);
}

static void write_status(struct virtio_mmio *t, uint32_t value)
{
    if (value == 0) {
        reset_device(t);
        return;
    }
    uint32_t added = value & ~t->status;
    if (added & VIRTIO_CONFIG_S_FEATURES_OK) {
        /* Only a modern driver taking a subset of what we offer may go on;
         * FEATURES_OK stays clear otherwise, which the driver must check. */
        bool subset = (t->driver_features & ~offered_features(t)) == 0;
        bool modern = t->driver_features & (1ull << VIRTIO_F_VERSION_1);
        if (!subset || !modern)
            value &= ~VIRTIO_CONFIG_S_FEATURES_OK;
    }
    bool was_active = virtio_mmio_is_active(t);
    t->status = value | (t->status & VIRTIO_CONFIG_S_NEEDS_RESET);
    if ((added & VIRTIO_CONFIG_S_DRIVER_OK) && !was_active && virtio_mmio_is_active(t)) {
        if (!(t->status & VIRTIO_CONFIG_S_FEATURES_OK))
            device_failed(t, "DRIVER_OK without FEATURES_OK");
        else
            t->ops->activate(t->opaque);
    }
}

static void write_register(struct virtio_mmio *t, uint64_t offset, uint32_t value)
{
    struct virtq *q = selected_queue(t);
    switch (offset) {
    case VIRTIO_MMIO_DEVICE_FEATURES_SEL: t->device_features_sel = value; break;
    case VIRTIO_MMIO_DRIVER_FEATURES: write_features(t, value); break;
    case VIRTIO_MMIO_DRIVER_FEATURES_SEL: t->driver_features_sel = value; break;
    case VIRTIO_MMIO_QUEUE_SEL: t->queue_sel = value; break;
    case VIRTIO_MMIO_QUEUE_NUM:
        if (q && !q->ready)
            q->size = value;
        break;
    case VIRTIO_MMIO_QUEUE_READY: set_queue_ready(t, q, value); break;
    case VIRTIO_MMIO_QUEUE_NOTIFY:
        /* Only reached when KVM_IOEVENTFD was refused. */
        if (value < t->ops->nqueues) {
            uint64_t one = 1;
            if (write(t->notify_fd[value], &one, sizeof one) < 0)
                g_warning("%s: notify eventfd: %s", t->ops->name, g_strerror(errno));
        }
        break;
    case VIRTIO_MMIO_INTERRUPT_ACK: t->interrupt_status &= ~value; break;
    case VIRTIO_MMIO_STATUS: write_status(t, value); break;
    case VIRTIO_MMIO_QUEUE_DESC_LOW: set_queue_address(q, q ? &q->desc_gpa : NULL, false, value); break;
    case VIRTIO_MMIO_QUEUE_DESC_HIGH: set_queue_address(q, q ? &q->desc_gpa : NULL, true, value); break;
    case VIRTIO_MMIO_QUEUE_AVAIL_LOW: set_queue_address(q, q ? &q->avail_gpa : NULL, false, value); break;
    case VIRTIO_MMIO_QUEUE_AVAIL_HIGH: set_queue_address(q, q ? &q->avail_gpa : NULL, true, value); break;
    case VIRTIO_MMIO_QUEUE_USED_LOW: set_queue_address(q, q ? &q->used_gpa : NULL, false, value); break;
    case VIRTIO_MMIO_QUEUE_USED_HIGH: set_queue_address(q, q ? &q->used_gpa : NULL, true, value); break;
    default: break; /* read-only or reserved: ignored, as real devices do */
    }
}

static void mmio_read(void *opaque, uint64_t offset, uint8_t *data, unsigned len)
{
    struct virtio_mmio *t = opaque;
    g_mutex_lock(&t->lock);
    if (offset >= VIRTIO_MMIO_CONFIG_OFFSET) {
        t->ops->read_config(t->opaque, offset - VIRTIO_MMIO_CONFIG_OFFSET, data, len);
    } else if (len == 4 && offset % 4 == 0) {
        uint32_t value = read_register(t, offset);
        memcpy(data, &value, 4);
    } else {
        memset(data, 0xff, len); /* registers are 32-bit only (spec 4.2.2) */
    }
    g_mutex_unlock(&t->lock);
}

static void mmio_write(void *opaque, uint64_t offset, const uint8_t *data, unsigned len)
{
    struct virtio_mmio *t = opaque;
    if (offset >= VIRTIO_MMIO_CONFIG_OFFSET || len != 4 || offset % 4 != 0)
        return; /* the vsock config space is read-only; other widths are invalid */
    uint32_t value;
    memcpy(&value, data, 4);
    g_mutex_lock(&t->lock);
    write_register(t, offset, value);
    g_mutex_unlock(&t->lock);
}

static const struct bus_ops virtio_mmio_bus_ops = {
    .read = mmio_read,
    .write = mmio_write,
};

/* Bind queue i's eventfd to QueueNotify writes of value i inside KVM. */
static bool bind_ioeventfd(struct virtio_mmio *t, unsigned i, bool assign)
{
    return t->host.bind_ioeventfd(t->host.opaque, t->notify_fd[i], t->base + VIRTIO_MMIO_QUEUE_NOTIFY, 4, i,
                                  assign);
}

static bool bind_irqfd(struct virtio_mmio *t, bool assign)
{
    return t->host.bind_irqfd(t->host.opaque, t->irq_fd, t->gsi, assign);
}

static bool open_eventfds(struct virtio_mmio *t, GError **error)
{
    t->notify_in_kernel = true;
    for (unsigned i = 0; i < t->ops->nqueues; i++) {
        t->notify_fd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (t->notify_fd[i] < 0) {
            g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
                        "%s: cannot create a queue eventfd: %s", t->ops->name, g_strerror(errno));
            return false;
        }
        if (t->notify_in_kernel && !bind_ioeventfd(t, i, true)) {
            g_message("%s: KVM_IOEVENTFD refused (%s): queue notifications take the MMIO exit",
                      t->ops->name, g_strerror(errno));
            for (unsigned j = 0; j < i; j++)
                bind_ioeventfd(t, j, false);
            t->notify_in_kernel = false;
        }
    }
    t->irq_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->irq_fd >= 0 && !bind_irqfd(t, true)) {
        g_message("%s: KVM_IRQFD refused (%s): interrupts use KVM_IRQ_LINE", t->ops->name,
                  g_strerror(errno));
        close(t->irq_fd);
        t->irq_fd = -1;
    }
    return true;
}

bool virtio_mmio_init(struct virtio_mmio *t, const struct virtio_host *host, unsigned index,
                      const struct virtio_device_ops *ops, void *opaque, GError **error)
{
    memset(t, 0, sizeof *t);
    g_mutex_init(&t->lock);
    for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
        t->notify_fd[i] = -1;
    t->irq_fd = -1;
    if (index >= VIRTIO_MMIO_MAX_DEVICES) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_NO_SPACE, "%s: virtio-mmio device %u: only %u fit", ops->name,
                    index, VIRTIO_MMIO_MAX_DEVICES);
        return false;
    }
    t->host = *host;
    t->base = MMIO_VIRTIO_BASE + index * MMIO_VIRTIO_STRIDE;
    t->gsi = virtio_mmio_gsi(index);
    t->ops = ops;
    t->opaque = opaque;
    t->irq_fd = -1;
    for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++) {
        t->notify_fd[i] = -1;
        virtq_reset(&t->queues[i], &t->host);
    }
    g_assert(ops->nqueues <= VIRTIO_MMIO_MAX_QUEUES);
    if (!open_eventfds(t, error))
        return false;
    if (!bus_register(t->host.mmio, t->base, MMIO_VIRTIO_STRIDE, &virtio_mmio_bus_ops, t,
                      ops->name)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_EXISTS,
                    "%s: MMIO range 0x%" G_GINT64_MODIFIER "x is already taken", ops->name, t->base);
        return false;
    }
    return true;
}

void virtio_mmio_release(struct virtio_mmio *t)
{
    for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++) {
        if (t->notify_fd[i] < 0)
            continue;
        if (t->notify_in_kernel)
            bind_ioeventfd(t, i, false);
        close(t->notify_fd[i]);
        t->notify_fd[i] = -1;
    }
    if (t->irq_fd >= 0) {
        bind_irqfd(t, false);
        close(t->irq_fd);
        t->irq_fd = -1;
    }
    g_mutex_clear(&t->lock);
}

char *virtio_mmio_cmdline_entry(const struct virtio_mmio *t)
{
    return g_strdup_printf("virtio_mmio.device=4K@0x%" G_GINT64_MODIFIER "x:%u", t->base, t->gsi);
}

/* ---- snapshot state ---- */

void virtio_mmio_save_state(const struct virtio_mmio *t, JsonBuilder *b)
{
    vjson_object_begin(b, NULL);
    vjson_uint(b, "status", t->status);
    vjson_uint(b, "device_features_sel", t->device_features_sel);
    vjson_uint(b, "driver_features_sel", t->driver_features_sel);
    vjson_uint(b, "driver_features_lo", (uint32_t)t->driver_features);
    vjson_uint(b, "driver_features_hi", (uint32_t)(t->driver_features >> 32));
    vjson_uint(b, "queue_sel", t->queue_sel);
    vjson_uint(b, "interrupt_status", t->interrupt_status);
    vjson_uint(b, "config_generation", t->config_generation);
    vjson_array_begin(b, "queues");
    for (unsigned i = 0; i < t->ops->nqueues; i++) {
        const struct virtq *q = &t->queues[i];
        vjson_object_begin(b, NULL);
        vjson_uint(b, "size", q->size);
        vjson_uint(b, "ready", q->ready);
        vjson_uint(b, "desc_gpa", q->desc_gpa);
        vjson_uint(b, "avail_gpa", q->avail_gpa);
        vjson_uint(b, "used_gpa", q->used_gpa);
        vjson_uint(b, "last_avail_idx", q->last_avail_idx);
        vjson_uint(b, "used_idx", q->used_idx);
        vjson_object_end(b);
    }
    vjson_array_end(b);
    vjson_object_end(b);
}

static bool get_int(JsonObject *obj, const char *name, uint64_t max, uint64_t *out, GError **error)
{
    JsonNode *node = json_object_get_member(obj, name);
    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64 ||
        json_node_get_int(node) < 0 || (uint64_t)json_node_get_int(node) > max) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                    "virtio-mmio state: \"%s\" is missing or out of range", name);
        return false;
    }
    *out = (uint64_t)json_node_get_int(node);
    return true;
}

static bool restore_queue(struct virtq *q, JsonObject *obj, unsigned index, uint16_t size_max, GError **error)
{
    uint64_t size, ready, desc, avail, used, last_avail, used_idx;
    if (!get_int(obj, "size", size_max, &size, error) || !get_int(obj, "ready", 1, &ready, error) ||
        !get_int(obj, "desc_gpa", G_MAXINT64, &desc, error) || !get_int(obj, "avail_gpa", G_MAXINT64, &avail, error) ||
        !get_int(obj, "used_gpa", G_MAXINT64, &used, error) ||
        !get_int(obj, "last_avail_idx", G_MAXUINT16, &last_avail, error) ||
        !get_int(obj, "used_idx", G_MAXUINT16, &used_idx, error))
        return false;
    q->size = (uint16_t)size;
    q->desc_gpa = desc;
    q->avail_gpa = avail;
    q->used_gpa = used;
    q->last_avail_idx = (uint16_t)last_avail;
    q->used_idx = (uint16_t)used_idx;
    q->ready = false;
    if (ready && !virtq_validate(q, error)) {
        g_prefix_error(error, "virtio-mmio state: queue %u: ", index);
        return false;
    }
    q->ready = ready;
    return true;
}

bool virtio_mmio_restore_state(struct virtio_mmio *t, JsonObject *obj, GError **error)
{
    uint64_t status, dfs, drfs, lo, hi, sel, isr, gen;
    if (!get_int(obj, "status", 0xff, &status, error) || !get_int(obj, "device_features_sel", G_MAXUINT32, &dfs, error) ||
        !get_int(obj, "driver_features_sel", G_MAXUINT32, &drfs, error) ||
        !get_int(obj, "driver_features_lo", G_MAXUINT32, &lo, error) ||
        !get_int(obj, "driver_features_hi", G_MAXUINT32, &hi, error) ||
        !get_int(obj, "queue_sel", G_MAXUINT32, &sel, error) ||
        !get_int(obj, "interrupt_status", G_MAXUINT32, &isr, error) ||
        !get_int(obj, "config_generation", G_MAXUINT32, &gen, error))
        return false;
    JsonNode *node = json_object_get_member(obj, "queues");
    JsonArray *queues = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    if (!queues || json_array_get_length(queues) != t->ops->nqueues) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                    "virtio-mmio state: %s needs %u queues", t->ops->name, t->ops->nqueues);
        return false;
    }
    for (unsigned i = 0; i < t->ops->nqueues; i++) {
        JsonNode *qn = json_array_get_element(queues, i);
        if (!JSON_NODE_HOLDS_OBJECT(qn)) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "virtio-mmio state: queue %u is not an object", i);
            return false;
        }
        if (!restore_queue(&t->queues[i], json_node_get_object(qn), i, t->ops->queue_size_max, error))
            return false;
    }
    t->device_features_sel = (uint32_t)dfs;
    t->driver_features_sel = (uint32_t)drfs;
    t->driver_features = lo | (hi << 32);
    t->queue_sel = (uint32_t)sel;
    t->interrupt_status = (uint32_t)isr;
    t->config_generation = (uint32_t)gen;
    t->status = (uint32_t)status;
    if (virtio_mmio_is_active(t))
        t->ops->activate(t->opaque);
    return true;
}
