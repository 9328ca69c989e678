/* vm.snapshot and vm.restore (Cloud Hypervisor's bodies plus vsnap's optional
 * fields): the bodies are parsed here, vmm_snapshot and vmm_restore do the
 * rest (through shim/persist/).
 *
 *   PUT vm.snapshot {"destination_url": "file:///dir",
 *                    "mode": "full" | "diff", "parent_url": "file:///parent"}
 *   PUT vm.restore  {"source_url": "file:///dir", "prefault": false, "resume": false,
 *                    "memory_restore_mode": "copy" | "ondemand" | "merge",
 *                    "ondemand_block_size": 65536, "prefetch": false,
 *                    "config_overrides": {"vsock": {"socket"}, "serial": {...}, "console": {...},
 *                                         "net": [{"id", "tap", "fds", "mac", "host_mac", "ip", "mask"}]},
 *                    "net_fds": [{"id": "net0", "num_fds": 1}]}
 *   (net_fds is Cloud Hypervisor's: that many of the descriptors sent with the
 *   request, SCM_RIGHTS, become interface id's tap, in order, after those
 *   config_overrides.net's own "fds" placeholders take.)
 */
#define G_LOG_DOMAIN "vsnap-shim"

#include "api/routes.h"
#include "api/snapshot-body.h"
#include "json/bounded-json.h"
#include "persist/persist.h"

#define MAX_BLOCK_SIZE (2u << 20)
#define MIN_BLOCK_SIZE 4096u

static JsonObject *parse_body(GBytes *body, const char *endpoint, GError **error, JsonParser *parser)
{
    gsize len;
    const char *text = g_bytes_get_data(body, &len);
    if (len == 0) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "%s needs a JSON body", endpoint);
        return NULL;
    }
    g_autoptr(GError) local = NULL;
    if (!bounded_json_load_data(parser, text, len, API_MAX_BODY_BYTES, &local)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "%s: bad JSON: %s", endpoint, local->message);
        return NULL;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "%s: the body must be a JSON object", endpoint);
        return NULL;
    }
    return json_node_get_object(root);
}

static bool check_members(JsonObject *obj, const char *endpoint, const char *const *known, GError **error)
{
    g_autoptr(GList) members = json_object_get_members(obj);
    for (GList *l = members; l; l = l->next) {
        if (!g_strv_contains(known, l->data)) {
            g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "%s: unknown field \"%s\"", endpoint,
                        (const char *)l->data);
            return false;
        }
    }
    return true;
}

static bool get_string(JsonObject *obj, const char *name, bool required, const char **out, GError **error)
{
    JsonNode *node = json_object_get_member(obj, name);
    *out = NULL;
    if (!node || JSON_NODE_HOLDS_NULL(node)) {
        if (required)
            g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "field \"%s\" is required", name);
        return !required;
    }
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "field \"%s\" must be a string", name);
        return false;
    }
    *out = json_node_get_string(node);
    return true;
}

static bool get_bool(JsonObject *obj, const char *name, bool *out, GError **error)
{
    JsonNode *node = json_object_get_member(obj, name);
    *out = false;
    if (!node || JSON_NODE_HOLDS_NULL(node))
        return true;
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_BOOLEAN) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "field \"%s\" must be true or false", name);
        return false;
    }
    *out = json_node_get_boolean(node);
    return true;
}

/* ---- vm.snapshot ---- */

static bool parse_snapshot(JsonObject *obj, struct persist_snapshot_request *out, GError **error)
{
    static const char *const known[] = { "destination_url", "mode", "parent_url", NULL };
    const char *mode = NULL;
    if (!check_members(obj, "vm.snapshot", known, error) ||
        !get_string(obj, "destination_url", true, &out->destination_url, error) ||
        !get_string(obj, "mode", false, &mode, error) ||
        !get_string(obj, "parent_url", false, &out->parent_url, error))
        return false;
    if (mode && g_strcmp0(mode, "full") && g_strcmp0(mode, "diff")) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "field \"mode\" must be \"full\" or \"diff\", not \"%s\"", mode);
        return false;
    }
    out->diff = !g_strcmp0(mode, "diff");
    if (out->diff && !out->parent_url) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "a diff snapshot needs \"parent_url\"");
        return false;
    }
    return true;
}

bool snapshot_body_parse(GBytes *body, JsonParser *parser, struct persist_snapshot_request *out,
                         GError **error)
{
    JsonObject *obj = parse_body(body, "vm.snapshot", error, parser);
    return obj && parse_snapshot(obj, out, error);
}

static void handle_snapshot(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    struct persist_snapshot_request sreq = { 0 };
    bool ok = snapshot_body_parse(req->body, parser, &sreq, &error) &&
              vmm_snapshot(req->vmm, &sreq, NULL, &error);
    reply_result(req, ok, error);
}

/* ---- vm.restore ---- */

static bool parse_block_size(JsonObject *obj, uint64_t *out, GError **error)
{
    JsonNode *node = json_object_get_member(obj, "ondemand_block_size");
    *out = 0;
    if (!node || JSON_NODE_HOLDS_NULL(node))
        return true;
    bool is_int = JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_INT64;
    gint64 v = is_int ? json_node_get_int(node) : -1;
    if (v < MIN_BLOCK_SIZE || v > MAX_BLOCK_SIZE || (v & (v - 1))) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "field \"ondemand_block_size\" must be a power of two from 4096 to 2097152 bytes");
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

static bool parse_restore(JsonObject *obj, struct restore_body *out, GError **error)
{
    static const char *const known[] = { "source_url", "prefault", "resume", "memory_restore_mode",
                                         "ondemand_block_size", "prefetch", "config_overrides", "net_fds", NULL };
    const char *mode = NULL;
    if (!check_members(obj, "vm.restore", known, error) ||
        !get_string(obj, "source_url", true, &out->req.source_url, error) ||
        !get_string(obj, "memory_restore_mode", false, &mode, error) ||
        !get_bool(obj, "prefault", &out->req.prefault, error) || !get_bool(obj, "resume", &out->resume, error) ||
        !get_bool(obj, "prefetch", &out->req.prefetch, error) ||
        !parse_block_size(obj, &out->req.block_size, error))
        return false;
    g_autoptr(GError) local = NULL;
    if (!snap_restore_mode_parse(mode, &out->req.mode, &local)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "field \"memory_restore_mode\": %s", local->message);
        return false;
    }
    if (out->req.mode != SNAP_RESTORE_ONDEMAND && (out->req.block_size || out->req.prefetch)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "\"ondemand_block_size\" and \"prefetch\" are for memory_restore_mode \"ondemand\"");
        return false;
    }
    JsonNode *over = json_object_get_member(obj, "config_overrides");
    if (over && !JSON_NODE_HOLDS_NULL(over) && !JSON_NODE_HOLDS_OBJECT(over)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "field \"config_overrides\" must be an object");
        return false;
    }
    out->req.config_overrides = over && JSON_NODE_HOLDS_OBJECT(over) ? json_node_get_object(over) : NULL;
    return true;
}

bool restore_body_parse(GBytes *body, JsonParser *parser, struct restore_body *out, GError **error)
{
    JsonObject *obj = parse_body(body, "vm.restore", error, parser);
    return obj && parse_restore(obj, out, error);
}

/* The override entry for interface id, made when missing. */
static JsonObject *net_override(JsonArray *list, const char *id)
{
    for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonNode *n = json_array_get_element(list, i);
        if (JSON_NODE_HOLDS_OBJECT(n) &&
            g_strcmp0(json_object_get_string_member_with_default(json_node_get_object(n), "id", NULL), id) == 0)
            return json_node_get_object(n);
    }
    JsonObject *entry = json_object_new();
    json_object_set_string_member(entry, "id", id);
    json_array_add_object_element(list, entry);
    return entry;
}

/* net_fds: [{"id", "num_fds"}] into config_overrides.net placeholders. */
static bool add_net_fds(JsonObject *obj, JsonArray *list, GError **error)
{
    JsonNode *node = json_object_get_member(obj, "net_fds");
    if (!node || JSON_NODE_HOLDS_NULL(node))
        return true;
    JsonArray *items = JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    for (guint i = 0; items && i < json_array_get_length(items); i++) {
        JsonNode *item = json_array_get_element(items, i);
        JsonObject *o = JSON_NODE_HOLDS_OBJECT(item) ? json_node_get_object(item) : NULL;
        const char *id = o ? json_object_get_string_member_with_default(o, "id", NULL) : NULL;
        gint64 n = o ? json_object_get_int_member_with_default(o, "num_fds", -1) : -1;
        if (!id || n < 0 || n > 64) {
            g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                        "field \"net_fds[%u]\" must be {\"id\": \"<net id>\", \"num_fds\": <count>}", i);
            return false;
        }
        JsonArray *slots = json_array_new();
        for (gint64 k = 0; k < n; k++)
            json_array_add_int_element(slots, -1);
        json_object_set_array_member(net_override(list, id), "fds", slots);
    }
    if (!items) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "field \"net_fds\" must be a list");
        return false;
    }
    return true;
}

/* Descriptors for the restored VM's taps: config_overrides.net (made when
 * net_fds needs it) gets them in place of its placeholders. */
static bool attach_restore_fds(struct api_request *req, JsonParser *parser, struct restore_body *body,
                               GError **error)
{
    JsonObject *obj = json_node_get_object(json_parser_get_root(parser));
    bool wants = json_object_has_member(obj, "net_fds") || req->nfds > 0;
    JsonNode *over_net = body->req.config_overrides ? json_object_get_member(body->req.config_overrides, "net") : NULL;
    if (!wants && !over_net)
        return true;
    if (!body->req.config_overrides) {
        json_object_set_object_member(obj, "config_overrides", json_object_new());
        body->req.config_overrides = json_object_get_object_member(obj, "config_overrides");
    }
    if (!over_net) {
        json_object_set_array_member(body->req.config_overrides, "net", json_array_new());
        over_net = json_object_get_member(body->req.config_overrides, "net");
    }
    if (!JSON_NODE_HOLDS_ARRAY(over_net)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "config_overrides.net must be a list of objects");
        return false;
    }
    JsonArray *list = json_node_get_array(over_net);
    if (!add_net_fds(obj, list, error))
        return false;
    bool ok = attach_request_fds(req, list, 0, NULL, error);
    if (json_array_get_length(list) == 0) /* nothing to override after all */
        json_object_remove_member(body->req.config_overrides, "net");
    return ok;
}

static void handle_restore(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    struct restore_body body = { 0 };
    bool ok = restore_body_parse(req->body, parser, &body, &error) && attach_restore_fds(req, parser, &body, &error) &&
              vmm_restore(req->vmm, &body.req, body.resume, &error);
    reply_result(req, ok, error);
}

const struct route snapshot_routes[] = {
    { "vm.snapshot", "PUT", true, handle_snapshot },
    { "vm.restore", "PUT", true, handle_restore },
    { 0 },
};
