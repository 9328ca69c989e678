/* virtio-mmio transport, virtio 1.x ("version 2" register layout, virtio spec
 * 4.2.2), for devices placed in the MMIO window of shim/platform/include/platform/memory.h.
 *
 * Device number i sits at MMIO_VIRTIO_BASE + i * MMIO_VIRTIO_STRIDE with the
 * i-th free ISA interrupt line (5, 6, 7, 10, 11, 13, 14, 15: the others are
 * the PIT's, the serial port's, the RTC's, the SCI's and the i8042's; the MP
 * table and MADT describe ISA lines only) and is declared to Linux on the
 * kernel command line (virtio_mmio.device=4K@0xd0000000:5), as Firecracker
 * does: no ACPI or device tree is needed.
 *
 * Threads: register accesses arrive on vCPU threads; the device model runs on
 * its own thread. Both hold `lock` while they touch transport or queue state.
 * Queue notifications reach the device thread through one eventfd per queue,
 * bound to the QueueNotify register with KVM_IOEVENTFD (the write then never
 * leaves the kernel) or, if that is refused, signalled from the MMIO exit.
 * Interrupts go through KVM_IRQFD, or KVM_IRQ_LINE if irqfd is refused.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "devices/virtio-host.h"
#include "devices/virtio-queue.h"

#define VIRTIO_MMIO_MAX_DEVICES 8u /* one free ISA line each */
#define VIRTIO_MMIO_MAX_QUEUES 4u
#define VIRTIO_MMIO_CONFIG_OFFSET 0x100u

struct virtio_device_ops {
    const char *name;
    uint32_t device_id;
    uint64_t features; /* offered besides VIRTIO_F_VERSION_1, which the transport adds */
    unsigned nqueues;
    uint16_t queue_size_max;
    /* Device-specific configuration space (offset from 0x100). */
    void (*read_config)(void *opaque, uint64_t offset, uint8_t *data, unsigned len);
    /* The driver set DRIVER_OK: every ready queue has been validated. Called
     * with the transport lock held. */
    void (*activate)(void *opaque);
    /* The driver wrote 0 to Status (or the VM is being torn down): forget every
     * queue and connection. Called with the transport lock held. */
    void (*reset)(void *opaque);
};

struct virtio_mmio {
    GMutex lock;
    struct virtio_host host; /* a copy; the queues point at it */
    uint64_t base;
    unsigned gsi;
    const struct virtio_device_ops *ops;
    void *opaque;

    /* Register state; a snapshot of the transport is these plus the queues. */
    uint32_t status;
    uint32_t device_features_sel, driver_features_sel;
    uint64_t driver_features;
    uint32_t queue_sel;
    uint32_t interrupt_status;
    uint32_t config_generation;
    struct virtq queues[VIRTIO_MMIO_MAX_QUEUES];

    int notify_fd[VIRTIO_MMIO_MAX_QUEUES]; /* eventfds the device thread waits on */
    bool notify_in_kernel;                 /* KVM_IOEVENTFD accepted */
    int irq_fd;                            /* -1 when falling back to KVM_IRQ_LINE */
};

/* The GSI of device number index (< VIRTIO_MMIO_MAX_DEVICES). */
unsigned virtio_mmio_gsi(unsigned index);

/* Set the transport up for device number index (< VIRTIO_MMIO_MAX_DEVICES)
 * and register it on the host's MMIO bus. */
bool virtio_mmio_init(struct virtio_mmio *t, const struct virtio_host *host, unsigned index,
                      const struct virtio_device_ops *ops, void *opaque, GError **error);
/* Unbind eventfds and close them. The bus registration stays (the bus goes
 * with the VM). */
void virtio_mmio_release(struct virtio_mmio *t);

/* "virtio_mmio.device=4K@0xd0000000:5", to append to the guest command line. */
char *virtio_mmio_cmdline_entry(const struct virtio_mmio *t);

/* DRIVER_OK is set and the device has not failed: queues may be used. */
bool virtio_mmio_is_active(const struct virtio_mmio *t);

/* Tell the driver that q has new used buffers: InterruptStatus bit 0 and an
 * interrupt, unless the driver suppressed interrupts on q. Lock held. */
void virtio_mmio_signal_used(struct virtio_mmio *t, struct virtq *q);

/* Configuration changed (InterruptStatus bit 1). Lock held. */
void virtio_mmio_signal_config(struct virtio_mmio *t);

/* Consume the pending notification count of queue i (the eventfd is
 * non-blocking). Returns true if the driver notified since the last call. */
bool virtio_mmio_take_notify(struct virtio_mmio *t, unsigned queue);

/* Snapshot state: the registers above and every queue (the rings live in
 * guest RAM). Both with t->lock held. Restoring a live device re-activates it,
 * so the device looks at its queues again. */
void virtio_mmio_save_state(const struct virtio_mmio *t, JsonBuilder *b);
bool virtio_mmio_restore_state(struct virtio_mmio *t, JsonObject *obj, GError **error);
