/* The GSI routing that makes the MP table and MADT true: like a PC chipset,
 * the PIT (GSI 0) reaches IOAPIC pin 2 while the 8259 still sees it as IRQ 0.
 */
#include <errno.h>
#include <linux/kvm.h>
#include <string.h>
#include <sys/ioctl.h>

#include "boot-internal.h"

#define PIC_PINS 8
#define ISA_IRQS 16
#define MAX_ROUTES (ISA_IRQS + BOOT_IOAPIC_PINS)

static void add_route(struct kvm_irq_routing *table, uint32_t gsi, uint32_t chip, uint32_t pin)
{
    struct kvm_irq_routing_entry *e = &table->entries[table->nr++];
    memset(e, 0, sizeof *e);
    e->gsi = gsi;
    e->type = KVM_IRQ_ROUTING_IRQCHIP;
    e->u.irqchip.irqchip = chip;
    e->u.irqchip.pin = pin;
}

static void build_routes(struct kvm_irq_routing *table)
{
    for (uint32_t gsi = 0; gsi < ISA_IRQS; gsi++) {
        if (gsi == 2)
            continue; /* the cascade between the two 8259s */
        uint32_t pic = gsi < PIC_PINS ? KVM_IRQCHIP_PIC_MASTER : KVM_IRQCHIP_PIC_SLAVE;
        add_route(table, gsi, pic, gsi % PIC_PINS);
    }
    for (uint32_t gsi = 0; gsi < BOOT_IOAPIC_PINS; gsi++) {
        if (gsi == 2)
            continue;
        add_route(table, gsi, KVM_IRQCHIP_IOAPIC, gsi == 0 ? BOOT_PIT_IOAPIC_PIN : gsi);
    }
}

bool boot_set_irq_routing(int vm_fd, GError **error)
{
    struct kvm_irq_routing *table =
        g_malloc0(sizeof *table + MAX_ROUTES * sizeof(struct kvm_irq_routing_entry));
    build_routes(table);
    bool ok = ioctl(vm_fd, KVM_SET_GSI_ROUTING, table) == 0;
    if (!ok)
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_KVM, "KVM_SET_GSI_ROUTING failed: %s", g_strerror(errno));
    g_free(table);
    return ok;
}
