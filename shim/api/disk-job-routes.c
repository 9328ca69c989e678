/* vsnap's block jobs (vmm.h): vm.disk-pull, vm.disk-commit, vm.disk-job-pivot, vm.disk-job-info,
 * vm.disk-job-speed and vm.disk-job-cancel, for the daemon's virsh
 * blockpull and blockjob. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "routes.h"
#include "json/bounded-json.h"
#include "json/vjson.h"

/* {"id": "<disk>"} plus, where the endpoint takes it, "bandwidth" (bytes/s,
 * 0 unlimited); nothing else. */
static bool parse_body(struct api_request *req, const char *endpoint, bool takes_bandwidth, const char *extra,
                       JsonParser *parser, const char **id, uint64_t *bandwidth, const char **extra_value,
                       GError **error)
{
    gsize len;
    const char *text = g_bytes_get_data(req->body, &len);
    if (!bounded_json_load_data(parser, text, len, API_MAX_BODY_BYTES, error)) {
        g_prefix_error(error, "the body is not valid JSON: ");
        return false;
    }
    JsonNode *root = json_parser_get_root(parser);
    JsonObject *obj = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonNode *idn = obj ? json_object_get_member(obj, "id") : NULL;
    JsonNode *bw = obj && takes_bandwidth ? json_object_get_member(obj, "bandwidth") : NULL;
    JsonNode *ex = obj && extra ? json_object_get_member(obj, extra) : NULL;
    guint members = 1 + (bw != NULL) + (ex != NULL);
    bool ok = idn && JSON_NODE_HOLDS_VALUE(idn) && json_node_get_value_type(idn) == G_TYPE_STRING &&
              (!extra || (ex && JSON_NODE_HOLDS_VALUE(ex) && json_node_get_value_type(ex) == G_TYPE_STRING)) &&
              json_object_get_size(obj) == members &&
              (!bw || (JSON_NODE_HOLDS_VALUE(bw) && json_node_get_value_type(bw) == G_TYPE_INT64 &&
                       json_node_get_int(bw) >= 0));
    if (!ok) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "%s takes {\"id\": \"<disk>\"%s%s%s}", endpoint,
                    takes_bandwidth ? ", \"bandwidth\": <bytes/s, 0: unlimited>" : "", extra ? ", " : "",
                    extra ? extra : "");
        return false;
    }
    *id = json_node_get_string(idn);
    if (extra)
        *extra_value = json_node_get_string(ex);
    *bandwidth = bw ? (uint64_t)json_node_get_int(bw) : 0;
    return true;
}

static bool parse_job_body(struct api_request *req, const char *endpoint, bool takes_bandwidth, JsonParser *parser,
                           const char **id, uint64_t *bandwidth, GError **error)
{
    return parse_body(req, endpoint, takes_bandwidth, NULL, parser, id, bandwidth, NULL, error);
}

static void handle_pull(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *id;
    uint64_t bandwidth;
    bool ok = parse_job_body(req, "vm.disk-pull", true, parser, &id, &bandwidth, &error) &&
              vmm_disk_pull(req->vmm, id, bandwidth, &error);
    reply_result(req, ok, error);
}

static void handle_commit(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *id;
    uint64_t bandwidth;
    if (req->nfds > 1) {
        g_set_error(&error, SHIM_ERROR, SHIM_ERROR_INVALID, "vm.disk-commit takes one descriptor (the image)");
        reply_error(req, error);
        return;
    }
    bool ok = parse_job_body(req, "vm.disk-commit", true, parser, &id, &bandwidth, &error) &&
              vmm_disk_commit(req->vmm, id, bandwidth, req->nfds ? req->fds[0] : -1, &error);
    reply_result(req, ok, error);
}

static void handle_copy(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *id;
    uint64_t bandwidth;
    if (req->nfds != 1) {
        g_set_error(&error, SHIM_ERROR, SHIM_ERROR_INVALID, "vm.disk-copy takes one descriptor (the target image)");
        reply_error(req, error);
        return;
    }
    const char *target = NULL;
    bool ok = parse_body(req, "vm.disk-copy", true, "target", parser, &id, &bandwidth, &target, &error) &&
              vmm_disk_copy(req->vmm, id, target, bandwidth, req->fds[0], &error);
    reply_result(req, ok, error);
}

static void handle_pivot(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *id;
    uint64_t unused;
    bool ok = parse_job_body(req, "vm.disk-job-pivot", false, parser, &id, &unused, &error) &&
              vmm_disk_job_pivot(req->vmm, id, &error);
    reply_result(req, ok, error);
}

static void handle_speed(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *id;
    uint64_t bandwidth;
    bool ok = parse_job_body(req, "vm.disk-job-speed", true, parser, &id, &bandwidth, &error) &&
              vmm_disk_job_set_speed(req->vmm, id, bandwidth, &error);
    reply_result(req, ok, error);
}

static void handle_cancel(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *id;
    uint64_t unused;
    bool ok = parse_job_body(req, "vm.disk-job-cancel", false, parser, &id, &unused, &error) &&
              vmm_disk_job_cancel(req->vmm, id, &error);
    reply_result(req, ok, error);
}

/* vm.disk-resize {"id"} -> {"capacity": bytes}. */
static void handle_resize(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *id;
    uint64_t unused, capacity = 0;
    if (!parse_job_body(req, "vm.disk-resize", false, parser, &id, &unused, &error) ||
        !vmm_disk_resize(req->vmm, id, &capacity, &error)) {
        reply_error(req, error);
        return;
    }
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_uint(b, "capacity", capacity);
    vjson_object_end(b);
    reply_json(req, SOUP_STATUS_OK, json_builder_get_root(b));
}

/* GET vm.disk-job-info?id=<disk> -> {"id", "kind", "cur", "end", "copied", "bandwidth", "ready"}; 404 without a job. */
static void handle_info(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    const char *id = req->query ? g_hash_table_lookup(req->query, "id") : NULL;
    struct disk_job_info info;
    if (!id) {
        g_set_error(&error, SHIM_ERROR, SHIM_ERROR_INVALID, "vm.disk-job-info takes ?id=<disk>");
        reply_error(req, error);
        return;
    }
    if (!vmm_disk_job_info(req->vmm, id, &info, &error)) {
        reply_error(req, error);
        return;
    }
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "id", id);
    vjson_str(b, "kind", info.kind);
    vjson_uint(b, "cur", info.cur);
    vjson_uint(b, "end", info.end);
    vjson_uint(b, "copied", info.copied);
    vjson_uint(b, "bandwidth", info.bandwidth);
    vjson_bool(b, "ready", info.ready);
    vjson_object_end(b);
    reply_json(req, SOUP_STATUS_OK, json_builder_get_root(b));
}

const struct route disk_job_routes[] = {
    { "vm.disk-pull", "PUT", true, handle_pull },
    { "vm.disk-commit", "PUT", true, handle_commit },
    { "vm.disk-copy", "PUT", true, handle_copy },
    { "vm.disk-job-pivot", "PUT", true, handle_pivot },
    { "vm.disk-job-speed", "PUT", true, handle_speed },
    { "vm.disk-job-cancel", "PUT", true, handle_cancel },
    { "vm.disk-job-info", "GET", false, handle_info },
    { "vm.disk-resize", "PUT", true, handle_resize },
    { 0 },
};
