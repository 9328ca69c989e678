/* vm.snapshot and vm.restore (Cloud Hypervisor's bodies plus vsnap's optional
 * fields): the bodies are parsed here, vmm_snapshot and vmm_restore do the
 * rest (through shim/persist/).
 *
 *   PUT vm.snapshot {"destination_url": "file:///dir",
 *                    "mode": "full" | "diff", "parent_url": "file:///parent",
 *                    "live": false,   (true: of a running VM; answers 200 {"pause_us", ...})
 *                    "live_scratch": "memory" | "destination",
 *                    "live_max_passes": 1..64, "live_max_ms": 1..600000}
 *   PUT vm.cancel-snapshot   (a live snapshot under way ends at its next step:
 *                    its vm.snapshot answers 409; 204 here, 405 without one)
 *   PUT vm.restore  {"source_url": "file:///dir", "prefault": false, "resume": false,
 *                    "memory_restore_mode": "copy" | "ondemand" | "merge",
 *                    "ondemand_block_size": 65536, "prefetch": false,
 *                    "ondemand_readahead": true, "ondemand_workset": true,
 *                    "ondemand_workset_write": true, (false: the record is held for GET vm.workset)
 *                    "config_overrides": {"vsock": {"socket", "cid"}, "serial": {...}, "console": {...},
 *                                         "payload": {"kernel", "initramfs", "cmdline"}, "rng": {"src"},
 *                                         "disks": [{"id", "path", "readonly"}],
 *                                         "net": [{"id", "tap", "fds", "mac", "host_mac", "ip", "mask"}]},
 *                    "net_fds": [{"id": "net0", "num_fds": 1}]}
 *   (net_fds is Cloud Hypervisor's: that many of the descriptors sent with the
 *   request, SCM_RIGHTS, become interface id's tap, in order, after those
 *   config_overrides.net's own "fds" placeholders take.)
 *
 * Store URLs (store-refs.h): vm.snapshot's destination_url may be a store
 * prefix (http(s)://, s3://; the answer is then 200 with the manifest id),
 * vm.restore's source_url a store ref (prefix/ID).
 */
#define G_LOG_DOMAIN "vsnap-shim"

#include <glib/gstdio.h>
#include <string.h>

#include "routes.h"
#include "api/snapshot-body.h"
#include "api/store-refs.h"
#include "store-push-job.h"
#include "json/bounded-json.h"
#include "json/vjson.h"
#include "persist/persist.h"
#include "snapshot/directory.h"

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

static bool get_bool_default(JsonObject *obj, const char *name, bool absent, bool *out, GError **error)
{
    JsonNode *node = json_object_get_member(obj, name);
    *out = absent;
    if (!node || JSON_NODE_HOLDS_NULL(node))
        return true;
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_BOOLEAN) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "field \"%s\" must be true or false", name);
        return false;
    }
    *out = json_node_get_boolean(node);
    return true;
}

static bool get_bool(JsonObject *obj, const char *name, bool *out, GError **error)
{
    return get_bool_default(obj, name, false, out, error);
}

/* ---- vm.snapshot ---- */

/* "live_scratch": where a live snapshot copies RAM before it writes the
 * layer: "memory" (the default) or "destination" (beside the layer). */
static bool parse_scratch(const char *scratch, struct persist_snapshot_request *out, GError **error)
{
    if (scratch && !out->live) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "field \"live_scratch\" is for \"live\": true");
        return false;
    }
    if (scratch && g_strcmp0(scratch, "memory") && g_strcmp0(scratch, "destination")) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "field \"live_scratch\" must be \"memory\" or \"destination\", not \"%s\"", scratch);
        return false;
    }
    out->scratch_on_disk = !g_strcmp0(scratch, "destination");
    return true;
}

/* "live_max_passes" (1..64), "live_max_ms" (1..600000): when a live
 * snapshot whose guest outruns the copy stops anyway (a forced stop). */
static bool get_limit(JsonObject *obj, const char *name, bool live, gint64 max, unsigned *out, GError **error)
{
    JsonNode *node = json_object_get_member(obj, name);
    *out = 0;
    if (!node)
        return true;
    bool is_int = JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_INT64;
    gint64 v = is_int ? json_node_get_int(node) : 0;
    if (!live || v < 1 || v > max) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "field \"%s\" is for \"live\": true, from 1 to %" G_GINT64_FORMAT,
                    name, max);
        return false;
    }
    *out = (unsigned)v;
    return true;
}

static bool parse_snapshot(JsonObject *obj, struct persist_snapshot_request *out, GError **error)
{
    static const char *const known[] = { "destination_url", "mode", "parent_url", "live", "live_scratch",
                                         "live_max_passes", "live_max_ms", NULL };
    const char *mode = NULL, *scratch = NULL;
    if (!check_members(obj, "vm.snapshot", known, error) || !get_bool(obj, "live", &out->live, error) ||
        !get_string(obj, "live_scratch", false, &scratch, error) || !parse_scratch(scratch, out, error) ||
        !get_limit(obj, "live_max_passes", out->live, 64, &out->max_passes, error) ||
        !get_limit(obj, "live_max_ms", out->live, 600000, &out->max_ms, error) ||
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

static bool check_store_reachable(struct api_request *req, const char *field, const char *url, GError **error)
{
    if (!req->store) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_UNSUPPORTED, "%s: %s is a store URL, and this shim has no store",
                    field, url);
        return false;
    }
    return api_store_check_reachable(field, url, error);
}

/* A live snapshot answers 200 {"pause_us", "passes", "copied_pages",
 * "final_pages", "first_pass_pages", "data_pages", "file_bytes",
 * "forced_stop"} (a vsnap extension; Cloud Hypervisor's 204 stays for the
 * others). */
static void add_live_members(JsonBuilder *b, const struct persist_snapshot_result *r)
{
    vjson_int(b, "pause_us", (gint64)r->pause_us);
    vjson_int(b, "passes", r->passes);
    vjson_int(b, "copied_pages", (gint64)r->copied_pages);
    vjson_int(b, "final_pages", (gint64)r->final_pages);
    vjson_int(b, "first_pass_pages", (gint64)r->first_pass_pages);
    vjson_int(b, "data_pages", (gint64)r->data_pages);
    vjson_int(b, "file_bytes", (gint64)r->file_bytes);
    if (r->forced_stop)
        vjson_str(b, "forced_stop", r->forced_stop);
    else
        vjson_null(b, "forced_stop");
}

static JsonNode *live_json(const struct persist_snapshot_result *r)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    add_live_members(b, r);
    vjson_object_end(b);
    return json_builder_get_root(b);
}

/* A live snapshot's request waits (paused) for the job's end; a client that
 * hangs up meanwhile cancels it, as nobody would learn its result. */
struct live_wait {
    bool live;              /* else of the paused VM: Cloud Hypervisor's 204 */
    struct vmm *vmm;
    struct api_store *store;
    SoupServerMessage *msg; /* NULL once the client is gone */
    gulong gone_id;
    /* To a store: the prefix pushed to once written, the local copy
     * written first (NULL: a file:// destination). */
    char *push_url, *local_dir;
    struct persist_snapshot_result snapshot; /* a live one's figures, for the push's answer */
};

static void wait_free(struct live_wait *wait)
{
    g_free(wait->push_url);
    g_free(wait->local_dir);
    g_free(wait);
}

static void live_client_gone(SoupServerMessage *msg, gpointer data)
{
    struct live_wait *wait = data;
    g_signal_handler_disconnect(wait->msg, wait->gone_id);
    g_clear_object(&wait->msg);
    g_message("vm.snapshot: the client of the snapshot hung up: cancelling it");
    if (wait->store && wait->store->push)
        api_push_job_cancel(wait->store->push);
    else
        vmm_cancel_snapshot(wait->vmm, NULL);
}

/* The request's answer, once the job (and its push) ended. */
static void wait_reply(struct live_wait *wait, unsigned status, JsonNode *json, const GError *error)
{
    if (wait->msg) {
        g_signal_handler_disconnect(wait->msg, wait->gone_id);
        struct api_request req = { .vmm = wait->vmm, .msg = wait->msg };
        if (error)
            reply_error(&req, error);
        else if (json)
            reply_json(&req, status, json);
        else
            reply_no_content(&req);
        soup_server_message_unpause(wait->msg);
        g_object_unref(wait->msg);
    } else if (json) {
        json_node_unref(json);
    }
    wait_free(wait);
}

/* 200 {"id", "url": prefix/id, "local_url", "objects_sent", "objects_skipped",
 * "bytes_sent"}: the manifest id a vm.restore of url/id takes; a live
 * snapshot's members too (live not NULL). */
static JsonNode *pushed_json(const char *prefix, const char *local_dir, const struct store_push_result *r,
                             const struct persist_snapshot_result *live)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *url = g_strdup_printf("%s%s%s", prefix, g_str_has_suffix(prefix, "/") ? "" : "/", r->id);
    g_autofree char *local_url = g_strconcat("file://", local_dir, NULL);
    vjson_object_begin(b, NULL);
    vjson_str(b, "id", r->id);
    vjson_str(b, "url", url);
    vjson_str(b, "local_url", local_url);
    vjson_int(b, "objects_sent", r->objects_sent);
    vjson_int(b, "objects_skipped", r->objects_skipped);
    vjson_int(b, "bytes_sent", (gint64)r->bytes_sent);
    if (live)
        add_live_members(b, live);
    vjson_object_end(b);
    return json_builder_get_root(b);
}

/* The local copy stays whatever the push did: the VM's disks continue from
 * its disk layers, and a later diff names it as parent_url. */
static void push_done(bool ok, const struct store_push_result *result, const GError *error, void *data)
{
    struct live_wait *wait = data;
    if (ok)
        return wait_reply(wait, 200,
                          pushed_json(wait->push_url, wait->local_dir, result, wait->live ? &wait->snapshot : NULL),
                          NULL);
    g_autoptr(GError) told = g_error_copy(error);
    g_prefix_error(&told, "the snapshot was written to file://%s and stays there (the VM %s), but ", wait->local_dir,
                   vmm_get_state(wait->vmm) == VMM_STATE_PAUSED ? "is still paused" : "runs on");
    wait_reply(wait, 0, NULL, told);
}

static void live_done(bool ok, const struct persist_snapshot_result *result, const GError *error, void *data)
{
    struct live_wait *wait = data;
    if (ok && wait->store)
        api_store_keep_pulled(wait->store);
    if (!ok && wait->local_dir)
        g_rmdir(wait->local_dir); /* a failed snapshot leaves its destination as it found it: empty */
    if (ok && wait->push_url && wait->msg) {
        wait->snapshot = *result;
        api_push_job_start(wait->store, wait->local_dir, wait->push_url, push_done, wait);
        return;
    }
    wait_reply(wait, 200, ok && wait->live ? live_json(result) : NULL, ok ? NULL : error);
}

/* Live or not, a snapshot runs as a job: the API answers and
 * vm.cancel-snapshot ends it meanwhile; push_url: then pushed there. */
static void start_job(struct api_request *req, const struct persist_snapshot_request *sreq, const char *push_url)
{
    g_autoptr(GError) error = NULL;
    struct live_wait *wait = g_new0(struct live_wait, 1);
    wait->live = sreq->live;
    wait->vmm = req->vmm;
    wait->store = req->store;
    wait->push_url = g_strdup(push_url);
    if (push_url)
        wait->local_dir = g_strdup(sreq->destination_url + strlen("file://"));
    if (!vmm_snapshot_live(req->vmm, sreq, live_done, wait, &error)) {
        if (wait->local_dir)
            g_rmdir(wait->local_dir);
        wait_free(wait);
        return reply_error(req, error);
    }
    wait->msg = g_object_ref(req->msg);
    wait->gone_id = g_signal_connect(req->msg, "disconnected", G_CALLBACK(live_client_gone), wait);
    soup_server_message_pause(req->msg);
}

static void handle_cancel_snapshot(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    if (req->store && req->store->push) {
        api_push_job_cancel(req->store->push);
        return reply_no_content(req);
    }
    bool ok = vmm_cancel_snapshot(req->vmm, &error);
    reply_result(req, ok, error);
}

/* Written into a new local directory (the VM's work directory, else beside
 * the cache), then pushed, as one job. */
static void snapshot_to_store(struct api_request *req, struct persist_snapshot_request *sreq)
{
    g_autoptr(GError) error = NULL;
    const char *prefix = sreq->destination_url;
    if (!check_store_reachable(req, "destination_url", prefix, &error))
        return reply_error(req, error);
    if (api_store_is_store_url(sreq->parent_url)) {
        g_set_error(&error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "parent_url must be the parent's local directory (the local_url its vm.snapshot to a store "
                    "answered), not the store URL %s", sreq->parent_url);
        return reply_error(req, error);
    }
    if (req->store->push) {
        g_set_error(&error, SHIM_ERROR, SHIM_ERROR_BUSY, "a push to a store is under way (vm.info's "
                    "vsnap.snapshot_job); vm.cancel-snapshot ends it");
        return reply_error(req, error);
    }
    g_autofree char *local = api_store_local_dir(req->store, vmm_work_dir(req->vmm), "store-snapshot", &error);
    if (!local)
        return reply_error(req, error);
    g_autofree char *local_url = g_strconcat("file://", local, NULL);
    sreq->destination_url = local_url;
    start_job(req, sreq, prefix);
}

static void handle_snapshot(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    struct persist_snapshot_request sreq = { 0 };
    if (!snapshot_body_parse(req->body, parser, &sreq, &error))
        return reply_error(req, error);
    if (api_store_is_store_url(sreq.destination_url))
        return snapshot_to_store(req, &sreq);
    start_job(req, &sreq, NULL);
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
                                         "ondemand_block_size", "prefetch", "ondemand_readahead",
                                         "ondemand_workset", "ondemand_workset_write", "config_overrides",
                                         "net_fds", NULL };
    const char *mode = NULL;
    bool readahead = true, workset = true, workset_write = true;
    if (!check_members(obj, "vm.restore", known, error) ||
        !get_string(obj, "source_url", true, &out->req.source_url, error) ||
        !get_string(obj, "memory_restore_mode", false, &mode, error) ||
        !get_bool(obj, "prefault", &out->req.prefault, error) || !get_bool(obj, "resume", &out->resume, error) ||
        !get_bool(obj, "prefetch", &out->req.prefetch, error) ||
        !get_bool_default(obj, "ondemand_readahead", true, &readahead, error) ||
        !get_bool_default(obj, "ondemand_workset", true, &workset, error) ||
        !get_bool_default(obj, "ondemand_workset_write", true, &workset_write, error) ||
        !parse_block_size(obj, &out->req.block_size, error))
        return false;
    out->req.no_readahead = !readahead;
    out->req.no_workset = !workset;
    out->req.workset_hand_over = !workset_write;
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

/* config_overrides.vsnap_work_dir, when it is a string. */
static const char *override_work_dir(const struct restore_body *body)
{
    JsonObject *over = body->req.config_overrides;
    JsonNode *node = over ? json_object_get_member(over, "vsnap_work_dir") : NULL;
    bool is_string = node && JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING;
    return is_string ? json_node_get_string(node) : NULL;
}

/* A store ref is imported through the cache into a directory of its own
 * under the VM's work directory (else beside the cache), which the restore
 * then reads as any local snapshot: its layers are the cached files (hard
 * links), so an on-demand restore maps them as they are. The directory
 * stays while the VM exists (its disks continue from its disk layers) and
 * goes with it (vm.delete, the shim's exit) unless the VM took a snapshot,
 * which names it (store-refs.h). */
static bool import_source(struct api_request *req, struct restore_body *body, char **dir, GError **error)
{
    const char *ref = body->req.source_url;
    if (vmm_get_state(req->vmm) != VMM_STATE_NOT_CREATED) /* vmm_restore says why, before any download */
        return true;
    if (!check_store_reachable(req, "source_url", ref, error))
        return false;
    *dir = api_store_import(req->store, ref, override_work_dir(body), error);
    return *dir != NULL;
}

static void handle_restore(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    struct restore_body body = { 0 };
    g_autofree char *imported = NULL, *imported_url = NULL;
    bool ok = restore_body_parse(req->body, parser, &body, &error) && attach_restore_fds(req, parser, &body, &error);
    if (ok && api_store_is_store_url(body.req.source_url)) {
        ok = import_source(req, &body, &imported, &error);
        if (imported)
            body.req.source_url = imported_url = g_strconcat("file://", imported, NULL);
    }
    ok = ok && vmm_restore(req->vmm, &body.req, body.resume, &error);
    if (!ok && imported)
        api_store_discard_import(req->store, imported);
    reply_result(req, ok, error);
}

const struct route snapshot_routes[] = {
    { "vm.snapshot", "PUT", true, handle_snapshot },
    { "vm.restore", "PUT", true, handle_restore },
    { "vm.cancel-snapshot", "PUT", false, handle_cancel_snapshot },
    { 0 },
};
