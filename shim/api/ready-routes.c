/* GET vm.wait-ready?timeout_ms=T: a long-poll that answers the moment the guest
 * announces readiness (pushed over vsock, see vmm_watch_ready), without
 * blocking other clients: the message is paused until then. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "api/options.h"
#include "routes.h"
#include "json/bounded-json.h"
#include "vmm/readiness.h"

#define DEFAULT_TIMEOUT_MS 30000
#define MAX_TIMEOUT_MS 600000

struct ready_wait {
    struct vmm *vmm;
    SoupServerMessage *msg;
    guint watch_id;
    guint timeout_id;
    gulong finished_id;
};

static JsonNode *ready_reply(const char *info)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    if (bounded_json_load_data(parser, info, strlen(info), READINESS_INFO_MAX_BYTES, NULL) &&
        json_parser_get_root(parser))
        return json_node_copy(json_parser_get_root(parser));
    return json_node_init_object(json_node_alloc(), json_object_new());
}

/* Ends the wait exactly once, whichever of ready / VM stopped / timeout /
 * client gone comes first. */
static void finish_wait(struct ready_wait *wait, unsigned status, JsonNode *body,
                        const char *message)
{
    if (wait->watch_id)
        vmm_unwatch_ready(wait->vmm, wait->watch_id);
    if (wait->timeout_id)
        g_source_remove(wait->timeout_id);
    g_signal_handler_disconnect(wait->msg, wait->finished_id);
    struct api_request req = { .vmm = wait->vmm, .msg = wait->msg };
    if (body)
        reply_json(&req, status, body);
    else
        reply_error_message(wait->msg, status, message);
    soup_server_message_unpause(wait->msg);
    g_object_unref(wait->msg);
    g_free(wait);
}

static void on_ready(const char *info, void *data)
{
    struct ready_wait *wait = data;
    wait->watch_id = 0; /* a watch fires once and is gone */
    if (info)
        finish_wait(wait, SOUP_STATUS_OK, ready_reply(info), NULL);
    else
        finish_wait(wait, SOUP_STATUS_METHOD_NOT_ALLOWED, NULL,
                    "the VM stopped before the guest announced readiness");
}

static gboolean on_timeout(gpointer data)
{
    struct ready_wait *wait = data;
    wait->timeout_id = 0;
    /* 504, not 408: the client was on time, the guest was not. */
    finish_wait(wait, SOUP_STATUS_GATEWAY_TIMEOUT, NULL,
                "the guest did not announce readiness in time");
    return G_SOURCE_REMOVE;
}

/* The client hung up: nothing to answer, just stop waiting. */
static void on_client_gone(SoupServerMessage *msg, gpointer data)
{
    struct ready_wait *wait = data;
    if (wait->watch_id)
        vmm_unwatch_ready(wait->vmm, wait->watch_id);
    if (wait->timeout_id)
        g_source_remove(wait->timeout_id);
    g_signal_handler_disconnect(wait->msg, wait->finished_id);
    g_object_unref(wait->msg);
    g_free(wait);
}

static bool parse_timeout(GHashTable *query, guint *out, GError **error)
{
    const char *text = query ? g_hash_table_lookup(query, "timeout_ms") : NULL;
    uint64_t value = DEFAULT_TIMEOUT_MS;

    if (text && !parse_uint(text, MAX_TIMEOUT_MS, &value, error)) {
        g_prefix_error(error, "invalid query parameter 'timeout_ms': ");
        return false;
    }
    *out = (guint)value;
    return true;
}

static void handle_wait_ready(struct api_request *req)
{
    g_autoptr(GError) error = NULL;
    guint timeout_ms;

    if (!parse_timeout(req->query, &timeout_ms, &error)) {
        reply_error(req, error);
        return;
    }
    enum vmm_state state = vmm_get_state(req->vmm);
    if (vmm_ready_info(req->vmm)) {
        reply_json(req, SOUP_STATUS_OK, ready_reply(vmm_ready_info(req->vmm)));
        return;
    }
    if (state != VMM_STATE_RUNNING && state != VMM_STATE_PAUSED) {
        g_set_error(&error, SHIM_ERROR,
                    state == VMM_STATE_NOT_CREATED ? SHIM_ERROR_NOT_CREATED : SHIM_ERROR_WRONG_STATE,
                    "cannot wait for readiness: the VM is %s", vmm_state_to_string(state));
        reply_error(req, error);
        return;
    }
    struct ready_wait *wait = g_new0(struct ready_wait, 1);
    wait->vmm = req->vmm;
    wait->msg = g_object_ref(req->msg);
    wait->watch_id = vmm_watch_ready(req->vmm, on_ready, wait);
    wait->timeout_id = g_timeout_add(timeout_ms, on_timeout, wait);
    wait->finished_id = g_signal_connect(req->msg, "disconnected", G_CALLBACK(on_client_gone), wait);
    soup_server_message_pause(req->msg);
}

const struct route ready_routes[] = {
    { "vm.wait-ready", "GET", false, handle_wait_ready },
    { 0 },
};
