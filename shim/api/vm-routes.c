/* vm.create, the lifecycle actions (boot, pause, resume, shutdown, reboot,
 * delete, power-button, nmi), vsnap's vm.send-scancodes, the disks and network interfaces (add-disk,
 * add-net, remove-device) and vsnap's vm.set-link and vm.move-disk-layers. */
#define G_LOG_DOMAIN "vsnap-shim"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "config/vm-config-json.h"
#include "routes.h"
#include "json/bounded-json.h"
#include "json/vjson.h"

static bool require_body(struct api_request *req, const char *endpoint, const char **text, gsize *len)
{
    *text = g_bytes_get_data(req->body, len);
    if (*len > 0)
        return true;
    g_autofree char *message = g_strdup_printf("%s needs a body", endpoint);
    reply_error_message(req->msg, SOUP_STATUS_BAD_REQUEST, message);
    return false;
}

bool attach_request_fds(struct api_request *req, JsonArray *nets, unsigned from, unsigned *next, GError **error)
{
    unsigned wanted = 0;
    for (guint i = 0; nets && i < json_array_get_length(nets); i++) {
        JsonNode *net = json_array_get_element(nets, i);
        JsonNode *fds = JSON_NODE_HOLDS_OBJECT(net) ? json_object_get_member(json_node_get_object(net), "fds") : NULL;
        if (fds && JSON_NODE_HOLDS_ARRAY(fds))
            wanted += json_array_get_length(json_node_get_array(fds));
    }
    if (from + wanted > req->nfds || (next == NULL && from + wanted != req->nfds)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "the body's net \"fds\" ask for %u descriptors, %u came with the request (SCM_RIGHTS on the "
                    "API socket)", wanted, req->nfds - MIN(from, req->nfds));
        return false;
    }
    unsigned k = from;
    for (guint i = 0; nets && i < json_array_get_length(nets); i++) {
        JsonNode *net = json_array_get_element(nets, i);
        JsonNode *fds = JSON_NODE_HOLDS_OBJECT(net) ? json_object_get_member(json_node_get_object(net), "fds") : NULL;
        if (!fds || !JSON_NODE_HOLDS_ARRAY(fds))
            continue;
        JsonArray *slots = json_node_get_array(fds);
        guint n = json_array_get_length(slots);
        JsonArray *real = json_array_sized_new(n);
        for (guint j = 0; j < n; j++) /* the config parsed from this duplicates them */
            json_array_add_int_element(real, req->fds[k++]);
        json_object_set_array_member(json_node_get_object(net), "fds", real);
    }
    if (next)
        *next = k;
    return true;
}

/* A client's own "fds" numbers mean nothing here: every one is replaced by a
 * received descriptor, or the request is refused. */
static JsonNode *parse_config_body(struct api_request *req, JsonParser *parser, GError **error)
{
    gsize len;
    const char *text = g_bytes_get_data(req->body, &len);
    if (!bounded_json_load_data(parser, text, len, API_MAX_BODY_BYTES, error)) {
        g_prefix_error(error, "the body is not valid JSON: ");
        return NULL;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "the body must be a JSON object");
        return NULL;
    }
    return root;
}

static void invalid_from(GError **error)
{
    if (*error && (*error)->domain != SHIM_ERROR) {
        GError *invalid = g_error_new_literal(SHIM_ERROR, SHIM_ERROR_INVALID, (*error)->message);
        g_clear_error(error);
        *error = invalid;
    }
}

static void handle_create(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    if (g_bytes_get_size(req->body) == 0) {
        reply_error_message(req->msg, SOUP_STATUS_BAD_REQUEST, "vm.create needs a VmConfig body");
        return;
    }
    JsonNode *root = parse_config_body(req, parser, &error);
    JsonNode *nets = root ? json_object_get_member(json_node_get_object(root), "net") : NULL;
    bool ok = root && attach_request_fds(req, nets && JSON_NODE_HOLDS_ARRAY(nets) ? json_node_get_array(nets) : NULL,
                                         0, NULL, &error);
    struct vm_config *cfg = ok ? vm_config_from_json(root, &error) : NULL;
    ok = cfg && vmm_create(req->vmm, cfg, &error);
    invalid_from(&error);
    reply_result(req, ok, error);
}

/* As Cloud Hypervisor: every descriptor that came with vm.add-net is the new
 * interface's (whatever the body's "fds" says). */
static void handle_add_net(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *text;
    gsize len;
    if (!require_body(req, "vm.add-net", &text, &len))
        return;
    JsonNode *root = parse_config_body(req, parser, &error);
    struct net_config net;
    bool ok = root != NULL;
    if (ok) {
        JsonObject *obj = json_node_get_object(root);
        json_object_remove_member(obj, "fds");
        if (req->nfds) {
            JsonArray *slots = json_array_new();
            for (unsigned i = 0; i < req->nfds; i++)
                json_array_add_int_element(slots, -1);
            json_object_set_array_member(obj, "fds", slots);
        }
        JsonArray *one = json_array_new();
        json_array_add_element(one, json_node_ref(root));
        ok = attach_request_fds(req, one, 0, NULL, &error);
        json_array_unref(one);
    }
    if (ok && (ok = net_config_from_json_node(root, &net, &error))) {
        ok = vmm_add_net(req->vmm, &net, &error);
        net_config_clear(&net);
    }
    invalid_from(&error);
    reply_result(req, ok, error);
}

/* vsnap's vm.set-link: {"id": "net0", "up": true|false}. */
static void handle_set_link(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *text;
    gsize len;
    if (!require_body(req, "vm.set-link", &text, &len))
        return;
    JsonNode *root = parse_config_body(req, parser, &error);
    JsonObject *obj = root ? json_node_get_object(root) : NULL;
    JsonNode *id = obj ? json_object_get_member(obj, "id") : NULL;
    JsonNode *up = obj ? json_object_get_member(obj, "up") : NULL;
    bool ok = obj != NULL;
    if (ok && (!id || !JSON_NODE_HOLDS_VALUE(id) || json_node_get_value_type(id) != G_TYPE_STRING || !up ||
               !JSON_NODE_HOLDS_VALUE(up) || json_node_get_value_type(up) != G_TYPE_BOOLEAN ||
               json_object_get_size(obj) != 2)) {
        g_set_error(&error, SHIM_ERROR, SHIM_ERROR_INVALID, "vm.set-link takes {\"id\": \"<net id>\", \"up\": true|false}");
        ok = false;
    }
    ok = ok && vmm_set_link(req->vmm, json_node_get_string(id), json_node_get_boolean(up), &error);
    invalid_from(&error);
    reply_result(req, ok, error);
}

static bool is_string(JsonNode *node)
{
    return node && JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING;
}

/* vsnap's vm.move-disk-layers: {"from": "/dir", "to": "/dir" | null}; the
 * answer is {"moved": <layers of the chains that were in from>}. */
static void handle_move_disk_layers(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *text;
    gsize len;
    if (!require_body(req, "vm.move-disk-layers", &text, &len))
        return;
    JsonNode *root = parse_config_body(req, parser, &error);
    JsonObject *obj = root ? json_node_get_object(root) : NULL;
    JsonNode *from = obj ? json_object_get_member(obj, "from") : NULL;
    JsonNode *to = obj ? json_object_get_member(obj, "to") : NULL;
    bool ok = obj != NULL;
    if (ok && (!is_string(from) || !to || !(is_string(to) || JSON_NODE_HOLDS_NULL(to)) ||
               json_object_get_size(obj) != 2)) {
        g_set_error(&error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "vm.move-disk-layers takes {\"from\": \"<directory>\", \"to\": \"<directory>\" | null}");
        ok = false;
    }
    unsigned moved = 0;
    ok = ok && vmm_move_disk_layers(req->vmm, json_node_get_string(from),
                                    JSON_NODE_HOLDS_NULL(to) ? NULL : json_node_get_string(to), &moved, &error);
    invalid_from(&error);
    if (!ok) {
        reply_error(req, error);
        return;
    }
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_uint(b, "moved", moved);
    vjson_object_end(b);
    reply_json(req, SOUP_STATUS_OK, json_builder_get_root(b));
}

static void handle_add_disk(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    const char *text;
    gsize len;
    if (!require_body(req, "vm.add-disk", &text, &len))
        return;
    struct disk_config disk;
    bool ok = disk_config_from_json_text(text, (gssize)len, &disk, &error);
    if (ok) {
        ok = vmm_add_disk(req->vmm, &disk, &error);
        disk_config_clear(&disk);
    }
    reply_result(req, ok, error);
}

/* {"id": "..."}, as Cloud Hypervisor's VmRemoveDevice. */
static char *parse_remove_device(const char *text, gsize len, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!bounded_json_load_data(parser, text, len, API_MAX_BODY_BYTES, error)) {
        g_prefix_error(error, "the body is not valid JSON: ");
        return NULL;
    }
    JsonNode *root = json_parser_get_root(parser);
    JsonObject *obj = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonNode *id = obj ? json_object_get_member(obj, "id") : NULL;
    if (!id || !JSON_NODE_HOLDS_VALUE(id) || json_node_get_value_type(id) != G_TYPE_STRING ||
        json_object_get_size(obj) != 1) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "vm.remove-device takes {\"id\": \"<device id>\"}");
        return NULL;
    }
    return g_strdup(json_node_get_string(id));
}

static void handle_remove_device(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    const char *text;
    gsize len;
    if (!require_body(req, "vm.remove-device", &text, &len))
        return;
    g_autofree char *id = parse_remove_device(text, len, &error);
    if (!id && error->domain != SHIM_ERROR) {
        GError *invalid = g_error_new_literal(SHIM_ERROR, SHIM_ERROR_INVALID, error->message);
        g_clear_error(&error);
        error = invalid;
    }
    bool ok = id && vmm_remove_device(req->vmm, id, &error);
    reply_result(req, ok, error);
}

#define ACTION_HANDLER(name, call)                                   \
    static void name(struct api_request *req)                        \
    {                                                                \
        g_autoptr(GError) error = NULL;                              \
        bool ok = call(req->vmm, &error);                            \
        reply_result(req, ok, error);                                \
    }

ACTION_HANDLER(handle_boot, vmm_boot)
ACTION_HANDLER(handle_pause, vmm_pause)
ACTION_HANDLER(handle_resume, vmm_resume)
ACTION_HANDLER(handle_shutdown, vmm_shutdown_vm)
ACTION_HANDLER(handle_reboot, vmm_reboot)
ACTION_HANDLER(handle_power_button, vmm_power_button)
ACTION_HANDLER(handle_nmi, vmm_nmi)

/* The "scancodes" of vsnap's vm.send-scancodes: 1 to VMM_SCANCODES_MAX bytes. */
static unsigned parse_scancodes(JsonObject *obj, uint8_t *codes, GError **error)
{
    JsonNode *node = obj ? json_object_get_member(obj, "scancodes") : NULL;
    JsonArray *list = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    unsigned n = list ? json_array_get_length(list) : 0;
    bool ok = list && json_object_get_size(obj) == 1 && n > 0 && n <= VMM_SCANCODES_MAX;
    for (unsigned i = 0; ok && i < n; i++) {
        JsonNode *e = json_array_get_element(list, i);
        ok = JSON_NODE_HOLDS_VALUE(e) && json_node_get_value_type(e) == G_TYPE_INT64 &&
             json_node_get_int(e) >= 0 && json_node_get_int(e) <= 0xff;
        if (ok)
            codes[i] = (uint8_t)json_node_get_int(e);
    }
    if (ok)
        return n;
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                "vm.send-scancodes takes {\"scancodes\": [1 to %u bytes of scan code set 1]}", VMM_SCANCODES_MAX);
    return 0;
}

static void handle_send_scancodes(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    const char *text;
    gsize len;
    if (!require_body(req, "vm.send-scancodes", &text, &len))
        return;
    JsonNode *root = parse_config_body(req, parser, &error);
    uint8_t codes[VMM_SCANCODES_MAX];
    unsigned n = root ? parse_scancodes(json_node_get_object(root), codes, &error) : 0;
    bool ok = n > 0 && vmm_send_scancodes(req->vmm, codes, n, &error);
    invalid_from(&error);
    reply_result(req, ok, error);
}

/* The VM is gone: the snapshot directories its restore pulled from a store
 * go with it (store-refs.h). vm.shutdown keeps them: vm.boot starts the
 * VM again from their disk layers. */
static void handle_delete(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    bool ok = vmm_delete(req->vmm, &error);
    if (ok && req->store)
        api_store_remove_pulled(req->store);
    reply_result(req, ok, error);
}

/* Cloud Hypervisor's {"destination_url": "file:///path"} (the shim creates
 * the file), or vsnap's {} with the file's descriptor sent with the request
 * (a confined shim cannot open the caller's path; the daemon opens it). */
static int coredump_target(struct api_request *req, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    bool has_body = g_bytes_get_size(req->body) > 0;
    JsonNode *root = has_body ? parse_config_body(req, parser, error) : NULL;
    if (has_body && !root)
        return -1;
    JsonObject *obj = root ? json_node_get_object(root) : NULL;
    JsonNode *url = obj ? json_object_get_member(obj, "destination_url") : NULL;
    unsigned members = obj ? json_object_get_size(obj) : 0;
    if (members == 0 && req->nfds == 1)
        return dup(req->fds[0]);
    if (!is_string(url) || members != 1 || req->nfds != 0 ||
        !g_str_has_prefix(json_node_get_string(url), "file://")) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "vm.coredump takes {\"destination_url\": \"file:///path\"}, or {} with the file's descriptor");
        return -1;
    }
    const char *path = json_node_get_string(url) + strlen("file://");
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "cannot create %s: %s", path, g_strerror(errno));
    return fd;
}

static void handle_coredump(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    int fd = coredump_target(req, &error);
    bool ok = fd >= 0 && vmm_coredump(req->vmm, fd, &error);
    if (fd >= 0)
        close(fd);
    invalid_from(&error);
    reply_result(req, ok, error);
}

const struct route vm_routes[] = {
    { "vm.create", "PUT", true, handle_create },
    { "vm.boot", "PUT", false, handle_boot },
    { "vm.pause", "PUT", false, handle_pause },
    { "vm.resume", "PUT", false, handle_resume },
    { "vm.shutdown", "PUT", false, handle_shutdown },
    { "vm.reboot", "PUT", false, handle_reboot },
    { "vm.delete", "PUT", false, handle_delete },
    { "vm.power-button", "PUT", false, handle_power_button },
    { "vm.nmi", "PUT", false, handle_nmi },
    { "vm.coredump", "PUT", true, handle_coredump },
    { "vm.send-scancodes", "PUT", true, handle_send_scancodes },
    { "vm.add-disk", "PUT", true, handle_add_disk },
    { "vm.add-net", "PUT", true, handle_add_net },
    { "vm.set-link", "PUT", true, handle_set_link },
    { "vm.move-disk-layers", "PUT", true, handle_move_disk_layers },
    { "vm.remove-device", "PUT", true, handle_remove_device },
    { 0 },
};
