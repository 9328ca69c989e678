/* The disks' part of vm.snapshot and vm.restore (the format is the snapshot
 * library's: common/snapshot/disk.h, overlay.h).
 *
 * vm.snapshot, disks paused: disk_layers_seal writes each writable disk's
 * layer into the partial directory (its overlay sealed, or at the disk's
 * first snapshot an empty layer over the image, fsynced, whose identity is
 * recorded), creates the next empty overlay in the work directory and opens
 * the disk on both; disk_layers_add_records puts the records into
 * state.json; once the directory committed, disk_layers_switch moves each
 * disk onto what the seal opened (the old overlay is removed), which cannot
 * fail. disk_layers_abort undoes the seal when the snapshot fails: the disks
 * stay as they were.
 *
 * vm.restore: disk_layers_for_restore resolves and verifies each disk's
 * chain and points the config at it with a fresh overlay in the work
 * directory, before the VM is built. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "config/vm-config.h"
#include "persist/persist-error.h"
#include "snapshot/directory.h"
#include "core/vm.h"

struct disk_layers;

/* steps (may be NULL): each overlay sealed in steps, which a cancel ends. */
struct snap_steps;
struct disk_layers *disk_layers_seal(struct vm *vm, struct vm_config *cfg, const char *partial,
                                     const struct snap_steps *steps, GError **error);
void disk_layers_add_records(const struct disk_layers *dl, JsonNode *state);
/* After the commit of dest: every disk moves onto its new layer and overlay,
 * opened at the seal (a disk that could not be opened there failed the
 * seal, and so the snapshot). Frees dl. */
void disk_layers_switch(struct disk_layers *dl, struct vm *vm, struct vm_config *cfg, const char *dest);
/* The snapshot failed: remove the new overlays. Frees dl; NULL is fine. */
void disk_layers_abort(struct disk_layers *dl);

/* Point cfg's disks at the chains top holds (each verified: layers, ids,
 * parents, sizes, the image's identity), each with a new overlay path in
 * work_dir (NULL: a new private directory). A read-only disk has no layer
 * and runs on its image; a writable disk without a layer, or a read-only one
 * with a layer, is refused. Errors name the file (PERSIST_ERROR_INVALID). */
bool disk_layers_for_restore(const struct snap_dir *top, struct vm_config *cfg, const char *work_dir,
                             GError **error);
/* A restore failed: remove the overlays it created. */
void disk_layers_discard_overlays(const struct vm_config *cfg);
