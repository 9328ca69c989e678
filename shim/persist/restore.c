/* vm.restore: config.json + state.json of the top snapshot, the chain of
 * memory layers down to the base, RAM by copy, merge or on demand, then the
 * VM built without booting, its state loaded, vCPUs parked. See persist.h. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "persist/persist.h"

#include <errno.h>
#include <sys/mman.h>

#include "config/vm-config-json.h"
#include "json/bounded-json.h"
#include "platform/memory.h"
#include "cpu-state.h"
#include "devices-state.h"
#include "disk-layers.h"
#include "host-paths.h"
#include "vm-persist.h"
#include "ram-snapshot/restore.h"
#include "snapshot/directory.h"
#include "core/vm.h"

/* ---- config.json and its overrides ---- */

static bool override_section(JsonObject *config, JsonObject *overrides, const char *section,
                             const char *const *allowed, GError **error)
{
    JsonNode *node = json_object_get_member(overrides, section);
    if (!node)
        return true;
    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "config_overrides.%s must be an object", section);
        return false;
    }
    JsonObject *over = json_node_get_object(node);
    /* A new console mode makes the old mode's file or socket meaningless:
     * the override then replaces the whole section. */
    bool replace = json_object_has_member(over, "mode");
    if (replace || !json_object_has_member(config, section) ||
        !JSON_NODE_HOLDS_OBJECT(json_object_get_member(config, section)))
        json_object_set_object_member(config, section, json_object_new());
    JsonObject *target = json_object_get_object_member(config, section);
    g_autoptr(GList) members = json_object_get_members(over);
    for (GList *l = members; l; l = l->next) {
        if (!g_strv_contains(allowed, l->data)) {
            g_autofree char *list = g_strjoinv(", ", (char **)allowed);
            g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                        "config_overrides.%s.%s cannot be overridden (only %s)", section, (const char *)l->data,
                        list);
            return false;
        }
        json_object_set_member(target, l->data, json_node_copy(json_object_get_member(over, l->data)));
    }
    return true;
}

/* The object in list (the snapshot's nets or disks) with this id, or NULL. */
static JsonObject *find_by_id(JsonArray *list, const char *id)
{
    for (guint i = 0; list && i < json_array_get_length(list); i++) {
        JsonNode *n = json_array_get_element(list, i);
        if (JSON_NODE_HOLDS_OBJECT(n) && g_strcmp0(json_object_get_string_member_with_default(
                                                        json_node_get_object(n), "id", NULL), id) == 0)
            return json_node_get_object(n);
    }
    return NULL;
}

/* config.json never names descriptors (they belong to the process that
 * wrote it); any there are dropped before overrides add the new ones. */
static void drop_saved_fds(JsonArray *nets)
{
    for (guint i = 0; nets && i < json_array_get_length(nets); i++) {
        JsonNode *n = json_array_get_element(nets, i);
        if (JSON_NODE_HOLDS_OBJECT(n))
            json_object_remove_member(json_node_get_object(n), "fds");
    }
}

/* config_overrides.net: a list shaped like VmConfig's; each member names an
 * interface of the snapshot by id and replaces the fields it gives. A new
 * tap name or new descriptors replace the old tap whichever way it came. */
static bool override_nets(JsonObject *config, JsonObject *overrides, GError **error)
{
    static const char *const allowed[] = { "id", "tap", "fds", "mac", "host_mac", "ip", "mask", NULL };
    JsonNode *cnode = json_object_get_member(config, "net");
    JsonArray *nets = cnode && JSON_NODE_HOLDS_ARRAY(cnode) ? json_node_get_array(cnode) : NULL;
    drop_saved_fds(nets);
    JsonNode *node = json_object_get_member(overrides, "net");
    if (!node)
        return true;
    if (!JSON_NODE_HOLDS_ARRAY(node)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "config_overrides.net must be a list of objects");
        return false;
    }
    JsonArray *list = json_node_get_array(node);
    for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonNode *item = json_array_get_element(list, i);
        JsonObject *over = JSON_NODE_HOLDS_OBJECT(item) ? json_node_get_object(item) : NULL;
        const char *id = over ? json_object_get_string_member_with_default(over, "id", NULL) : NULL;
        JsonObject *target = id ? find_by_id(nets, id) : NULL;
        if (!target) {
            g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                        id ? "config_overrides.net[%u]: the snapshot has no network interface '%s'"
                           : "config_overrides.net[%u] must be an object with the \"id\" of an interface%s",
                        i, id ? id : "");
            return false;
        }
        g_autoptr(GList) members = json_object_get_members(over);
        for (GList *l = members; l; l = l->next) {
            if (!g_strv_contains(allowed, l->data)) {
                g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                            "config_overrides.net[%u].%s cannot be overridden (only tap, fds, mac, host_mac, ip, mask)",
                            i, (const char *)l->data);
                return false;
            }
        }
        if (json_object_has_member(over, "tap") || json_object_has_member(over, "fds")) {
            json_object_remove_member(target, "tap");
            json_object_remove_member(target, "fds");
        }
        for (GList *l = members; l; l = l->next)
            json_object_set_member(target, l->data, json_node_copy(json_object_get_member(over, l->data)));
    }
    return true;
}

static bool bad_disk_override(GError **error, guint i, const char *why, const char *id)
{
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "config_overrides.disks[%u]: %s%s%s", i, why,
                id ? " " : "", id ? id : "");
    return false;
}

/* One {"id", "path", "readonly"} of config_overrides.disks onto the
 * snapshot's disk: the image it runs on (the restore builds its chain and
 * overlay anew, so the old ones go). */
static bool override_disk(JsonArray *disks, JsonNode *item, guint i, GError **error)
{
    static const char *const allowed[] = { "id", "path", "readonly", NULL };
    JsonObject *over = JSON_NODE_HOLDS_OBJECT(item) ? json_node_get_object(item) : NULL;
    const char *id = over ? json_object_get_string_member_with_default(over, "id", NULL) : NULL;
    if (!id)
        return bad_disk_override(error, i, "must be an object with the \"id\" of a disk", NULL);
    JsonObject *target = find_by_id(disks, id);
    if (!target)
        return bad_disk_override(error, i, "the snapshot has no disk", id);
    g_autoptr(GList) members = json_object_get_members(over);
    for (GList *l = members; l; l = l->next)
        if (!g_strv_contains(allowed, l->data))
            return bad_disk_override(error, i, "only id, path and readonly can be overridden, not",
                                     (const char *)l->data);
    JsonNode *path = json_object_get_member(over, "path");
    JsonNode *ro = json_object_get_member(over, "readonly");
    if (!path || !JSON_NODE_HOLDS_VALUE(path) || json_node_get_value_type(path) != G_TYPE_STRING ||
        json_node_get_string(path)[0] != '/')
        return bad_disk_override(error, i, "\"path\" must be the absolute path of the image of disk", id);
    if (ro && (!JSON_NODE_HOLDS_VALUE(ro) || json_node_get_value_type(ro) != G_TYPE_BOOLEAN))
        return bad_disk_override(error, i, "\"readonly\" must be true or false for disk", id);
    json_object_set_string_member(target, "path", json_node_get_string(path));
    if (ro)
        json_object_set_boolean_member(target, "readonly", json_node_get_boolean(ro));
    json_object_remove_member(target, "vsnap_chain");
    json_object_remove_member(target, "vsnap_overlay");
    return true;
}

/* config_overrides.disks: [{"id", "path", "readonly"}], each naming a disk
 * of the snapshot once. */
static bool override_disks(JsonObject *config, JsonObject *overrides, GError **error)
{
    JsonNode *node = json_object_get_member(overrides, "disks");
    if (!node)
        return true;
    if (!JSON_NODE_HOLDS_ARRAY(node)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "config_overrides.disks must be a list of objects");
        return false;
    }
    JsonNode *cnode = json_object_get_member(config, "disks");
    JsonArray *disks = cnode && JSON_NODE_HOLDS_ARRAY(cnode) ? json_node_get_array(cnode) : NULL;
    JsonArray *list = json_node_get_array(node);
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonNode *item = json_array_get_element(list, i);
        if (!override_disk(disks, item, i, error))
            return false;
        const char *id = json_object_get_string_member(json_node_get_object(item), "id");
        if (!g_hash_table_add(seen, (gpointer)id))
            return bad_disk_override(error, i, "gives a second time disk", id);
    }
    return true;
}

/* An override of a device the snapshot's VM does not have is a mistake. */
static bool check_device_present(JsonObject *config, JsonObject *overrides, const char *name, GError **error)
{
    JsonNode *dev = json_object_get_member(config, name);
    if (!json_object_has_member(overrides, name) || (dev && JSON_NODE_HOLDS_OBJECT(dev)))
        return true;
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "config_overrides.%s: the snapshot's VM has no %s device",
                name, name);
    return false;
}

static bool apply_overrides(JsonObject *config, JsonObject *overrides, GError **error)
{
    static const char *const console_fields[] = { "mode", "file", "socket", NULL };
    /* cid: a clone's own; the restore's transport reset makes the guest read it. */
    static const char *const vsock_fields[] = { "socket", "cid", NULL };
    static const char *const payload_fields[] = { "kernel", "initramfs", "cmdline", NULL };
    static const char *const rng_fields[] = { "src", NULL };
    static const char *const sections[] = { "serial", "console", "vsock", "vsnap_work_dir", "net", "disks",
                                            "payload", "rng", NULL };
    g_autoptr(GList) members = json_object_get_members(overrides);
    for (GList *l = members; l; l = l->next) {
        if (!g_strv_contains(sections, l->data)) {
            g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                        "config_overrides.%s is not supported (serial, console, vsock, vsnap_work_dir, net, disks, "
                        "payload and rng are)", (const char *)l->data);
            return false;
        }
    }
    return check_device_present(config, overrides, "vsock", error) &&
           check_device_present(config, overrides, "rng", error) &&
           override_section(config, overrides, "serial", console_fields, error) &&
           override_section(config, overrides, "console", console_fields, error) &&
           override_section(config, overrides, "vsock", vsock_fields, error) &&
           override_section(config, overrides, "payload", payload_fields, error) &&
           override_section(config, overrides, "rng", rng_fields, error) && override_nets(config, overrides, error) &&
           override_disks(config, overrides, error);
}

static struct vm_config *load_config(const char *dir, JsonObject *overrides, bool from_store, GError **error)
{
    g_autofree char *path = g_build_filename(dir, SNAP_DIR_CONFIG_FILE, NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) local = NULL;
    if (!bounded_json_load_file(parser, path, SNAP_CONFIG_MAX_BYTES, &local)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "snapshot %s: cannot read config.json: %s", dir,
                    local->message);
        return NULL;
    }
    return persist_config_with_overrides(json_parser_get_root(parser), overrides, from_store, dir, error);
}

struct vm_config *persist_config_with_overrides(JsonNode *root, JsonObject *overrides, bool from_store,
                                                const char *dir, GError **error)
{
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "snapshot %s: config.json is not an object", dir);
        return NULL;
    }
    JsonObject *config = json_node_get_object(root);
    if (from_store)
        host_paths_drop(config);
    if (overrides && !apply_overrides(config, overrides, error))
        return NULL;
    if (!overrides) {
        JsonNode *nets = json_object_get_member(config, "net");
        drop_saved_fds(nets && JSON_NODE_HOLDS_ARRAY(nets) ? json_node_get_array(nets) : NULL);
    }
    if (from_store && !host_paths_check(config, dir, error))
        return NULL;
    g_autoptr(GError) local = NULL;
    struct vm_config *cfg = vm_config_from_json(root, &local);
    if (!cfg) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "snapshot %s: config.json%s: %s", dir,
                    overrides ? " with config_overrides" : "", local->message);
        return NULL;
    }
    return cfg;
}

/* config_overrides.vsnap_work_dir: where the disks' new overlays go. */
static bool override_work_dir(JsonObject *overrides, char **work_dir, GError **error)
{
    JsonNode *node = overrides ? json_object_get_member(overrides, "vsnap_work_dir") : NULL;
    if (!node)
        return true;
    const char *dir = JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING
                          ? json_node_get_string(node) : NULL;
    if (!dir || dir[0] != '/') {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "config_overrides.vsnap_work_dir must be an absolute path");
        return false;
    }
    *work_dir = g_strdup(dir);
    return true;
}

/* ---- the chain ---- */

/* The layers from the base up to top, every record and layer checked
 * (common/snapshot/), and RAM as large as config.json says. */
static struct snap_chain *open_chain(const struct snap_dir *top, uint64_t ram_size, GError **error)
{
    g_autoptr(GError) local = NULL;
    struct snap_chain *chain = snap_dir_open_chain(top, &local);
    if (!chain) {
        /* Even a layer file that cannot be read is a bad snapshot (400). */
        g_set_error_literal(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, local->message);
        return NULL;
    }
    if (chain->ram_size != ram_size) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "the memory layers hold %" G_GUINT64_FORMAT " bytes of RAM, config.json says %"
                    G_GUINT64_FORMAT,
                    chain->ram_size, ram_size);
        snap_chain_free(chain);
        return NULL;
    }
    return chain;
}

/* ---- RAM ---- */

static bool snap_failed(GError **error, GError *local, const char *what)
{
    /* The snapshot's fault (400), or the host's: I/O, no space, busy (500). */
    int code = local->domain == SNAP_ERROR && snap_error_is_bad_input(local) ? PERSIST_ERROR_INVALID
                                                                            : PERSIST_ERROR_FAILED;
    g_set_error(error, PERSIST_ERROR, code, "%s: %s", what, local->message);
    return false;
}

/* shared: a private mapping of the snapshot's one image (ram-snapshot/restore.h). */
static bool share_ram(struct snap_chain *chain, const struct snap_dir *top, uint64_t page_size,
                      struct guest_memory *ram, GError **error)
{
    g_autoptr(GError) local = NULL;
    if (page_size != GUEST_PAGE_SIZE) {
        g_set_error_literal(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                            "memory_restore_mode \"shared\" needs RAM on 4 KiB pages: a private mapping of the "
                            "snapshot's image cannot be on huge pages");
        return false;
    }
    struct snap_merged_ram shared;
    if (!snap_restore_shared(chain, top->path, &top->memory.id, &shared, &local))
        return snap_failed(error, local, "restore by sharing");
    if (!guest_memory_adopt_private(ram, shared.host, shared.size, shared.fd, error)) {
        snap_merged_ram_release(&shared);
        return false;
    }
    return true;
}

/* RAM for the VM before it exists: filled (copy, merge), fresh (on demand)
 * or mapped from the snapshot's image (shared), on the host pages the config
 * asks for. Huge pages are merged in place: the merged image cannot be a
 * tmpfs file (ram-snapshot/restore.h). */
static bool prepare_ram(struct snap_chain *chain, const struct snap_dir *top, enum snap_restore_mode mode,
                        uint64_t page_size, struct guest_memory *ram, GError **error)
{
    g_autoptr(GError) local = NULL;
    if (mode == SNAP_RESTORE_SHARED)
        return share_ram(chain, top, page_size, ram, error);
    if (mode == SNAP_RESTORE_MERGE && page_size == GUEST_PAGE_SIZE) {
        struct snap_merged_ram merged;
        if (!snap_restore_merge(chain, NULL, &merged, &local))
            return snap_failed(error, local, "restore by merge");
        if (!guest_memory_adopt(ram, merged.host, merged.size, merged.fd, error)) {
            snap_merged_ram_release(&merged);
            return false;
        }
        return true;
    }
    if (!guest_memory_init_paged(ram, chain->ram_size, page_size, error))
        return false;
    if (mode == SNAP_RESTORE_COPY && !snap_restore_copy(chain, ram->host, ram->size, &local)) {
        guest_memory_release(ram);
        return snap_failed(error, local, "restore by copy");
    }
    if (mode == SNAP_RESTORE_MERGE && !snap_restore_merge_into(chain, ram->host, ram->size, &local)) {
        guest_memory_release(ram);
        return snap_failed(error, local, "restore by merge");
    }
    return true;
}

/* A data block failed its checksum while being served (handler or prefetch
 * thread): the guest must never see it, and a thread waiting on it, vCPU or
 * device, can never be released (ram-snapshot/uffd.h), so the VM is lost. */
static void on_demand_failed(void *opaque, const GError *error)
{
    struct persist_vm *p = opaque;
    g_autofree char *detail = g_strdup_printf("on-demand restore failed: %s", error->message);
    vm_report_fatal(p->vm, detail);
}

static bool start_on_demand(struct persist_vm *p, const struct persist_restore_request *req, const char *dir,
                            GError **error)
{
    struct guest_memory *mem = vm_memory(p->vm);
    struct snap_uffd_config config = {
        .chain = p->served, .host = mem->host, .size = mem->size, .page_size = mem->page_size,
        .block_size = req->block_size, .readahead = !req->no_readahead,
        .on_error = on_demand_failed, .opaque = p,
    };
    /* Only a guest that can announce READY says when its working set is in. */
    if (!req->no_workset && !req->prefault && vm_vsock(p->vm)) {
        persist_workset_prepare(&p->ws, dir, &p->last_id, &config);
        if (req->workset_hand_over)
            persist_workset_hand_over(&p->ws, req->workset_held, req->workset_opaque);
    }
    g_autoptr(GError) local = NULL;
    p->uffd = snap_uffd_start(&config, &local);
    if (!p->uffd)
        return snap_failed(error, local, "restore on demand");
    if (p->ws.dir)
        persist_workset_started(&p->ws, p->uffd);
    /* Nothing runs yet that could wait on a page: a bad block here is an
     * error of the restore, and the VM is freed. */
    if (req->prefault && !snap_uffd_fill_all(p->uffd, &local))
        return snap_failed(error, local, "restore on demand (prefault)");
    return true;
}

static bool prefault_ram(struct vm *vm, GError **error)
{
    struct guest_memory *mem = vm_memory(vm);
    /* Shared RAM is read in, not written: writing would copy every page. */
    int advice = mem->private_file ? MADV_POPULATE_READ : MADV_POPULATE_WRITE;
    if (madvise(mem->host, mem->size, advice) == 0)
        return true;
    int e = errno;
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_FAILED, "prefaulting restored RAM: %s", g_strerror(e));
    return false;
}

/* ---- the VM ---- */

static struct vm *build_vm(const struct vm_config *cfg, const struct vm_callbacks *cb, struct snap_chain **chain,
                           const struct snap_dir *top, const struct persist_restore_request *req, GError **error)
{
    struct guest_memory ram = { .fd = -1 };
    if (!prepare_ram(*chain, top, req->mode, memory_config_page_size(&cfg->memory), &ram, error))
        return NULL;
    /* Prefaulting is done here per mode; vm_new must not populate RAM that
     * userfaultfd is about to manage. */
    g_autoptr(vm_config) vm_cfg = vm_config_copy(cfg);
    vm_cfg->memory.prefault = false;
    struct vm *vm = vm_new_for_restore(vm_cfg, cb, &ram, error);
    guest_memory_release(&ram); /* empty unless vm_new_for_restore failed early */
    if (!vm)
        return NULL;
    struct persist_vm *p = persist_vm_get(vm);
    p->restored = true;
    p->restore_mode = req->mode;
    p->last_id = top->memory.id;
    p->has_layer = true;
    /* Later diffs leave out pages that still hold the chain's content; the
     * on-demand server reads it (the other modes are done with it). */
    persist_set_reference(p, *chain);
    if (req->mode == SNAP_RESTORE_ONDEMAND)
        p->served = g_steal_pointer(chain);
    bool ok = req->mode == SNAP_RESTORE_ONDEMAND ? start_on_demand(p, req, top->path, error)
                                                 : !req->prefault || prefault_ram(vm, error);
    if (!ok) {
        vm_free(vm);
        return NULL;
    }
    return vm;
}

struct vm *persist_restore(const struct persist_restore_request *req, const struct vm_callbacks *cb,
                           struct vm_config **cfg_out, GError **error)
{
    g_autofree char *dir = persist_path_from_url(req->source_url, "source_url", error);
    if (!dir)
        return NULL;
    g_autoptr(snap_dir) top = snap_dir_read(dir, error);
    if (!top) {
        persist_error_adopt(error);
        return NULL;
    }
    /* A pull marks what it brings in, whichever program pulled it. */
    g_autoptr(vm_config) cfg = load_config(dir, req->config_overrides, snap_dir_is_from_store(dir), error);
    g_autofree char *work_dir = NULL;
    if (!cfg || !override_work_dir(req->config_overrides, &work_dir, error) ||
        !disk_layers_for_restore(top, cfg, work_dir, error))
        return NULL;
    struct snap_chain *chain = open_chain(top, cfg->memory.size, error);
    struct vm *vm = chain ? build_vm(cfg, cb, &chain, top, req, error) : NULL;
    snap_chain_free(chain); /* NULL if the on-demand server took it */
    if (!vm) {
        disk_layers_discard_overlays(cfg);
        return NULL;
    }
    /* vCPU threads start parked: vm_resume (vm.resume or resume=true) runs them. */
    JsonObject *root = json_node_get_object(top->state);
    if (!cpu_state_restore(vm, root, error) || !devices_state_restore(vm, root, error) ||
        !vm_start_paused(vm, error)) {
        persist_error_adopt(error); /* a bad value in state.json is the snapshot's fault */
        vm_free(vm);
        disk_layers_discard_overlays(cfg);
        return NULL;
    }
    struct persist_vm *p = persist_vm_get(vm);
    g_autoptr(GError) local = NULL;
    if (p->uffd && req->prefetch && !snap_uffd_start_prefetch(p->uffd, &local)) {
        snap_failed(error, local, "restore on demand (prefetch)");
        vm_free(vm);
        return NULL;
    }
    JsonNode *vmm_state = json_object_get_member(root, "vmm");
    if (vmm_state && JSON_NODE_HOLDS_OBJECT(vmm_state))
        p->vmm_state = json_node_copy(vmm_state);
    if (!devices_after_restore(vm, error)) {
        vm_free(vm);
        return NULL;
    }
    *cfg_out = g_steal_pointer(&cfg);
    return vm;
}
