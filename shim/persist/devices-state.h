/* Device state in state.json ("devices": serial, i8042, acpi_pm, vsock,
 * console, disks): each
 * device saves and restores its own state through functions in its own file
 * (devices/); this file only knows which devices the VM has. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

struct vm;

/* Hold every device still (no writes into guest RAM or disk images, nothing
 * in flight) while a snapshot is taken; false if a disk did not go idle. */
bool devices_quiesce(struct vm *vm, GError **error);
void devices_unquiesce(struct vm *vm);
/* devices_unquiesce in two steps (a live snapshot: every device but the
 * disks runs on with the vCPUs, the disks once the snapshot is committed). */
void devices_unquiesce_all_but_disks(struct vm *vm);
void devices_unquiesce_disks(struct vm *vm);
/* Member "devices"; between quiesce and unquiesce. */
void devices_state_save(struct vm *vm, JsonBuilder *b);
bool devices_state_restore(struct vm *vm, JsonObject *root, GError **error);
/* After a restore: a new VM generation ID (the guest reseeds its RNG, and
 * two clones differ), and tell the guest its vsock connections are gone
 * (VIRTIO_VSOCK_EVENT_TRANSPORT_RESET), so it reconnects and says READY again. */
bool devices_after_restore(struct vm *vm, GError **error);
