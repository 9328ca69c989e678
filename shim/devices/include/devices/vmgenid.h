/* The VM Generation ID (Microsoft's "Virtual Machine Generation ID" spec, as
 * Hyper-V, QEMU and Firecracker give it): 16 random bytes in guest RAM at
 * BOOT_VMGENID_ADDR, which the DSDT's VGEN device (_HID "VMGENCTR", method
 * ADDR) points at. A new id is written on every restore, so two clones of one
 * snapshot, and a guest restored twice, each see a different one; then GPE 0
 * tells the guest (\_GPE._E00 notifies VGEN), and Linux 5.18 and later
 * reseed their RNG from it (Linux's drivers/virt/vmgenid.c), so a restored
 * VM never continues its snapshot's random state.
 *
 * Writing into guest RAM goes through the host's mark_dirty, as a virtio
 * device's writes do: a diff snapshot must carry the new id.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

struct guest_memory;

struct vmgenid_host {
    struct guest_memory *mem;
    void (*mark_dirty)(void *opaque, uint64_t gpa, uint64_t len);
    void (*notify)(void *opaque); /* raise the generation-changed GPE */
    void *opaque;
};

struct vmgenid;

struct vmgenid *vmgenid_new(const struct vmgenid_host *host);
void vmgenid_free(struct vmgenid *dev);

/* A fresh random id into guest RAM; with notify_guest, tell the guest (after
 * a restore; a booting guest reads the id when its driver starts). */
bool vmgenid_new_generation(struct vmgenid *dev, bool notify_guest, GError **error);

/* vm.info's vsnap.vmgenid: {"id": "<32 hex, the bytes in guest RAM>", "address": gpa, "generations": n}. */
void vmgenid_add_info(struct vmgenid *dev, JsonBuilder *b);
