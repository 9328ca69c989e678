/* vmm.ping, vmm.shutdown */
#define G_LOG_DOMAIN "vsnap-shim"

#include <unistd.h>

#include "routes.h"
#include "vsnap-config.h"

static void handle_ping(struct api_request *req)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "build_version");
    json_builder_add_string_value(b, "vsnap-shim v" VSNAP_VERSION " (Cloud Hypervisor API v" VSNAP_CH_API_VERSION ")");
    /* Cloud Hypervisor's clients compare this with its releases. */
    json_builder_set_member_name(b, "version");
    json_builder_add_string_value(b, VSNAP_CH_API_VERSION);
    json_builder_set_member_name(b, "pid");
    json_builder_add_int_value(b, getpid());
    json_builder_set_member_name(b, "features");
    json_builder_begin_array(b);
    json_builder_end_array(b);
    json_builder_end_object(b);
    reply_json(req, SOUP_STATUS_OK, json_builder_get_root(b));
}

/* The reply must reach the client before the process goes away. */
static void exit_after_reply(SoupServerMessage *msg, gpointer data)
{
    vmm_request_exit(data);
}

static void handle_shutdown(struct api_request *req)
{
    g_signal_connect(req->msg, "finished", G_CALLBACK(exit_after_reply), req->vmm);
    reply_no_content(req);
}

const struct route vmm_routes[] = {
    { "vmm.ping", "GET", false, handle_ping },
    { "vmm.shutdown", "PUT", false, handle_shutdown },
    { 0 },
};
