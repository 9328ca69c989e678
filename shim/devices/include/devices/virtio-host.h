/* What a virtio device gets from the VM it sits in. The VM (vm.c) fills this
 * in and hands it to the device, which never calls the VM itself: the same
 * injection serial, i8042 and acpi-pm get through bus.h's struct irq_line.
 *
 * Every callback gets `opaque`. The struct must outlive the device.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct bus;
struct guest_memory;

struct virtio_host {
    struct bus *mmio;          /* where the transport registers its registers */
    struct guest_memory *mem;  /* guest RAM: rings and buffers (memory.h) */
    /* Every byte the device writes into guest RAM: KVM's dirty log only sees
     * the guest's own writes, and a diff snapshot must not miss a used ring
     * update or a received packet. */
    void (*mark_dirty)(void *opaque, uint64_t gpa, uint64_t len);
    /* Drive a GSI's level, for interrupts when KVM refuses an irqfd. */
    void (*set_irq_level)(void *opaque, unsigned gsi, bool level);
    /* KVM_IOEVENTFD: KVM signals fd when the guest writes datamatch (len
     * bytes) to addr, without a vCPU exit to userspace. KVM_IRQFD: writing fd
     * raises gsi. false with errno set when refused (or undone). */
    bool (*bind_ioeventfd)(void *opaque, int fd, uint64_t addr, unsigned len, uint64_t datamatch,
                           bool assign);
    bool (*bind_irqfd)(void *opaque, int fd, unsigned gsi, bool assign);
    void *opaque;
};
