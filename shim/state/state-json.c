/* Reading state.json's values back: see state-json.h. */
#include "state/state-json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(vsnap-state-error, state_error)

static bool invalid(GError **error, const char *what, const char *name, const char *problem)
{
    g_set_error(error, STATE_ERROR, STATE_ERROR_INVALID, "state.json: %s: member \"%s\" %s", what,
                name, problem);
    return false;
}

const char *state_get_string(JsonObject *obj, const char *name, const char *what, GError **error)
{
    JsonNode *node = obj ? json_object_get_member(obj, name) : NULL;
    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING) {
        invalid(error, what, name, "is missing or not a string");
        return NULL;
    }
    return json_node_get_string(node);
}

JsonObject *state_get_object(JsonObject *obj, const char *name, const char *what, GError **error)
{
    JsonNode *node = obj ? json_object_get_member(obj, name) : NULL;
    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        invalid(error, what, name, "is missing or not an object");
        return NULL;
    }
    return json_node_get_object(node);
}

bool state_get_blob_any(JsonObject *obj, const char *name, uint8_t **data, size_t *len,
                        const char *what, GError **error)
{
    const char *text = state_get_string(obj, name, what, error);
    if (!text)
        return false;
    /* g_base64_decode accepts garbage silently: check the alphabet first. */
    size_t n = strlen(text);
    if (n % 4 != 0 || strspn(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != n)
        return invalid(error, what, name, "is not base64");
    gsize out_len = 0;
    *data = g_base64_decode(text, &out_len);
    *len = out_len;
    return true;
}

bool state_get_blob(JsonObject *obj, const char *name, void *out, size_t len, const char *what,
                    GError **error)
{
    size_t got = 0;
    g_autofree uint8_t *data = NULL;
    if (!state_get_blob_any(obj, name, &data, &got, what, error))
        return false;
    if (got != len) {
        g_autofree char *problem = g_strdup_printf("holds %zu bytes, this KVM's structure has %zu", got, len);
        return invalid(error, what, name, problem);
    }
    memcpy(out, data, len);
    return true;
}

bool state_get_u64(JsonObject *obj, const char *name, uint64_t *out, const char *what, GError **error)
{
    const char *text = state_get_string(obj, name, what, error);
    if (!text)
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || end == text || *end || text[0] == '-')
        return invalid(error, what, name, "is not an unsigned 64-bit number");
    *out = v;
    return true;
}

bool state_get_uint(JsonObject *obj, const char *name, uint64_t max, uint64_t *out, const char *what,
                    GError **error)
{
    JsonNode *node = obj ? json_object_get_member(obj, name) : NULL;
    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64 ||
        json_node_get_int(node) < 0 || (uint64_t)json_node_get_int(node) > max)
        return invalid(error, what, name, "is missing or out of range");
    *out = (uint64_t)json_node_get_int(node);
    return true;
}
