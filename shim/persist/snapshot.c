/* vm.snapshot: config.json, state.json and the memory layer (full or diff)
 * into a temporary directory beside the destination, renamed into place once
 * everything is on disk. See persist.h. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "persist/persist.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/config-json.h"
#include "persist/cpu-state.h"
#include "persist/devices-state.h"
#include "persist/snapshot-dir.h"
#include "persist/vm-persist.h"
#include "snapshot/save.h"
#include "vm-internal.h"

char *persist_path_from_url(const char *url, const char *field, GError **error)
{
    const char *path = url;
    if (url && g_str_has_prefix(url, "file://"))
        path = url + strlen("file://");
    if (!path || path[0] != '/') {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "%s must be a file:// URL with an absolute path (file:///dir), not \"%s\"", field,
                    url ? url : "");
        return NULL;
    }
    g_autofree char *unescaped = g_uri_unescape_string(path, NULL);
    if (!unescaped || !*unescaped) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "%s: \"%s\" is not a valid path", field, url);
        return NULL;
    }
    /* Trailing slashes would make the temporary directory's name wrong. */
    size_t n = strlen(unescaped);
    while (n > 1 && unescaped[n - 1] == '/')
        unescaped[--n] = '\0';
    return g_steal_pointer(&unescaped);
}

/* The destination must not exist, or be an empty directory (then the rename
 * replaces it): an existing snapshot is never overwritten, since diffs taken
 * on top of it would silently stop matching. */
static bool check_destination(const char *dest, GError **error)
{
    struct stat st;
    if (lstat(dest, &st) != 0)
        return true;
    g_autoptr(GDir) dir = S_ISDIR(st.st_mode) ? g_dir_open(dest, 0, NULL) : NULL;
    if (!dir || g_dir_read_name(dir)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "destination_url: %s exists and is not an empty directory (snapshots are never overwritten)",
                    dest);
        return false;
    }
    return true;
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
    struct snapshot_meta meta;
    bool ok = snapshot_dir_read(parent_dir, &meta, NULL, error);
    if (ok && !snap_id_equal(&meta.id, &p->last_id)) {
        char want[37], got[37];
        snap_id_to_string(&p->last_id, want);
        snap_id_to_string(&meta.id, got);
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "parent_url %s holds snapshot %s, but this VM's last snapshot is %s: a diff can only "
                    "follow the VM's last snapshot", parent_url, got, want);
        ok = false;
    }
    *parent_id = meta.id;
    snapshot_meta_clear(&meta);
    return ok;
}

static char *build_state_json(struct vm *vm, const struct persist_snapshot_request *req, const snap_id *id,
                              const snap_id *parent, GError **error)
{
    char id_text[37], parent_text[37];
    snap_id_to_string(id, id_text);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "vsnap_state_version");
    json_builder_add_int_value(b, PERSIST_STATE_VERSION);
    json_builder_set_member_name(b, "memory");
    json_builder_begin_object(b);
    state_add_string(b, "layer", PERSIST_LAYER_FILE);
    state_add_string(b, "kind", req->diff ? "diff" : "full");
    state_add_string(b, "id", id_text);
    if (req->diff) {
        snap_id_to_string(parent, parent_text);
        state_add_string(b, "parent_id", parent_text);
        state_add_string(b, "parent_url", req->parent_url);
    }
    json_builder_set_member_name(b, "ram_size");
    json_builder_add_int_value(b, (gint64)vm->mem.size);
    json_builder_end_object(b);
    bool ok = cpu_state_save(vm, b, error);
    if (ok)
        devices_state_save(vm, b);
    json_builder_end_object(b);
    if (!ok)
        return NULL;
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, TRUE);
}

static char *build_config_json(const struct vm_config *cfg)
{
    g_autoptr(JsonNode) root = vm_config_to_json(cfg);
    return json_to_string(root, TRUE);
}

static bool write_layer(struct vm *vm, const char *dir, const struct persist_snapshot_request *req,
                        const uint64_t *dirty, const snap_id *id, const snap_id *parent,
                        struct snap_save_stats *stats, GError **error)
{
    g_autofree char *path = g_build_filename(dir, PERSIST_LAYER_FILE, NULL);
    struct snap_ram ram = { vm->mem.host, vm->mem.size, vm->mem.fd };
    return req->diff ? snap_save_diff(path, &ram, dirty, id, parent, stats, error)
                     : snap_save_full(path, &ram, id, stats, error);
}

/* Everything into tmp, then tmp -> dest. */
static bool write_snapshot(struct vm *vm, const struct vm_config *cfg, const struct persist_snapshot_request *req,
                           const char *tmp, const char *dest, const uint64_t *dirty, const snap_id *id,
                           const snap_id *parent, struct snap_save_stats *stats, GError **error)
{
    g_autofree char *state = build_state_json(vm, req, id, parent, error);
    if (!state)
        return false;
    g_autofree char *config = build_config_json(cfg);
    g_autofree char *parent_dir = g_path_get_dirname(dest);
    if (!write_layer(vm, tmp, req, dirty, id, parent, stats, error) ||
        !snapshot_dir_write_file(tmp, "state.json", state, error) ||
        !snapshot_dir_write_file(tmp, "config.json", config, error) || !snapshot_dir_sync(tmp, error))
        return false;
    if (rename(tmp, dest) != 0) {
        int e = errno;
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_FAILED, "cannot move the snapshot into place at %s: %s",
                    dest, g_strerror(e));
        return false;
    }
    return snapshot_dir_sync(parent_dir, error);
}

static char *make_temp_dir(const char *dest, GError **error)
{
    g_autofree char *parent = g_path_get_dirname(dest);
    g_autofree char *base = g_path_get_basename(dest);
    g_autofree char *pattern = g_strdup_printf("%s/.%s.partial-XXXXXX", parent, base);
    if (!g_mkdtemp_full(pattern, 0755)) {
        int e = errno;
        g_set_error(error, PERSIST_ERROR, e == ENOENT ? PERSIST_ERROR_INVALID : PERSIST_ERROR_FAILED,
                    "destination_url: cannot create a directory in %s: %s", parent, g_strerror(e));
        return NULL;
    }
    return g_steal_pointer(&pattern);
}

static bool take_snapshot(struct vm *vm, const struct vm_config *cfg, const struct persist_snapshot_request *req,
                          const char *dest, const snap_id *parent, struct persist_snapshot_result *result,
                          GError **error)
{
    struct persist_vm *p = persist_vm_get(vm);
    snap_id id;
    snap_id_random(&id);
    g_autofree char *tmp = make_temp_dir(dest, error);
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
        snapshot_dir_remove(tmp);
        return false;
    }
    if (!req->diff) {
        g_autofree char *layer = g_build_filename(dest, PERSIST_LAYER_FILE, NULL);
        persist_note_full(p, layer);
    }
    p->last_id = id;
    p->has_layer = true;
    if (result) {
        snap_id_to_string(&id, result->id);
        result->data_pages = stats.data_pages;
        result->file_bytes = stats.file_bytes;
        result->elapsed_ns = stats.elapsed_ns;
    }
    return true;
}

bool persist_snapshot(struct vm *vm, const struct vm_config *cfg, const struct persist_snapshot_request *req,
                      struct persist_snapshot_result *result, GError **error)
{
    g_autofree char *dest = persist_path_from_url(req->destination_url, "destination_url", error);
    if (!dest || !check_destination(dest, error))
        return false;
    struct persist_vm *p = persist_vm_get(vm);
    snap_id parent = { 0 };
    if (req->diff && !check_parent(p, req->parent_url, &parent, error))
        return false;
    if (!req->diff && req->parent_url) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "parent_url is only for \"mode\": \"diff\" (a full snapshot has no parent)");
        return false;
    }
    /* RAM restored on demand is only complete once every page is in. */
    if (!req->diff)
        persist_vm_fill_all(p);
    devices_quiesce(vm);
    bool ok = take_snapshot(vm, cfg, req, dest, &parent, result, error);
    devices_unquiesce(vm);
    return ok;
}
