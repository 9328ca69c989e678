#include "virtio.h"

#include <stddef.h>

#include "layout.h"
#include "libc.h"

/* Register offsets (virtio spec 4.2.2). */
#define REG_MAGIC 0x000
#define REG_VERSION 0x004
#define REG_DEVICE_ID 0x008
#define REG_DEVICE_FEATURES 0x010
#define REG_DEVICE_FEATURES_SEL 0x014
#define REG_DRIVER_FEATURES 0x020
#define REG_DRIVER_FEATURES_SEL 0x024
#define REG_QUEUE_SEL 0x030
#define REG_QUEUE_NUM_MAX 0x034
#define REG_QUEUE_NUM 0x038
#define REG_QUEUE_READY 0x044
#define REG_QUEUE_NOTIFY 0x050
#define REG_INTERRUPT_STATUS 0x060
#define REG_INTERRUPT_ACK 0x064
#define REG_STATUS 0x070
#define REG_QUEUE_DESC_LOW 0x080
#define REG_QUEUE_DESC_HIGH 0x084
#define REG_QUEUE_AVAIL_LOW 0x090
#define REG_QUEUE_AVAIL_HIGH 0x094
#define REG_QUEUE_USED_LOW 0x0a0
#define REG_QUEUE_USED_HIGH 0x0a4
#define REG_CONFIG 0x100

#define STATUS_ACKNOWLEDGE 1u
#define STATUS_DRIVER 2u
#define STATUS_DRIVER_OK 4u
#define STATUS_FEATURES_OK 8u

#define VRING_AVAIL_F_NO_INTERRUPT 1u
#define VRING_USED_F_NO_NOTIFY 1u
#define VIRTIO_F_VERSION_1_HIGH_BIT 0 /* feature bit 32: bit 0 of the high word */

static uint32_t reg_read(const struct virtio_dev *dev, unsigned offset)
{
    return *(volatile uint32_t *)(dev->regs + offset);
}

static void reg_write(const struct virtio_dev *dev, unsigned offset, uint32_t value)
{
    *(volatile uint32_t *)(dev->regs + offset) = value;
}

static bool probe(uint64_t base, uint32_t device_id, struct virtio_dev *dev)
{
    dev->regs = (volatile uint8_t *)(uintptr_t)base;
    if (reg_read(dev, REG_MAGIC) != VIRTIO_MMIO_MAGIC || reg_read(dev, REG_VERSION) != 2)
        return false;
    dev->device_id = reg_read(dev, REG_DEVICE_ID);
    return dev->device_id == device_id;
}

/* Parse the hex number after "@0x" in "virtio_mmio.device=4K@0xd0000000:5". */
static bool next_cmdline_base(const char **cursor, uint64_t *base)
{
    static const char key[] = "virtio_mmio.device=";
    for (const char *p = *cursor; *p; p++) {
        size_t i = 0;
        while (key[i] && p[i] == key[i])
            i++;
        if (key[i])
            continue;
        const char *at = p + i;
        while (*at && *at != '@' && *at != ' ')
            at++;
        if (*at != '@')
            continue;
        const char *end = at + 1;
        while (*end && *end != ':' && *end != ' ')
            end++;
        *cursor = end;
        if (parse_u64(at + 1, (size_t)(end - at - 1), base))
            return true;
    }
    return false;
}

/* Only devices the command line names are probed: the shim declares each one
 * there (as Linux needs), and probing empty MMIO would cost exits and fill
 * the VMM's log with unmapped accesses. */
bool virtio_find_nth(const char *cmdline, uint32_t device_id, unsigned n, struct virtio_dev *dev)
{
    const char *cursor = cmdline;
    uint64_t base;
    while (next_cmdline_base(&cursor, &base))
        if (base >= GUEST_MMIO_BASE && base < GUEST_MMIO_END && probe(base, device_id, dev) && n-- == 0)
            return true;
    return false;
}

bool virtio_find(const char *cmdline, uint32_t device_id, struct virtio_dev *dev)
{
    return virtio_find_nth(cmdline, device_id, 0, dev);
}

bool virtio_negotiate(struct virtio_dev *dev)
{
    uint32_t accepted;
    return virtio_negotiate_features(dev, 0, &accepted);
}

bool virtio_negotiate_features(struct virtio_dev *dev, uint32_t wanted, uint32_t *accepted)
{
    reg_write(dev, REG_STATUS, 0);
    reg_write(dev, REG_STATUS, STATUS_ACKNOWLEDGE);
    reg_write(dev, REG_STATUS, STATUS_ACKNOWLEDGE | STATUS_DRIVER);
    reg_write(dev, REG_DEVICE_FEATURES_SEL, 1);
    if (!(reg_read(dev, REG_DEVICE_FEATURES) & (1u << VIRTIO_F_VERSION_1_HIGH_BIT)))
        return false;
    *accepted = 0;
    if (wanted) { /* each register access is an exit: skip what is not needed */
        reg_write(dev, REG_DEVICE_FEATURES_SEL, 0);
        *accepted = reg_read(dev, REG_DEVICE_FEATURES) & wanted;
    }
    reg_write(dev, REG_DRIVER_FEATURES_SEL, 0);
    reg_write(dev, REG_DRIVER_FEATURES, *accepted);
    reg_write(dev, REG_DRIVER_FEATURES_SEL, 1);
    reg_write(dev, REG_DRIVER_FEATURES, 1u << VIRTIO_F_VERSION_1_HIGH_BIT);
    uint32_t status = STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK;
    reg_write(dev, REG_STATUS, status);
    return reg_read(dev, REG_STATUS) & STATUS_FEATURES_OK;
}

bool virtio_setup_queue(struct virtio_dev *dev, struct vq *q, uint16_t index, uint16_t size,
                        struct vring_desc *desc, volatile uint16_t *avail,
                        volatile uint16_t *used)
{
    reg_write(dev, REG_QUEUE_SEL, index);
    uint32_t max = reg_read(dev, REG_QUEUE_NUM_MAX);
    if (max == 0 || max < size)
        return false;
    q->size = size;
    q->index = index;
    q->desc = desc;
    q->avail = avail;
    q->used = used;
    q->avail_idx = q->last_used = 0;
    q->pending_notify = false;
    avail[0] = VRING_AVAIL_F_NO_INTERRUPT; /* polled: never interrupt us */
    avail[1] = 0;
    uint64_t d = (uintptr_t)desc, a = (uintptr_t)avail, u = (uintptr_t)used;
    reg_write(dev, REG_QUEUE_NUM, size);
    reg_write(dev, REG_QUEUE_DESC_LOW, (uint32_t)d);
    reg_write(dev, REG_QUEUE_DESC_HIGH, (uint32_t)(d >> 32));
    reg_write(dev, REG_QUEUE_AVAIL_LOW, (uint32_t)a);
    reg_write(dev, REG_QUEUE_AVAIL_HIGH, (uint32_t)(a >> 32));
    reg_write(dev, REG_QUEUE_USED_LOW, (uint32_t)u);
    reg_write(dev, REG_QUEUE_USED_HIGH, (uint32_t)(u >> 32));
    reg_write(dev, REG_QUEUE_READY, 1);
    return reg_read(dev, REG_QUEUE_READY) == 1;
}

void virtio_driver_ok(struct virtio_dev *dev)
{
    reg_write(dev, REG_STATUS, reg_read(dev, REG_STATUS) | STATUS_DRIVER_OK);
}

uint32_t virtio_status(struct virtio_dev *dev)
{
    return reg_read(dev, REG_STATUS);
}

uint32_t virtio_config_read32(struct virtio_dev *dev, unsigned offset)
{
    return reg_read(dev, REG_CONFIG + offset);
}

uint64_t virtio_config_read64(struct virtio_dev *dev, unsigned offset)
{
    uint64_t lo = reg_read(dev, REG_CONFIG + offset);
    uint64_t hi = reg_read(dev, REG_CONFIG + offset + 4);
    return hi << 32 | lo;
}

void vq_publish(struct vq *q, uint16_t head)
{
    q->avail[2 + q->avail_idx % q->size] = head;
    q->avail_idx++;
    /* x86 keeps stores in order; the compiler must too: entry before index. */
    __atomic_store_n(&q->avail[1], q->avail_idx, __ATOMIC_RELEASE);
    q->pending_notify = true;
}

bool vq_take_used(struct vq *q, struct vring_used_elem *elem)
{
    uint16_t used_idx = __atomic_load_n(&q->used[1], __ATOMIC_ACQUIRE);
    if (used_idx == q->last_used)
        return false;
    const volatile struct vring_used_elem *ring =
        (const volatile struct vring_used_elem *)(q->used + 2);
    elem->id = ring[q->last_used % q->size].id;
    elem->len = ring[q->last_used % q->size].len;
    q->last_used++;
    return true;
}

void vq_flush(struct virtio_dev *dev, struct vq *q)
{
    if (!q->pending_notify)
        return;
    /* Our avail index store must be visible before we read the device's
     * flag, or both sides could decide the other will act (store->load). */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    q->pending_notify = false;
    if (!(__atomic_load_n(&q->used[0], __ATOMIC_ACQUIRE) & VRING_USED_F_NO_NOTIFY))
        reg_write(dev, REG_QUEUE_NOTIFY, q->index);
}

bool virtio_take_config_change(struct virtio_dev *dev)
{
    if (!(reg_read(dev, REG_INTERRUPT_STATUS) & VIRTIO_INT_CONFIG))
        return false;
    reg_write(dev, REG_INTERRUPT_ACK, VIRTIO_INT_CONFIG);
    return true;
}
