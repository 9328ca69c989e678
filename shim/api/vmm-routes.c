/* vmm.ping, vmm.shutdown */
#define G_LOG_DOMAIN "vsnap-shim"

#include <unistd.h>

#include "routes.h"
#include "vsnap-config.h"
#include "json/vjson.h"

static void handle_ping(struct api_request *req)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "build_version", "vsnap-shim v" VSNAP_VERSION " (Cloud Hypervisor API v" VSNAP_CH_API_VERSION ")");
    /* Cloud Hypervisor's clients compare this with its releases. */
    vjson_str(b, "version", VSNAP_CH_API_VERSION);
    vjson_int(b, "pid", getpid());
    vjson_array_begin(b, "features");
    vjson_array_end(b);
    vjson_object_end(b);
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
