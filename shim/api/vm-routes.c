/* vm.create, the lifecycle actions (boot, pause, resume, shutdown, reboot,
 * delete, power-button) and the disks (add-disk, remove-device). */
#define G_LOG_DOMAIN "vsnap-shim"

#include "config/vm-config-json.h"
#include "api/routes.h"
#include "json/bounded-json.h"

static void handle_create(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    gsize len;
    const char *text = g_bytes_get_data(req->body, &len);

    if (len == 0) {
        reply_error_message(req->msg, SOUP_STATUS_BAD_REQUEST, "vm.create needs a VmConfig body");
        return;
    }
    struct vm_config *cfg = vm_config_from_json_text(text, (gssize)len, &error);
    bool ok = cfg && vmm_create(req->vmm, cfg, &error);
    reply_result(req, ok, error);
}

static bool require_body(struct api_request *req, const char *endpoint, const char **text, gsize *len)
{
    *text = g_bytes_get_data(req->body, len);
    if (*len > 0)
        return true;
    g_autofree char *message = g_strdup_printf("%s needs a body", endpoint);
    reply_error_message(req->msg, SOUP_STATUS_BAD_REQUEST, message);
    return false;
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
ACTION_HANDLER(handle_delete, vmm_delete)
ACTION_HANDLER(handle_power_button, vmm_power_button)

const struct route vm_routes[] = {
    { "vm.create", "PUT", true, handle_create },
    { "vm.boot", "PUT", false, handle_boot },
    { "vm.pause", "PUT", false, handle_pause },
    { "vm.resume", "PUT", false, handle_resume },
    { "vm.shutdown", "PUT", false, handle_shutdown },
    { "vm.reboot", "PUT", false, handle_reboot },
    { "vm.delete", "PUT", false, handle_delete },
    { "vm.power-button", "PUT", false, handle_power_button },
    { "vm.add-disk", "PUT", true, handle_add_disk },
    { "vm.remove-device", "PUT", true, handle_remove_device },
    { 0 },
};
