/* Driver side of virtio-mmio (virtio 1.x register layout) and split
 * virtqueues, for the test guest at CPL3.
 *
 * Polled: the guest runs with interrupts off, so every queue carries
 * VRING_AVAIL_F_NO_INTERRUPT and the guest reads the used rings itself. A
 * register access is a VM exit (~100 us here), so the driver notifies once per
 * batch, and only when the device asked for it (VRING_USED_F_NO_NOTIFY clear).
 * Rings and buffers are static, below 16 MiB, and guest-physical == virtual.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define VIRTIO_MMIO_MAGIC 0x74726976u

struct vring_desc {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
    uint16_t next;
};

#define VRING_DESC_F_NEXT 1
#define VRING_DESC_F_WRITE 2

struct vring_used_elem {
    uint32_t id;
    uint32_t len;
};

/* A queue of up to VQ_MAX entries. */
#define VQ_MAX 128

struct vq {
    uint16_t size;
    uint16_t index;           /* queue number on the device */
    struct vring_desc *desc;
    volatile uint16_t *avail; /* flags, idx, ring[size] */
    volatile uint16_t *used;  /* flags, idx, then elems */
    uint16_t avail_idx;       /* next avail slot the driver fills */
    uint16_t last_used;       /* next used entry the driver reads */
    bool pending_notify;      /* published chains the device was not told of */
};

struct virtio_dev {
    volatile uint8_t *regs;
    uint32_t device_id;
};

/* Find the first device of type device_id among those the command line
 * names (virtio_mmio.device=4K@<base>:<irq>) in the virtio-mmio window. */
bool virtio_find(const char *cmdline, uint32_t device_id, struct virtio_dev *dev);
/* The same for the n-th such device (0 = the first), in command-line order. */
bool virtio_find_nth(const char *cmdline, uint32_t device_id, unsigned n, struct virtio_dev *dev);

/* Reset, negotiate VERSION_1 only, up to FEATURES_OK. false if the device
 * refuses. */
bool virtio_negotiate(struct virtio_dev *dev);
/* The same, also taking those of the device's features 0-31 that are in
 * wanted; *accepted gets them. */
bool virtio_negotiate_features(struct virtio_dev *dev, uint32_t wanted, uint32_t *accepted);

/* Give queue index its rings (memory is static, caller's) and enable it. */
bool virtio_setup_queue(struct virtio_dev *dev, struct vq *q, uint16_t index, uint16_t size,
                        struct vring_desc *desc, volatile uint16_t *avail,
                        volatile uint16_t *used);

void virtio_driver_ok(struct virtio_dev *dev);
uint32_t virtio_status(struct virtio_dev *dev);
uint64_t virtio_config_read64(struct virtio_dev *dev, unsigned offset);
/* The device raised its configuration-change interrupt (InterruptStatus
 * bit 1, a disk resized): acknowledged, true. The guest polls; nothing else
 * acknowledges that bit. */
#define VIRTIO_INT_CONFIG 2u
bool virtio_take_config_change(struct virtio_dev *dev);
uint32_t virtio_config_read32(struct virtio_dev *dev, unsigned offset);

/* Publish a chain that starts at descriptor head (the caller filled it). */
void vq_publish(struct vq *q, uint16_t head);
/* Next used entry, if any. */
bool vq_take_used(struct vq *q, struct vring_used_elem *elem);
/* Ring the doorbell if chains were published and the device wants to hear. */
void vq_flush(struct virtio_dev *dev, struct vq *q);
