/* vm.snapshot: config.json, state.json and the memory layer (full or diff)
 * into a temporary directory beside the destination, renamed into place once
 * everything is on disk. See persist.h. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "persist/persist.h"

#include <sys/stat.h>
#include <unistd.h>

#include "config/vm-config-json.h"
#include "platform/memory.h"
#include "cpu-state.h"
#include "devices-state.h"
#include "disk-layers.h"
#include "vm-persist.h"
#include "snapshot-internal.h"
#include "ram-snapshot/save.h"
#include "snapshot/directory.h"
#include "core/vm.h"
#include "json/vjson.h"

char *persist_path_from_url(const char *url, const char *field, GError **error)
{
    char *path = snap_dir_path_from_url(url, error);
    if (!path) {
        g_prefix_error(error, "%s: ", field);
        persist_error_adopt(error);
    }
    return path;
}

/* The destination must not exist, or be a directory holding none of the
 * snapshot's files (empty, or prepared by the caller: libvirt's ch driver
 * writes libvirt-save.xml there first). An existing snapshot is never
 * overwritten, since diffs taken on top of it would silently stop matching. */
static bool check_destination(const char *dest, GError **error)
{
    if (snap_dir_check_destination(dest, error))
        return true;
    g_prefix_error(error, "destination_url: ");
    persist_error_adopt(error);
    return false;
}

/* A diff holds the pages written since the VM's last snapshot (or restore),
 * so its parent must be exactly that snapshot. */
static bool check_parent(struct persist_vm *p, const char *parent_url, snap_id *parent_id, GError **error)
{
    if (!p->has_layer) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "a diff snapshot needs a parent, and this VM has neither taken nor been restored from one: "
                    "take a full snapshot first");
        return false;
    }
    g_autofree char *parent_dir = persist_path_from_url(parent_url, "parent_url", error);
    if (!parent_dir)
        return false;
    g_autoptr(snap_dir) parent = snap_dir_read(parent_dir, error);
    if (!parent) {
        persist_error_adopt(error);
        return false;
    }
    *parent_id = parent->memory.id;
    if (snap_id_equal(parent_id, &p->last_id))
        return true;
    char want[37], got[37];
    snap_id_to_string(&p->last_id, want);
    snap_id_to_string(parent_id, got);
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                "parent_url %s holds snapshot %s, but this VM's last snapshot is %s: a diff can only "
                "follow the VM's last snapshot", parent_url, got, want);
    return false;
}

JsonNode *snapshot_state_json(struct vm *vm, const struct persist_snapshot_request *req, const snap_id *id,
                                  const snap_id *parent, GError **error)
{
    struct snap_memory_record memory = {
        .layer = SNAP_DIR_LAYER_FILE, .diff = req->diff, .id = *id, .parent_id = *parent,
        .parent_url = (char *)req->parent_url, .ram_size = vm_memory(vm)->size,
    };
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    snap_state_add_record(b, &memory);
    bool ok = cpu_state_save(vm, b, error);
    if (ok)
        devices_state_save(vm, b);
    if (ok && req->vmm_state) {
        vjson_node(b, "vmm", json_node_copy(req->vmm_state));
    }
    vjson_object_end(b);
    return ok ? json_builder_get_root(b) : NULL;
}

char *snapshot_config_json(const struct vm_config *cfg)
{
    g_autoptr(JsonNode) root = vm_config_to_json(cfg);
    return json_to_string(root, TRUE);
}

static bool write_layer(struct vm *vm, const char *dir, const struct persist_snapshot_request *req,
                        const uint64_t *dirty, const snap_id *id, const snap_id *parent,
                        struct snap_save_stats *stats, GError **error)
{
    g_autofree char *path = g_build_filename(dir, SNAP_DIR_LAYER_FILE, NULL);
    const struct guest_memory *mem = vm_memory(vm);
    struct snap_ram ram = { mem->host, mem->size, mem->fd, mem->page_size, mem->private_file };
    return req->diff ? snap_save_diff(path, &ram, dirty, id, parent, stats, error)
                     : snap_save_full(path, &ram, id, stats, error);
}

/* Everything into tmp, then tmp -> dest; the disks move onto their new
 * overlays only once dest is committed. */
static bool write_snapshot(struct vm *vm, struct vm_config *cfg, const struct persist_snapshot_request *req,
                           const char *tmp, const char *dest, const uint64_t *dirty, const snap_id *id,
                           const snap_id *parent, struct snap_save_stats *stats, GError **error)
{
    g_autoptr(JsonNode) state = snapshot_state_json(vm, req, id, parent, error);
    if (!state)
        return false;
    g_autofree char *config = snapshot_config_json(cfg);
    struct disk_layers *disks = disk_layers_seal(vm, cfg, tmp, NULL, error);
    if (!disks)
        return false;
    disk_layers_add_records(disks, state);
    /* The library writes both, binding config.json to state.json by its
     * checksum. */
    if (!write_layer(vm, tmp, req, dirty, id, parent, stats, error) ||
        !snap_dir_write_state(tmp, state, config, error) || !snap_dir_commit(tmp, dest, error)) {
        disk_layers_abort(disks);
        return false;
    }
    disk_layers_switch(disks, vm, cfg, dest);
    return true;
}

char *snapshot_partial_dir(const char *dest, GError **error)
{
    char *tmp = snap_dir_create_partial(dest, error);
    if (!tmp) {
        g_prefix_error(error, "destination_url: ");
        persist_error_adopt(error);
    }
    return tmp;
}

/* A failed snapshot leaves nothing behind; if even that fails, say so. */
void snapshot_remove_partial(const char *tmp)
{
    g_autoptr(GError) local = NULL;
    if (!snap_dir_remove(tmp, &local))
        g_warning("%s", local->message);
}

static bool take_snapshot(struct vm *vm, struct vm_config *cfg, const struct persist_snapshot_request *req,
                          const char *dest, const snap_id *parent, struct persist_snapshot_result *result,
                          GError **error)
{
    struct persist_vm *p = persist_vm_get(vm);
    snap_id id;
    snap_id_random(&id);
    g_autofree char *tmp = snapshot_partial_dir(dest, error);
    if (!tmp)
        return false;
    uint64_t *dirty = persist_dirty_collect(p, error);
    if (dirty && req->diff)
        persist_dirty_drop_unchanged(p, dirty);
    struct snap_save_stats stats = { 0 };
    bool ok = dirty && write_snapshot(vm, cfg, req, tmp, dest, dirty, &id, parent, &stats, error);
    if (ok && req->diff)
        persist_note_diff(p, dirty);
    if (dirty)
        persist_dirty_settle(p, dirty, ok);
    if (!ok) {
        snapshot_remove_partial(tmp);
        return false;
    }
    snapshot_note_taken(p, req, dest, &id, &stats, result);
    return true;
}

void snapshot_note_taken(struct persist_vm *p, const struct persist_snapshot_request *req, const char *dest,
                         const snap_id *id, const struct snap_save_stats *stats,
                         struct persist_snapshot_result *result)
{
    if (!req->diff) {
        g_autofree char *layer = g_build_filename(dest, SNAP_DIR_LAYER_FILE, NULL);
        persist_note_full(p, layer, id);
    }
    p->last_id = *id;
    p->has_layer = true;
    if (result) {
        snap_id_to_string(id, result->id);
        result->data_pages = stats->data_pages;
        result->file_bytes = stats->file_bytes;
        result->elapsed_ns = stats->elapsed_ns;
    }
}

/* Everything about the request that can be checked before the VM is touched;
 * parent gets the diff's parent id. */
bool snapshot_check_request(struct vm *vm, const struct persist_snapshot_request *req, snap_id *parent,
                          GError **error)
{
    g_autofree char *dest = persist_path_from_url(req->destination_url, "destination_url", error);
    if (!dest || !check_destination(dest, error))
        return false;
    if (req->diff && !check_parent(persist_vm_get(vm), req->parent_url, parent, error))
        return false;
    if (!req->diff && req->parent_url) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "parent_url is only for \"mode\": \"diff\" (a full snapshot has no parent)");
        return false;
    }
    return true;
}

bool persist_snapshot_check(struct vm *vm, const struct persist_snapshot_request *req, GError **error)
{
    snap_id parent = { 0 };
    return snapshot_check_request(vm, req, &parent, error);
}

bool persist_snapshot(struct vm *vm, struct vm_config *cfg, const struct persist_snapshot_request *req,
                      struct persist_snapshot_result *result, GError **error)
{
    snap_id parent = { 0 };
    if (!snapshot_check_request(vm, req, &parent, error))
        return false;
    g_autofree char *dest = persist_path_from_url(req->destination_url, "destination_url", error);
    if (!dest)
        return false;
    /* RAM restored on demand is only complete once every page is in. */
    if (!req->diff)
        persist_vm_fill_all(persist_vm_get(vm));
    if (!devices_quiesce(vm, error))
        return false;
    bool ok = take_snapshot(vm, cfg, req, dest, &parent, result, error);
    devices_unquiesce(vm);
    return ok;
}
