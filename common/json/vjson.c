/* One typed call per JSON member: see vjson.h. */
#include "json/vjson.h"

/* In an object the member's name comes first; in an array (name NULL) the
 * value simply follows. json-glib reports a value without a name inside an
 * object, or a name outside one. */
static void name_member(JsonBuilder *b, const char *name)
{
    if (name)
        json_builder_set_member_name(b, name);
}

void vjson_str(JsonBuilder *b, const char *name, const char *value)
{
    name_member(b, name);
    if (value)
        json_builder_add_string_value(b, value);
    else
        json_builder_add_null_value(b);
}

void vjson_str_opt(JsonBuilder *b, const char *name, const char *value)
{
    if (value)
        vjson_str(b, name, value);
}

void vjson_int(JsonBuilder *b, const char *name, int64_t value)
{
    name_member(b, name);
    json_builder_add_int_value(b, value);
}

void vjson_uint(JsonBuilder *b, const char *name, uint64_t value)
{
    if (value > INT64_MAX)
        g_critical("vjson_uint: member \"%s\": %" G_GUINT64_FORMAT " does not fit a JSON integer",
                   name ? name : "(element)", value);
    vjson_int(b, name, (int64_t)value);
}

void vjson_bool(JsonBuilder *b, const char *name, bool value)
{
    name_member(b, name);
    json_builder_add_boolean_value(b, value);
}

void vjson_null(JsonBuilder *b, const char *name)
{
    name_member(b, name);
    json_builder_add_null_value(b);
}

void vjson_hex64(JsonBuilder *b, const char *name, uint64_t value)
{
    char text[24];
    g_snprintf(text, sizeof text, "0x%" G_GINT64_MODIFIER "x", value);
    vjson_str(b, name, text);
}

void vjson_base64(JsonBuilder *b, const char *name, const void *data, size_t len)
{
    g_autofree char *text = g_base64_encode(data, len);
    vjson_str(b, name, text);
}

void vjson_strv(JsonBuilder *b, const char *name, char *const *strv)
{
    if (!strv) {
        vjson_null(b, name);
        return;
    }
    vjson_array_begin(b, name);
    for (char *const *s = strv; *s; s++)
        json_builder_add_string_value(b, *s);
    vjson_array_end(b);
}

void vjson_node(JsonBuilder *b, const char *name, JsonNode *node)
{
    name_member(b, name);
    if (node)
        json_builder_add_value(b, node);
    else
        json_builder_add_null_value(b);
}

void vjson_member(JsonBuilder *b, const char *name)
{
    g_return_if_fail(name != NULL);
    json_builder_set_member_name(b, name);
}

void vjson_object_begin(JsonBuilder *b, const char *name)
{
    name_member(b, name);
    json_builder_begin_object(b);
}

void vjson_object_end(JsonBuilder *b)
{
    json_builder_end_object(b);
}

void vjson_array_begin(JsonBuilder *b, const char *name)
{
    name_member(b, name);
    json_builder_begin_array(b);
}

void vjson_array_end(JsonBuilder *b)
{
    json_builder_end_array(b);
}

char *vjson_finish(JsonBuilder *b, bool pretty)
{
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_return_val_if_fail(root != NULL, NULL);
    return json_to_string(root, pretty);
}
