#include "monitor/monitor.h"

#include <curl/curl.h>
#include <json-glib/json-glib.h>

#include "http-fds.h"
#include "json/bounded-json.h"
#include "json/vjson.h"
#include "util/virt-error.h"

/* No call waits forever. The API answers in milliseconds, but vm.pause may
 * wait up to 10 s for the vCPUs inside the shim, so quick calls get well
 * over that; creating and booting a VM may touch a lot of memory; vm.snapshot
 * and vm.restore read or write all of it (ram_timeout_ms). A ping is a
 * probe, repeated while a shim starts. */
#define PING_TIMEOUT_MS 5000L
#define QUICK_TIMEOUT_MS 30000L
#define SLOW_TIMEOUT_MS 60000L
#define PER_GIB_TIMEOUT_MS 30000L

/* For a call that reads or writes all guest RAM: a minute, and half a minute
 * per GiB. */
static long ram_timeout_ms(uint64_t ram_bytes)
{
    uint64_t gib = (ram_bytes + (1ull << 30) - 1) >> 30;
    return SLOW_TIMEOUT_MS + (long)MIN(gib, 1u << 16) * PER_GIB_TIMEOUT_MS;
}

static size_t collect_body(char *data, size_t size, size_t nmemb, void *user)
{
    g_string_append_len(user, data, size * nmemb);
    return size * nmemb;
}

/* What the shim answers is bounded like any JSON from outside: a shim runs
 * beside a guest and is not trusted to nest sanely. vm.info holds a VmConfig
 * (at most 1 MiB as a vm.create body) and a little more. */
#define REPLY_MAX_BYTES (2u << 20)

/* A JSON list of strings, as Cloud Hypervisor's error chain: its messages
 * joined with ": "; NULL if node is anything else. */
static char *joined_messages(JsonNode *node)
{
    if (!JSON_NODE_HOLDS_ARRAY(node))
        return NULL;
    JsonArray *list = json_node_get_array(node);
    g_autoptr(GString) text = g_string_new(NULL);
    for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonNode *item = json_array_get_element(list, i);
        if (!JSON_NODE_HOLDS_VALUE(item) || json_node_get_value_type(item) != G_TYPE_STRING)
            return NULL;
        g_string_append_printf(text, "%s%s", i ? ": " : "", json_node_get_string(item));
    }
    return g_string_free(g_steal_pointer(&text), FALSE);
}

char *monitor_error_text(const char *body, size_t len)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    if (len && bounded_json_load_data(parser, body, len, REPLY_MAX_BYTES, NULL)) {
        JsonNode *root = json_parser_get_root(parser);
        char *joined = root ? joined_messages(root) : NULL;
        if (joined)
            return joined;
        /* Shims from before the list (still running across a daemon upgrade)
         * answered {"error": "..."}. */
        if (root && JSON_NODE_HOLDS_OBJECT(root) &&
            json_object_has_member(json_node_get_object(root), "error"))
            return g_strdup(json_object_get_string_member_with_default(json_node_get_object(root),
                                                                       "error", ""));
    }
    return g_strstrip(g_strndup(body, MIN(len, 500)));
}

static bool check_answer(const char *endpoint, long status, const GString *body, GString *response,
                         GError **error);

/* A request that carries descriptors (SCM_RIGHTS), which libcurl cannot send. */
static bool request_fds(const char *api_socket, const char *endpoint, const char *json, const int *fds,
                        size_t n_fds, long timeout_ms, GString *response, GError **error)
{
    g_autofree char *path = g_strdup_printf("/api/v1/%s", endpoint);
    g_autoptr(GString) body = g_string_new(NULL);
    long status = 0;
    return http_fds_request(api_socket, "PUT", path, json, fds, n_fds, timeout_ms, &status, body, error) &&
           check_answer(endpoint, status, body, response, error);
}

/* *http_status (when given) is the shim's answer, 0 when it gave none. */
static bool request_status(const char *api_socket, const char *method, const char *endpoint,
                           const char *json, long timeout_ms, GString *response,
                           long *http_status, GError **error)
{
    CURL *curl = curl_easy_init();
    if (!curl) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR, "cannot initialise libcurl");
        return false;
    }
    g_autofree char *url = g_strdup_printf("http://localhost/api/v1/%s", endpoint);
    g_autoptr(GString) body = g_string_new(NULL);
    struct curl_slist *headers = NULL;
    curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, api_socket);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
    if (json) {
        headers = curl_slist_append(headers, "Content-Type: application/json");
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json);
    } else if (g_str_equal(method, "PUT")) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
    }
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (http_status)
        *http_status = rc == CURLE_OK ? status : 0;

    if (rc == CURLE_OPERATION_TIMEDOUT) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_TIMEOUT,
                    "the VM's API at %s did not answer %s within %ld s", api_socket, endpoint,
                    timeout_ms / 1000);
        return false;
    }
    if (rc != CURLE_OK) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "cannot reach the VM's API at %s (%s): %s", api_socket, endpoint,
                    curl_easy_strerror(rc));
        return false;
    }
    return check_answer(endpoint, status, body, response, error);
}

static bool check_answer(const char *endpoint, long status, const GString *body, GString *response,
                         GError **error)
{
    if (status < 200 || status >= 300) {
        g_autofree char *text = monitor_error_text(body->str, body->len);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "the VM refused %s (HTTP %ld): %s", endpoint, status,
                    *text ? text : "no details");
        return false;
    }
    if (response)
        g_string_assign(response, body->str);
    return true;
}

static bool request(const char *api_socket, const char *method, const char *endpoint,
                    const char *json, long timeout_ms, GString *response, GError **error)
{
    return request_status(api_socket, method, endpoint, json, timeout_ms, response, NULL, error);
}

bool monitor_ping(const char *api_socket, GError **error)
{
    return request(api_socket, "GET", "vmm.ping", NULL, PING_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_create(const char *api_socket, const char *json, const int *fds, size_t n_fds,
                       GError **error)
{
    if (n_fds)
        return request_fds(api_socket, "vm.create", json, fds, n_fds, SLOW_TIMEOUT_MS, NULL, error);
    return request(api_socket, "PUT", "vm.create", json, SLOW_TIMEOUT_MS, NULL, error);
}

/* vsnap's extension: the link state virtio-net's status field shows the guest. */
bool monitor_vm_set_link(const char *api_socket, const char *id, bool up, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "id", id);
    vjson_bool(b, "up", up);
    vjson_object_end(b);
    g_autofree char *body = vjson_finish(b, false);
    return request(api_socket, "PUT", "vm.set-link", body, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_move_disk_layers(const char *api_socket, const char *from, const char *to, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "from", from);
    vjson_str(b, "to", to); /* null: the layers left the chains */
    vjson_object_end(b);
    g_autofree char *body = vjson_finish(b, false);
    return request(api_socket, "PUT", "vm.move-disk-layers", body, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_boot(const char *api_socket, GError **error)
{
    return request(api_socket, "PUT", "vm.boot", NULL, SLOW_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_pause(const char *api_socket, GError **error)
{
    return request(api_socket, "PUT", "vm.pause", NULL, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_resume(const char *api_socket, GError **error)
{
    return request(api_socket, "PUT", "vm.resume", NULL, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_power_button(const char *api_socket, GError **error)
{
    return request(api_socket, "PUT", "vm.power-button", NULL, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_reboot(const char *api_socket, GError **error)
{
    return request(api_socket, "PUT", "vm.reboot", NULL, SLOW_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_coredump(const char *api_socket, int fd, uint64_t ram_bytes, GError **error)
{
    return request_fds(api_socket, "vm.coredump", "{}", &fd, 1, ram_timeout_ms(ram_bytes), NULL, error);
}

bool monitor_vm_nmi(const char *api_socket, GError **error)
{
    return request(api_socket, "PUT", "vm.nmi", NULL, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_send_scancodes(const char *api_socket, const uint8_t *codes, size_t n, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_array_begin(b, "scancodes");
    for (size_t i = 0; i < n; i++)
        json_builder_add_int_value(b, codes[i]);
    vjson_array_end(b);
    vjson_object_end(b);
    g_autofree char *body = vjson_finish(b, false);
    return request(api_socket, "PUT", "vm.send-scancodes", body, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_shutdown(const char *api_socket, GError **error)
{
    return request(api_socket, "PUT", "vm.shutdown", NULL, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vmm_shutdown(const char *api_socket, GError **error)
{
    return request(api_socket, "PUT", "vmm.shutdown", NULL, QUICK_TIMEOUT_MS, NULL, error);
}

/* vm.snapshot's body: a full layer, or a diff on parent_url; live or paused. */
static guint live_max_passes, live_max_ms;

void monitor_set_live_limits(unsigned max_passes, unsigned max_ms)
{
    g_atomic_int_set(&live_max_passes, max_passes);
    g_atomic_int_set(&live_max_ms, max_ms);
}

static char *snapshot_body(const char *destination_url, const char *parent_url, bool live)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "destination_url", destination_url);
    if (live)
        vjson_bool(b, "live", true);
    if (live && g_atomic_int_get(&live_max_passes))
        vjson_int(b, "live_max_passes", g_atomic_int_get(&live_max_passes));
    if (live && g_atomic_int_get(&live_max_ms))
        vjson_int(b, "live_max_ms", g_atomic_int_get(&live_max_ms));
    if (parent_url) {
        vjson_str(b, "mode", "diff");
        vjson_str(b, "parent_url", parent_url);
    }
    vjson_object_end(b);
    return vjson_finish(b, false);
}

bool monitor_vm_snapshot(const char *api_socket, const char *destination_url,
                         const char *parent_url, uint64_t ram_bytes, bool *refused,
                         bool *cancelled, GError **error)
{
    g_autofree char *body = snapshot_body(destination_url, parent_url, false);
    long status = 0;
    bool ok = request_status(api_socket, "PUT", "vm.snapshot", body, ram_timeout_ms(ram_bytes),
                             NULL, &status, error);
    if (refused)
        *refused = status >= 400 && status < 500 && status != 409;
    *cancelled = status == 409;
    return ok;
}

static uint64_t member_u64(JsonObject *obj, const char *name);

static void parse_live_result(const GString *answer, struct monitor_live_result *r)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    *r = (struct monitor_live_result){0};
    if (!json_parser_load_from_data(parser, answer->str, (gssize)answer->len, NULL))
        return;
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return;
    JsonObject *o = json_node_get_object(root);
    r->pause_us = member_u64(o, "pause_us");
    r->copied_pages = member_u64(o, "copied_pages");
    r->final_pages = member_u64(o, "final_pages");
    r->passes = (unsigned)member_u64(o, "passes");
    JsonNode *forced = json_object_get_member(o, "forced_stop");
    if (forced && JSON_NODE_HOLDS_VALUE(forced) && json_node_get_value_type(forced) == G_TYPE_STRING)
        g_strlcpy(r->forced_stop, json_node_get_string(forced), sizeof r->forced_stop);
}

bool monitor_vm_snapshot_live(const char *api_socket, const char *destination_url,
                              const char *parent_url, uint64_t ram_bytes, bool *refused,
                              bool *cancelled, struct monitor_live_result *result, GError **error)
{
    g_autofree char *body = snapshot_body(destination_url, parent_url, true);
    g_autoptr(GString) answer = g_string_new(NULL);
    long status = 0;
    /* The passes and the layer's write take what a paused snapshot takes,
     * and more (the guest competes): ram_timeout_ms's margin covers it. */
    bool ok = request_status(api_socket, "PUT", "vm.snapshot", body, ram_timeout_ms(ram_bytes),
                             answer, &status, error);
    *cancelled = status == 409;
    if (refused)
        *refused = status >= 400 && status < 500 && status != 409;
    if (ok)
        parse_live_result(answer, result);
    return ok;
}

bool monitor_vm_cancel_snapshot(const char *api_socket, GError **error)
{
    return request(api_socket, "PUT", "vm.cancel-snapshot", NULL, QUICK_TIMEOUT_MS, NULL, error);
}

/* Every host path and tap of the restored VM is the live definition's (a
 * snapshot from a store supplies none). Of the vsock device the socket is
 * the host's business, and a clone's CID its own (the restore's transport
 * reset has the guest read it again); any other restore keeps the guest's
 * CID, from the snapshot. */
static void add_config_overrides(JsonBuilder *b, const struct monitor_restore *r)
{
    vjson_object_begin(b, "config_overrides");
    domain_def_add_vm_serial(b, r->live);
    domain_def_add_vm_file_overrides(b, r->live);
    if (r->disk_work_dir && r->live->n_disks > 0)
        vjson_str(b, "vsnap_work_dir", r->disk_work_dir);
    if (r->live->vsock.present) {
        vjson_object_begin(b, "vsock");
        vjson_str(b, "socket", r->vsock_socket);
        if (domain_def_is_clone(r->live))
            vjson_int(b, "cid", r->live->vsock.cid);
        vjson_object_end(b);
    }
    /* Each interface gets this run's tap (its descriptor) and the MAC of
     * the definition being restored: a clone's own, not its origin's. */
    if (r->n_net_fds)
        domain_def_add_vm_net_overrides(b, r->live);
    vjson_object_end(b);
}

bool monitor_vm_restore(const char *api_socket, const struct monitor_restore *r, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "source_url", r->source_url);
    vjson_str(b, "memory_restore_mode", r->mode);
    vjson_bool(b, "resume", r->resume);
    vjson_bool(b, "prefault", false);
    /* A working set is recorded for the next restore of the same snapshot;
     * a save image has none, and recording costs readahead (shim/persist). */
    if (r->once && g_strcmp0(r->mode, "ondemand") == 0)
        vjson_bool(b, "ondemand_workset", false);
    /* The daemon owns snapshot directories: it writes the record there. */
    else if (r->hand_over_workset && g_strcmp0(r->mode, "ondemand") == 0)
        vjson_bool(b, "ondemand_workset_write", false);
    add_config_overrides(b, r);
    vjson_object_end(b);
    g_autofree char *body = vjson_finish(b, false);
    long timeout_ms = ram_timeout_ms(r->live->memory_kib * 1024);
    if (r->n_net_fds)
        return request_fds(api_socket, "vm.restore", body, r->net_fds, r->n_net_fds, timeout_ms, NULL, error);
    return request(api_socket, "PUT", "vm.restore", body, timeout_ms, NULL, error);
}

void vm_info_clear(struct vm_info *info)
{
    g_clear_pointer(&info->state, g_free);
    g_clear_pointer(&info->last_stop_reason, g_free);
    g_clear_pointer(&info->serial_pty, g_free);
    for (size_t i = 0; i < info->n_disks; i++) {
        g_free(info->disks[i].id);
        g_strfreev(info->disks[i].layers);
        g_free(info->disks[i].overlay);
    }
    g_clear_pointer(&info->disks, g_free);
    info->n_disks = 0;
}

static char **string_array(JsonObject *obj, const char *name)
{
    JsonNode *node = json_object_get_member(obj, name);
    JsonArray *array = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    guint n = array ? json_array_get_length(array) : 0;
    char **out = g_new0(char *, n + 1);
    guint k = 0;
    for (guint i = 0; i < n; i++) {
        JsonNode *e = json_array_get_element(array, i);
        if (JSON_NODE_HOLDS_VALUE(e) && json_node_get_value_type(e) == G_TYPE_STRING)
            out[k++] = g_strdup(json_node_get_string(e));
    }
    return out;
}

/* vm.info's config.disks: each disk's id, vsnap_chain and vsnap_overlay. */
static void read_disk_chains(JsonObject *obj, struct vm_info *info)
{
    JsonNode *config = json_object_get_member(obj, "config");
    JsonNode *disks = config && JSON_NODE_HOLDS_OBJECT(config)
                          ? json_object_get_member(json_node_get_object(config), "disks") : NULL;
    JsonArray *array = disks && JSON_NODE_HOLDS_ARRAY(disks) ? json_node_get_array(disks) : NULL;
    guint n = array ? json_array_get_length(array) : 0;
    info->disks = g_new0(struct vm_disk_chain, MAX(n, 1));
    for (guint i = 0; i < n; i++) {
        JsonNode *e = json_array_get_element(array, i);
        if (!JSON_NODE_HOLDS_OBJECT(e))
            continue;
        JsonObject *disk = json_node_get_object(e);
        struct vm_disk_chain *c = &info->disks[info->n_disks++];
        c->id = g_strdup(json_object_get_string_member_with_default(disk, "id", ""));
        c->layers = string_array(disk, "vsnap_chain");
        c->overlay = g_strdup(json_object_get_string_member_with_default(disk, "vsnap_overlay", NULL));
    }
}

/* GET path, its answer parsed into parser (bounded); the root object, which
 * parser owns, or NULL with the error naming path. */
static JsonObject *get_object(const char *api_socket, const char *path, JsonParser *parser, GError **error)
{
    g_autoptr(GString) body = g_string_new(NULL);
    if (!request(api_socket, "GET", path, NULL, QUICK_TIMEOUT_MS, body, error))
        return NULL;
    g_autoptr(GError) parse_error = NULL;
    if (!bounded_json_load_data(parser, body->str, body->len, REPLY_MAX_BYTES, &parse_error) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "%s answered something that is not a JSON object: %s", path,
                    parse_error ? parse_error->message : body->str);
        return NULL;
    }
    return json_node_get_object(json_parser_get_root(parser));
}

bool monitor_vm_info(const char *api_socket, struct vm_info *info, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *obj = get_object(api_socket, "vm.info", parser, error);
    if (!obj)
        return false;
    info->state = g_strdup(json_object_get_string_member_with_default(obj, "state", ""));
    info->memory_actual_size =
        json_object_get_int_member_with_default(obj, "memory_actual_size", 0);
    JsonObject *vsnap = json_object_has_member(obj, "vsnap")
                            ? json_object_get_object_member(obj, "vsnap") : NULL;
    if (vsnap) {
        JsonNode *reason = json_object_get_member(vsnap, "last_stop_reason");
        if (reason && JSON_NODE_HOLDS_VALUE(reason))
            info->last_stop_reason = g_strdup(json_node_get_string(reason));
        /* The shim flattens the guest's announcement into the vsnap object:
         * "ready": true beside "generation", "boot_id", "ready_ns". */
        info->ready = json_object_get_boolean_member_with_default(vsnap, "ready", FALSE);
        const char *pty = json_object_get_string_member_with_default(vsnap, "serial_pty", NULL);
        info->serial_pty = g_strdup(pty);
    }
    read_disk_chains(obj, info);
    return true;
}

static uint64_t member_u64(JsonObject *obj, const char *name)
{
    gint64 v = json_object_get_int_member_with_default(obj, name, 0);
    return v > 0 ? (uint64_t)v : 0;
}

bool monitor_vm_snapshot_job(const char *api_socket, struct monitor_snapshot_job *job, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *obj = get_object(api_socket, "vm.info", parser, error);
    JsonNode *vsnap = obj ? json_object_get_member(obj, "vsnap") : NULL;
    JsonNode *node = vsnap && JSON_NODE_HOLDS_OBJECT(vsnap)
                         ? json_object_get_member(json_node_get_object(vsnap), "snapshot_job") : NULL;
    if (!node || !JSON_NODE_HOLDS_OBJECT(node))
        return false;
    JsonObject *o = json_node_get_object(node);
    *job = (struct monitor_snapshot_job){
        .ram_pages = member_u64(o, "ram_pages"), .copied_pages = member_u64(o, "copied_pages"),
        .pass_pages_total = member_u64(o, "pass_pages_total"),
        .pass_pages_copied = member_u64(o, "pass_pages_copied"),
        .dirty_pages_per_s = member_u64(o, "dirty_pages_per_s"), .pass = (unsigned)member_u64(o, "pass"),
    };
    g_strlcpy(job->phase, json_object_get_string_member_with_default(o, "phase", ""), sizeof job->phase);
    return true;
}

/* obj.name.name2 as an object, or NULL. */
static JsonObject *member_object(JsonObject *obj, const char *name)
{
    JsonNode *node = obj ? json_object_get_member(obj, name) : NULL;
    return node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
}

bool monitor_vm_ondemand(const char *api_socket, struct monitor_ondemand *od, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *obj = get_object(api_socket, "vm.info", parser, error);
    JsonObject *o = member_object(member_object(member_object(obj, "vsnap"), "snapshot"), "ondemand");
    if (!o)
        return false;
    JsonNode *ms = json_object_get_member(o, "workset_ms");
    *od = (struct monitor_ondemand){
        .faults = member_u64(o, "faults"), .pages_copied = member_u64(o, "pages_copied"),
        .blocks_read_ahead = member_u64(o, "blocks_read_ahead"),
        .blocks_prefetched = member_u64(o, "blocks_prefetched"),
        .prefetch_hits = member_u64(o, "prefetch_hits"), .prefetch_misses = member_u64(o, "prefetch_misses"),
        .workset_blocks = member_u64(o, "workset_blocks"),
        .workset_ms = ms && JSON_NODE_HOLDS_VALUE(ms) ? (int64_t)member_u64(o, "workset_ms") : -1,
    };
    g_strlcpy(od->record, json_object_get_string_member_with_default(o, "record", "none"), sizeof od->record);
    return true;
}

bool monitor_vm_workset(const char *api_socket, char **text, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *obj = get_object(api_socket, "vm.workset", parser, error);
    if (!obj)
        return false;
    JsonNode *node = json_object_get_member(obj, "workset");
    *text = node && JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING
                ? g_strdup(json_node_get_string(node)) : NULL;
    return true;
}

static uint64_t counter(JsonObject *disk, const char *name)
{
    gint64 v = json_object_get_int_member_with_default(disk, name, 0);
    return v > 0 ? (uint64_t)v : 0;
}

bool monitor_vm_disk_counters(const char *api_socket, const char *id, struct disk_counters *out,
                              GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *all = get_object(api_socket, "vm.counters", parser, error);
    if (!all)
        return false;
    JsonNode *node = json_object_get_member(all, id);
    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "the VM has no counters for disk '%s'", id);
        return false;
    }
    JsonObject *disk = json_node_get_object(node);
    *out = (struct disk_counters){
        .read_ops = counter(disk, "read_ops"),
        .read_bytes = counter(disk, "read_bytes"),
        .write_ops = counter(disk, "write_ops"),
        .write_bytes = counter(disk, "write_bytes"),
        .flush_ops = counter(disk, "flush_ops"),
        .io_errors = counter(disk, "io_errors"),
        .nospace_errors = counter(disk, "nospace_errors"),
        .last_errno = counter(disk, "last_errno"),
    };
    return true;
}

/* ---- block jobs (vm.disk-pull, vm.disk-job-*) ---- */

static char *disk_job_body(const char *id, bool with_bandwidth, uint64_t bandwidth)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "id", id);
    if (with_bandwidth)
        vjson_uint(b, "bandwidth", bandwidth);
    vjson_object_end(b);
    return vjson_finish(b, false);
}

bool monitor_vm_disk_pull(const char *api_socket, const char *id, uint64_t bandwidth, GError **error)
{
    g_autofree char *body = disk_job_body(id, true, bandwidth);
    return request(api_socket, "PUT", "vm.disk-pull", body, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_disk_commit(const char *api_socket, const char *id, uint64_t bandwidth, int image_fd,
                            GError **error)
{
    g_autofree char *body = disk_job_body(id, true, bandwidth);
    return request_fds(api_socket, "vm.disk-commit", body, &image_fd, 1, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_disk_job_pivot(const char *api_socket, const char *id, GError **error)
{
    g_autofree char *body = disk_job_body(id, false, 0);
    return request(api_socket, "PUT", "vm.disk-job-pivot", body, SLOW_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_disk_job_speed(const char *api_socket, const char *id, uint64_t bandwidth, GError **error)
{
    g_autofree char *body = disk_job_body(id, true, bandwidth);
    return request(api_socket, "PUT", "vm.disk-job-speed", body, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_disk_job_cancel(const char *api_socket, const char *id, GError **error)
{
    g_autofree char *body = disk_job_body(id, false, 0);
    return request(api_socket, "PUT", "vm.disk-job-cancel", body, QUICK_TIMEOUT_MS, NULL, error);
}

bool monitor_vm_disk_job_info(const char *api_socket, const char *id, struct disk_job_progress *out, bool *found,
                              GError **error)
{
    g_autofree char *escaped = g_uri_escape_string(id, NULL, false);
    g_autofree char *path = g_strdup_printf("vm.disk-job-info?id=%s", escaped);
    g_autoptr(GString) body = g_string_new(NULL);
    g_autoptr(GError) local = NULL;
    long status = 0;
    *found = false;
    if (!request_status(api_socket, "GET", path, NULL, QUICK_TIMEOUT_MS, body, &status, &local)) {
        if (status == 404)
            return true;   /* no job on that disk */
        g_propagate_error(error, g_steal_pointer(&local));
        return false;
    }
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!bounded_json_load_data(parser, body->str, body->len, REPLY_MAX_BYTES, &local) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "vm.disk-job-info answered %s", body->str);
        return false;
    }
    JsonObject *obj = json_node_get_object(json_parser_get_root(parser));
    *out = (struct disk_job_progress){
        .cur = counter(obj, "cur"), .end = counter(obj, "end"), .bandwidth = counter(obj, "bandwidth"),
        .ready = json_object_get_boolean_member_with_default(obj, "ready", false),
    };
    *found = true;
    return true;
}

bool monitor_vm_disk_resize(const char *api_socket, const char *id, uint64_t *capacity, GError **error)
{
    g_autofree char *body = disk_job_body(id, false, 0);
    g_autoptr(GString) answer = g_string_new(NULL);
    if (!request(api_socket, "PUT", "vm.disk-resize", body, QUICK_TIMEOUT_MS, answer, error))
        return false;
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!bounded_json_load_data(parser, answer->str, answer->len, REPLY_MAX_BYTES, NULL) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "vm.disk-resize answered %s", answer->str);
        return false;
    }
    *capacity = counter(json_node_get_object(json_parser_get_root(parser)), "capacity");
    return true;
}

bool monitor_vm_disk_copy(const char *api_socket, const char *id, const char *target, uint64_t bandwidth,
                          int target_fd, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "id", id);
    vjson_str(b, "target", target);
    vjson_uint(b, "bandwidth", bandwidth);
    vjson_object_end(b);
    g_autofree char *body = vjson_finish(b, false);
    return request_fds(api_socket, "vm.disk-copy", body, &target_fd, 1, QUICK_TIMEOUT_MS, NULL, error);
}
