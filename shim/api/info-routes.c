/* vm.info, vm.counters, vm.workset */
#define G_LOG_DOMAIN "vsnap-shim"

#include "routes.h"

static void reply_node(struct api_request *req, JsonNode *node, const GError *error)
{
    if (node)
        reply_json(req, SOUP_STATUS_OK, node);
    else
        reply_error(req, error);
}

static void handle_info(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    JsonNode *node = vmm_info(req->vmm, &error);
    reply_node(req, node, error);
}

static void handle_counters(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    JsonNode *node = vmm_counters(req->vmm, &error);
    reply_node(req, node, error);
}

static void handle_workset(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    JsonNode *node = vmm_workset(req->vmm, &error);
    reply_node(req, node, error);
}

const struct route info_routes[] = {
    { "vm.info", "GET", false, handle_info },
    { "vm.counters", "GET", false, handle_counters },
    { "vm.workset", "GET", false, handle_workset },
    { 0 },
};
