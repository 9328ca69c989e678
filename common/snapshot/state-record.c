/* state.json's version and memory record: the one parser, the one writer,
 * and the rewrite of the parent that keeps the rest of the file (see
 * directory.h). */
#include "snapshot/directory.h"

#include <string.h>

#include "json/bounded-json.h"
#include "json/vjson.h"
#include "layer-internal.h"

void snap_memory_record_clear(struct snap_memory_record *record)
{
    g_free(record->layer);
    g_free(record->parent_url);
    memset(record, 0, sizeof *record);
}

#define bad_state(error, dir, fmt, ...) \
    snap_file_error(error, SNAP_ERROR_FORMAT, "snapshot", dir, SNAP_DIR_STATE_FILE ": " fmt, ##__VA_ARGS__)

/* ---- the writer ---- */

static JsonNode *record_to_json(const struct snap_memory_record *record)
{
    char id[37], parent_id[37];
    snap_id_to_string(&record->id, id);
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "layer", record->layer);
    vjson_str(b, "kind", record->diff ? "diff" : "full");
    vjson_str(b, "id", id);
    if (record->diff) {
        snap_id_to_string(&record->parent_id, parent_id);
        vjson_str(b, "parent_id", parent_id);
        vjson_str(b, "parent_url", record->parent_url);
    }
    vjson_int(b, "ram_size", (gint64)record->ram_size);
    vjson_object_end(b);
    return json_builder_get_root(b);
}

void snap_state_add_record(JsonBuilder *b, const struct snap_memory_record *record)
{
    vjson_int(b, "vsnap_state_version", SNAP_STATE_VERSION);
    vjson_node(b, "memory", record_to_json(record));
}

static JsonNode *config_record(const char *digest)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "file", SNAP_DIR_CONFIG_FILE);
    vjson_str(b, "sha256", digest);
    vjson_object_end(b);
    return json_builder_get_root(b);
}

bool snap_dir_write_state(const char *dir, JsonNode *state, const char *config_text, GError **error)
{
    char digest[65];
    snap_sha256(config_text, strlen(config_text), digest);
    json_object_set_member(json_node_get_object(state), "config", config_record(digest));
    g_autofree char *text = snap_state_text(state);
    return snap_dir_write_file(dir, SNAP_DIR_CONFIG_FILE, config_text, error) &&
           snap_dir_write_file(dir, SNAP_DIR_STATE_FILE, text, error);
}

/* ---- the parser ---- */

static const char *const record_members[] = { "layer", "kind", "id", "parent_id", "parent_url", "ram_size", NULL };

static const char *string_member(JsonObject *obj, const char *name)
{
    JsonNode *node = json_object_get_member(obj, name);
    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(node);
}

static bool int_member(JsonObject *obj, const char *name, gint64 *out)
{
    JsonNode *node = json_object_get_member(obj, name);
    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64)
        return false;
    *out = json_node_get_int(node);
    return true;
}

static bool is_file_name(const char *name)
{
    return name && *name && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static bool parse_id(JsonObject *memory, const char *name, snap_id *id, const char *dir, GError **error)
{
    const char *text = string_member(memory, name);
    if (!text || !snap_id_parse(text, id) || snap_id_is_nil(id))
        return bad_state(error, dir, "memory.%s is missing or not a snapshot id (a non-nil UUID)", name);
    return true;
}

static bool check_members(JsonObject *memory, const char *dir, GError **error)
{
    g_autoptr(GList) names = json_object_get_members(memory);
    for (GList *l = names; l; l = l->next)
        if (!g_strv_contains(record_members, l->data))
            return bad_state(error, dir, "memory.%s is not a member of format version %d",
                             (const char *)l->data, SNAP_STATE_VERSION);
    return true;
}

static bool parse_parent(JsonObject *memory, struct snap_memory_record *r, const char *dir, GError **error)
{
    if (!r->diff) {
        if (json_object_has_member(memory, "parent_id") || json_object_has_member(memory, "parent_url"))
            return bad_state(error, dir, "a full snapshot has no memory.parent_id or memory.parent_url");
        return true;
    }
    if (!parse_id(memory, "parent_id", &r->parent_id, dir, error))
        return false;
    if (snap_id_equal(&r->parent_id, &r->id))
        return bad_state(error, dir, "memory.parent_id is the snapshot's own id");
    const char *url = string_member(memory, "parent_url");
    if (!url)
        return bad_state(error, dir, "memory.parent_url of a diff is missing");
    r->parent_url = g_strdup(url);
    return true;
}

static bool parse_record(JsonObject *memory, struct snap_memory_record *r, const char *dir, GError **error)
{
    const char *layer = string_member(memory, "layer");
    const char *kind = string_member(memory, "kind");
    gint64 ram_size = 0;
    if (!check_members(memory, dir, error))
        return false;
    if (!is_file_name(layer))
        return bad_state(error, dir, "memory.layer is missing or not a file name");
    if (g_strcmp0(kind, "full") != 0 && g_strcmp0(kind, "diff") != 0)
        return bad_state(error, dir, "memory.kind must be \"full\" or \"diff\"");
    if (!int_member(memory, "ram_size", &ram_size) || ram_size <= 0 || ram_size % SNAP_PAGE_SIZE ||
        (uint64_t)ram_size > SNAP_MAX_RAM_SIZE)
        return bad_state(error, dir, "memory.ram_size is missing or not a positive multiple of 4 KiB");
    r->layer = g_strdup(layer);
    r->diff = strcmp(kind, "diff") == 0;
    r->ram_size = (uint64_t)ram_size;
    return parse_id(memory, "id", &r->id, dir, error) && parse_parent(memory, r, dir, error);
}

/* "config": {"file": "config.json", "sha256": "<64 hex digits>"}. */
static bool parse_config(JsonObject *obj, char digest[65], const char *dir, GError **error)
{
    JsonNode *node = json_object_get_member(obj, "config");
    if (!node || !JSON_NODE_HOLDS_OBJECT(node))
        return bad_state(error, dir, "\"config\" is missing or not an object");
    JsonObject *config = json_node_get_object(node);
    const char *file = string_member(config, "file");
    const char *sha = string_member(config, "sha256");
    if (json_object_get_size(config) != 2 || g_strcmp0(file, SNAP_DIR_CONFIG_FILE) != 0 || !snap_is_digest(sha))
        return bad_state(error, dir, "\"config\" must be {\"file\": \"" SNAP_DIR_CONFIG_FILE
                         "\", \"sha256\": 64 lowercase hex digits}");
    g_strlcpy(digest, sha, 65);
    return true;
}

/* The version, then the records; r holds nothing to free on failure. */
static bool parse_state(JsonNode *root, struct snap_memory_record *r, char config_digest[65], const char *dir,
                        GError **error)
{
    memset(r, 0, sizeof *r);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return bad_state(error, dir, "not a JSON object");
    JsonObject *obj = json_node_get_object(root);
    gint64 version = -1;
    if (!int_member(obj, "vsnap_state_version", &version) || version != SNAP_STATE_VERSION) {
        g_autofree char *found = json_object_has_member(obj, "vsnap_state_version")
                                     ? json_to_string(json_object_get_member(obj, "vsnap_state_version"), FALSE)
                                     : g_strdup("(none)");
        return bad_state(error, dir, "has format version %s, this vsnap reads %d", found, SNAP_STATE_VERSION);
    }
    JsonNode *memory = json_object_get_member(obj, "memory");
    if (!memory || !JSON_NODE_HOLDS_OBJECT(memory))
        return bad_state(error, dir, "\"memory\" is missing or not an object");
    if (parse_record(json_node_get_object(memory), r, dir, error) && parse_config(obj, config_digest, dir, error))
        return true;
    snap_memory_record_clear(r);
    return false;
}

/* state.json's text (bounded) and its JSON. */
static JsonNode *load_state(const char *dir, char **text, gsize *len, GError **error)
{
    g_autofree char *path = g_build_filename(dir, SNAP_DIR_STATE_FILE, NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) local = NULL;
    if (!bounded_json_read_file(path, SNAP_STATE_MAX_BYTES, text, len, &local) ||
        !bounded_json_load_data(parser, *text, *len, SNAP_STATE_MAX_BYTES, &local)) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT, "snapshot %s: cannot read " SNAP_DIR_STATE_FILE ": %s",
                    dir, local->message);
        return NULL;
    }
    /* An empty file (or only white space) parses to no document at all. */
    JsonNode *root = json_parser_steal_root(parser);
    if (!root)
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT, "snapshot %s: " SNAP_DIR_STATE_FILE " is empty", dir);
    return root;
}

/* state.json is the file the shim wrote, and config.json the one it wrote
 * beside it: a file changed on disk or taken from another snapshot is refused
 * before anyone uses it. */
static bool check_digests(const struct snap_dir *d, const char *text, gsize len, GError **error)
{
    JsonObject *obj = json_node_get_object(d->state);
    const char *digest = string_member(obj, SNAP_STATE_DIGEST_MEMBER);
    if (!snap_is_digest(digest))
        return bad_state(error, d->path, SNAP_STATE_DIGEST_MEMBER " is missing or not 64 lowercase hex digits");
    if (!snap_state_digest_matches(text, len, digest)) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHECKSUM,
                    "snapshot %s: " SNAP_DIR_STATE_FILE " does not match its checksum (" SNAP_STATE_DIGEST_MEMBER
                    "): it was changed after the shim wrote it", d->path);
        return false;
    }
    g_autofree char *config = g_build_filename(d->path, SNAP_DIR_CONFIG_FILE, NULL);
    char actual[65];
    g_autoptr(GError) local = NULL;
    if (!snap_file_sha256(config, SNAP_CONFIG_MAX_BYTES, actual, &local)) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT, "snapshot %s: %s", d->path, local->message);
        return false;
    }
    if (strcmp(actual, d->config_sha256) != 0) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHECKSUM,
                    "snapshot %s: " SNAP_DIR_CONFIG_FILE " is not the one this snapshot was taken with (its SHA-256 "
                    "is not the one " SNAP_DIR_STATE_FILE " records)", d->path);
        return false;
    }
    return true;
}

void snap_dir_free(struct snap_dir *d)
{
    if (!d)
        return;
    g_free(d->path);
    g_free(d->layer_path);
    g_free(d->parent_path);
    snap_memory_record_clear(&d->memory);
    if (d->state)
        json_node_unref(d->state);
    g_free(d);
}

struct snap_dir *snap_dir_read(const char *path, GError **error)
{
    g_autoptr(snap_dir) d = g_new0(struct snap_dir, 1);
    d->path = g_strdup(path);
    g_autofree char *text = NULL;
    gsize len = 0;
    d->state = load_state(path, &text, &len, error);
    if (!d->state || !parse_state(d->state, &d->memory, d->config_sha256, path, error) ||
        !check_digests(d, text, len, error))
        return NULL;
    d->layer_path = g_build_filename(path, d->memory.layer, NULL);
    if (d->memory.diff) {
        g_autoptr(GError) local = NULL;
        d->parent_path = snap_dir_path_from_url(d->memory.parent_url, &local);
        if (!d->parent_path) {
            bad_state(error, path, "memory.parent_url: %s", local->message);
            return NULL;
        }
    }
    return g_steal_pointer(&d);
}

/* ---- the rewrite of the parent ---- */

/* The parent the layer file itself names must be the new parent's id. */
static bool layer_names_parent(const struct snap_dir *d, const struct snap_dir *parent, GError **error)
{
    g_autoptr(snap_layer) layer = snap_layer_open(d->layer_path, error);
    if (!layer)
        return false;
    const snap_id *want = parent ? &parent->memory.id : NULL;
    if (want ? snap_id_equal(&layer->hdr.parent_id, want) : snap_layer_is_full(layer))
        return true;
    char have[37], wanted[37];
    snap_id_to_string(&layer->hdr.parent_id, have);
    if (want)
        snap_id_to_string(want, wanted);
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN,
                "cannot make %s the parent of snapshot %s: its layer %s names %s as parent, not %s",
                parent ? parent->path : "nothing", d->path, d->layer_path,
                snap_layer_is_full(layer) ? "nothing" : have, want ? wanted : "nothing");
    return false;
}

bool snap_dir_set_parent(const char *dir, const char *parent, GError **error)
{
    g_autoptr(snap_dir) d = snap_dir_read(dir, error);
    g_autoptr(snap_dir) p = d && parent ? snap_dir_read(parent, error) : NULL;
    if (!d || (parent && !p) || !layer_names_parent(d, p, error))
        return false;
    struct snap_memory_record *r = &d->memory;
    g_clear_pointer(&r->parent_url, g_free);
    r->diff = p != NULL;
    memset(&r->parent_id, 0, sizeof r->parent_id);
    if (p) {
        r->parent_id = p->memory.id;
        r->parent_url = snap_dir_url(p->path);
    }
    json_object_set_member(json_node_get_object(d->state), "memory", record_to_json(r));
    g_autofree char *text = snap_state_text(d->state);
    return snap_dir_write_file(dir, SNAP_DIR_STATE_FILE, text, error);
}
