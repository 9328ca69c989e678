/* vm.create and the lifecycle actions: boot, pause, resume, shutdown, reboot,
 * delete, power-button. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "config/vm-config-json.h"
#include "api/routes.h"

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
    { 0 },
};
