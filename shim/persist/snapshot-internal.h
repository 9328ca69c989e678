/* What vm.snapshot's two ways (snapshot.c, a paused VM; live-snapshot.c, a
 * running one) share: the request's checks, state.json and config.json, the
 * partial directory, and the VM's record of its last snapshot. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "persist/persist.h"
#include "ram-snapshot/save.h"
#include "vm-persist.h"

/* The destination, and a diff's parent (its id into *parent). */
bool snapshot_check_request(struct vm *vm, const struct persist_snapshot_request *req, snap_id *parent,
                            GError **error);
/* state.json's members (the vCPUs', the VM's, the devices'): the VM held still. */
JsonNode *snapshot_state_json(struct vm *vm, const struct persist_snapshot_request *req, const snap_id *id,
                              const snap_id *parent, GError **error);
char *snapshot_config_json(const struct vm_config *cfg);
char *snapshot_partial_dir(const char *dest, GError **error);
/* A failed snapshot leaves nothing behind; if even that fails, it says so. */
void snapshot_remove_partial(const char *tmp);
/* dest committed: the VM's last snapshot is id (a full one is the new
 * reference of later diffs); result (may be NULL) gets the numbers. */
void snapshot_note_taken(struct persist_vm *p, const struct persist_snapshot_request *req, const char *dest,
                         const snap_id *id, const struct snap_save_stats *stats,
                         struct persist_snapshot_result *result);
