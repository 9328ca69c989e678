/* vm.info, vm.counters, vm.workset */
#define G_LOG_DOMAIN "vsnap-shim"

#include "routes.h"
#include "store-push-job.h"

static void reply_node(struct api_request *req, JsonNode *node, const GError *error)
{
    if (node)
        reply_json(req, SOUP_STATUS_OK, node);
    else
        reply_error(req, error);
}

/* A push to a store (after the snapshot job itself) is the API's: it shows
 * as the snapshot job, its last step. */
static void add_push_job(struct api_request *req, JsonNode *info)
{
    JsonObject *vsnap = json_object_get_object_member(json_node_get_object(info), "vsnap");
    if (!vsnap || !req->store || !req->store->push)
        return;
    g_autoptr(JsonBuilder) b = json_builder_new();
    api_push_job_add_info(req->store->push, b);
    json_object_set_member(vsnap, "snapshot_job", json_builder_get_root(b));
}

static void handle_info(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    JsonNode *node = vmm_info(req->vmm, &error);
    if (node)
        add_push_job(req, node);
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
