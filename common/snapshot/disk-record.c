/* The disk records in state.json: names, the writer and the parser (see
 * disk.h). */
#include "snapshot/disk.h"

#include "layer-internal.h"

#include <string.h>

#define bad_record(error, dir, disk_id, fmt, ...)                                                      \
    snap_file_error(error, SNAP_ERROR_FORMAT, "snapshot", dir, SNAP_DIR_STATE_FILE ": disk %s: " fmt, disk_id, \
                    ##__VA_ARGS__)

char *snap_disk_layer_name(const char *disk_id)
{
    g_autofree char *escaped = g_uri_escape_string(disk_id, NULL, FALSE);
    return g_strconcat(SNAP_DISK_LAYER_PREFIX, escaped, SNAP_DISK_LAYER_SUFFIX, NULL);
}

uint64_t snap_disk_layer_size(uint64_t capacity)
{
    return (capacity + SNAP_PAGE_SIZE - 1) / SNAP_PAGE_SIZE * SNAP_PAGE_SIZE;
}

void snap_disk_record_clear(struct snap_disk_record *r)
{
    g_free(r->file);
    g_free(r->parent_url);
    g_free(r->base_path);
    memset(r, 0, sizeof *r);
}

static void add_string(JsonObject *o, const char *name, const char *value)
{
    if (value)
        json_object_set_string_member(o, name, value);
    else
        json_object_set_null_member(o, name);
}

void snap_disk_record_set(JsonObject *disk, const struct snap_disk_record *r)
{
    char id[37], parent[37];
    snap_id_to_string(&r->id, id);
    snap_id_to_string(&r->parent, parent);
    bool first = snap_id_is_nil(&r->parent);
    JsonObject *layer = json_object_new();
    json_object_set_string_member(layer, "file", r->file);
    json_object_set_string_member(layer, "id", id);
    add_string(layer, "parent", first ? NULL : parent);
    add_string(layer, "parent_url", first ? NULL : r->parent_url);
    json_object_set_int_member(layer, "blocks", (gint64)r->blocks);
    json_object_set_object_member(disk, "layer", layer);
    JsonObject *base = json_object_new();
    g_autofree char *crc = g_strdup_printf("%08x", r->base.crc32c);
    json_object_set_string_member(base, "path", r->base_path);
    json_object_set_int_member(base, "size", (gint64)r->base.size);
    json_object_set_int_member(base, "mtime_ns", (gint64)r->base.mtime_ns);
    json_object_set_string_member(base, "crc32c", crc);
    json_object_set_object_member(disk, "base", base);
}

/* ---- the parser ---- */

static const char *string_member(JsonObject *o, const char *name)
{
    JsonNode *n = json_object_get_member(o, name);
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING ? json_node_get_string(n)
                                                                                        : NULL;
}

static bool is_null(JsonObject *o, const char *name)
{
    JsonNode *n = json_object_get_member(o, name);
    return n && JSON_NODE_HOLDS_NULL(n);
}

static bool uint_member(JsonObject *o, const char *name, uint64_t *out)
{
    JsonNode *n = json_object_get_member(o, name);
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64 || json_node_get_int(n) < 0)
        return false;
    *out = (uint64_t)json_node_get_int(n);
    return true;
}

static bool only_members(JsonObject *o, const char *const *names)
{
    g_autoptr(GList) members = json_object_get_members(o);
    for (GList *l = members; l; l = l->next)
        if (!g_strv_contains(names, l->data))
            return false;
    return json_object_get_size(o) == g_strv_length((char **)names);
}

static bool is_file_name(const char *name)
{
    return name && *name && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static bool parse_layer(JsonObject *layer, struct snap_disk_record *r, const char *dir, const char *disk_id,
                        GError **error)
{
    static const char *const members[] = { "file", "id", "parent", "parent_url", "blocks", NULL };
    if (!only_members(layer, members))
        return bad_record(error, dir, disk_id, "layer must have exactly the members file, id, parent, parent_url, "
                          "blocks");
    const char *file = string_member(layer, "file");
    if (!is_file_name(file))
        return bad_record(error, dir, disk_id, "layer.file is missing or not a file name");
    r->file = g_strdup(file);
    if (!snap_id_parse(string_member(layer, "id"), &r->id) || snap_id_is_nil(&r->id))
        return bad_record(error, dir, disk_id, "layer.id is missing or not a snapshot id (a non-nil UUID)");
    if (!uint_member(layer, "blocks", &r->blocks))
        return bad_record(error, dir, disk_id, "layer.blocks is missing or not a count");
    if (is_null(layer, "parent") && is_null(layer, "parent_url"))
        return true;
    const char *url = string_member(layer, "parent_url");
    if (!snap_id_parse(string_member(layer, "parent"), &r->parent) || snap_id_is_nil(&r->parent) || !url)
        return bad_record(error, dir, disk_id, "layer.parent and layer.parent_url must both be null (the first "
                          "layer) or a snapshot id and a file:// URL");
    if (snap_id_equal(&r->parent, &r->id))
        return bad_record(error, dir, disk_id, "layer.parent is the layer's own id");
    r->parent_url = g_strdup(url);
    return true;
}

static bool parse_base(JsonObject *base, struct snap_disk_record *r, const char *dir, const char *disk_id,
                       GError **error)
{
    static const char *const members[] = { "path", "size", "mtime_ns", "crc32c", NULL };
    const char *path = string_member(base, "path"), *crc = string_member(base, "crc32c");
    char *end = NULL;
    guint64 value = crc && strlen(crc) == 8 ? g_ascii_strtoull(crc, &end, 16) : 0;
    if (!only_members(base, members) || !path || path[0] != '/' || !uint_member(base, "size", &r->base.size) ||
        !uint_member(base, "mtime_ns", &r->base.mtime_ns) || !end || *end)
        return bad_record(error, dir, disk_id, "base must be {\"path\": absolute path, \"size\", \"mtime_ns\": "
                          "integers, \"crc32c\": 8 hex digits}");
    r->base_path = g_strdup(path);
    r->base.crc32c = (uint32_t)value;
    return true;
}

static JsonObject *find_disk(JsonNode *state, const char *disk_id)
{
    JsonObject *root = state && JSON_NODE_HOLDS_OBJECT(state) ? json_node_get_object(state) : NULL;
    JsonNode *devices = root ? json_object_get_member(root, "devices") : NULL;
    JsonNode *disks = devices && JSON_NODE_HOLDS_OBJECT(devices)
                          ? json_object_get_member(json_node_get_object(devices), "disks") : NULL;
    if (!disks || !JSON_NODE_HOLDS_ARRAY(disks))
        return NULL;
    JsonArray *array = json_node_get_array(disks);
    for (guint i = 0; i < json_array_get_length(array); i++) {
        JsonNode *e = json_array_get_element(array, i);
        if (JSON_NODE_HOLDS_OBJECT(e) && g_strcmp0(string_member(json_node_get_object(e), "id"), disk_id) == 0)
            return json_node_get_object(e);
    }
    return NULL;
}

bool snap_dir_disk_record(const struct snap_dir *d, const char *disk_id, struct snap_disk_record *r,
                          bool *present, GError **error)
{
    memset(r, 0, sizeof *r);
    *present = false;
    JsonObject *disk = find_disk(d->state, disk_id);
    JsonNode *layer = disk ? json_object_get_member(disk, "layer") : NULL;
    JsonNode *base = disk ? json_object_get_member(disk, "base") : NULL;
    if (!layer && !base)
        return true;
    if (!layer || !base || !JSON_NODE_HOLDS_OBJECT(layer) || !JSON_NODE_HOLDS_OBJECT(base))
        return bad_record(error, d->path, disk_id, "\"layer\" and \"base\" must both be objects");
    if (!parse_layer(json_node_get_object(layer), r, d->path, disk_id, error) ||
        !parse_base(json_node_get_object(base), r, d->path, disk_id, error)) {
        snap_disk_record_clear(r);
        return false;
    }
    *present = true;
    return true;
}

JsonObject *snap_dir_disk_object(const struct snap_dir *d, const char *disk_id)
{
    return find_disk(d->state, disk_id);
}

GPtrArray *snap_dir_disk_ids(const struct snap_dir *d)
{
    GPtrArray *ids = g_ptr_array_new_with_free_func(g_free);
    JsonObject *root = JSON_NODE_HOLDS_OBJECT(d->state) ? json_node_get_object(d->state) : NULL;
    JsonNode *devices = root ? json_object_get_member(root, "devices") : NULL;
    JsonNode *disks = devices && JSON_NODE_HOLDS_OBJECT(devices)
                          ? json_object_get_member(json_node_get_object(devices), "disks") : NULL;
    if (!disks || !JSON_NODE_HOLDS_ARRAY(disks))
        return ids;
    JsonArray *array = json_node_get_array(disks);
    for (guint i = 0; i < json_array_get_length(array); i++) {
        JsonNode *e = json_array_get_element(array, i);
        const char *id = JSON_NODE_HOLDS_OBJECT(e) ? string_member(json_node_get_object(e), "id") : NULL;
        if (id)
            g_ptr_array_add(ids, g_strdup(id));
    }
    return ids;
}
