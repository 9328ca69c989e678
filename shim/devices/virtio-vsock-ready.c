/* The readiness port, served by the shim itself (no UNIX socket behind it).
 *
 * The guest sends one line per announcement:
 *     READY {"boot_id":"...","generation":G,"mono_ns":N,...}\n
 * and gets
 *     ACK {"host_realtime_ns":T,"generation":G,"entropy":"<64 hex>"}\n
 * T is the host's wall clock at the instant the line was read, which a guest
 * restored from a snapshot uses to set its clock; entropy is fresh random
 * bytes from the host for the guest's pool. The same instant is the
 * "ready_ns" passed to vm_callbacks.on_guest_ready. A malformed line gets
 * "ERR <why>\n" and the connection stays usable.
 */
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "virtio-vsock-priv.h"
#include "vm.h"

#define READY_ENTROPY_BYTES 32

static gint64 realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void vsock_ready_session_clear(struct vsock_ready_session *session)
{
    if (session->line)
        g_string_free(session->line, TRUE);
    session->line = NULL;
}

/* Random bytes for the guest to mix into its pool: a VM restored from a
 * snapshot (or cloned) would otherwise continue the same RNG state. */
static void fresh_entropy_hex(char out[2 * READY_ENTROPY_BYTES + 1])
{
    uint8_t bytes[READY_ENTROPY_BYTES];
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) {
        /* Not expected for 32 bytes once the host has booted; the guest then
         * gets the ACK without fresh entropy rather than a weak value. */
        out[0] = '\0';
        return;
    }
    for (unsigned i = 0; i < sizeof bytes; i++)
        snprintf(out + 2 * i, 3, "%02x", bytes[i]);
}

static void reply(struct vsock_conn *conn, const char *text)
{
    g_byte_array_append(conn->to_guest, (const guint8 *)text, (guint)strlen(text));
}

static void reply_error(struct vsock_conn *conn, const char *why)
{
    g_autofree char *line = g_strdup_printf("ERR %s\n", why);
    reply(conn, line);
}

/* Parse the JSON after "READY ": an object with a string boot_id and a
 * non-negative integer generation; other members are passed on as they are. */
static JsonObject *parse_announcement(const char *json, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_data(parser, json, -1, error))
        return NULL;
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA,
                    "READY needs a JSON object");
        return NULL;
    }
    JsonObject *obj = json_node_get_object(root);
    JsonNode *gen = json_object_get_member(obj, "generation");
    JsonNode *boot_id = json_object_get_member(obj, "boot_id");
    if (!gen || json_node_get_value_type(gen) != G_TYPE_INT64 || json_node_get_int(gen) < 0) {
        g_set_error(error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA,
                    "READY needs \"generation\" as a non-negative integer");
        return NULL;
    }
    if (!boot_id || json_node_get_value_type(boot_id) != G_TYPE_STRING) {
        g_set_error(error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA,
                    "READY needs \"boot_id\" as a string");
        return NULL;
    }
    return json_object_ref(obj);
}

/* {"ready":true,"generation":G,"boot_id":"...","ready_ns":T,"port":P,"guest":{...}} */
static char *build_info(const struct virtio_vsock *dev, JsonObject *guest, gint64 ready_ns)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "ready");
    json_builder_add_boolean_value(b, TRUE);
    json_builder_set_member_name(b, "generation");
    json_builder_add_int_value(b, json_object_get_int_member(guest, "generation"));
    json_builder_set_member_name(b, "boot_id");
    json_builder_add_string_value(b, json_object_get_string_member(guest, "boot_id"));
    json_builder_set_member_name(b, "ready_ns");
    json_builder_add_int_value(b, ready_ns);
    json_builder_set_member_name(b, "port");
    json_builder_add_int_value(b, dev->readiness_port);
    json_builder_set_member_name(b, "guest");
    JsonNode *copy = json_node_new(JSON_NODE_OBJECT);
    json_node_set_object(copy, guest);
    json_builder_add_value(b, copy);
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

static void handle_ready(struct virtio_vsock *dev, struct vsock_conn *conn, const char *json)
{
    gint64 ready_ns = realtime_ns(); /* the instant the announcement arrived */
    g_autoptr(GError) error = NULL;
    JsonObject *guest = parse_announcement(json, &error);
    if (!guest) {
        reply_error(conn, error->message);
        return;
    }
    gint64 generation = json_object_get_int_member(guest, "generation");
    char entropy[2 * READY_ENTROPY_BYTES + 1];
    fresh_entropy_hex(entropy);
    g_autofree char *ack = g_strdup_printf(
        "ACK {\"host_realtime_ns\":%" G_GINT64_FORMAT ",\"generation\":%" G_GINT64_FORMAT
        ",\"entropy\":\"%s\"}\n",
        ready_ns, generation, entropy);
    reply(conn, ack);
    g_autofree char *info = build_info(dev, guest, ready_ns);
    json_object_unref(guest);
    dev->counters.ready_events++;
    const struct vm_callbacks *cb = vm_get_callbacks(dev->vm);
    if (cb && cb->on_guest_ready)
        cb->on_guest_ready(cb->opaque, info);
    else
        g_message("virtio-vsock: guest ready %s (nobody is listening for it)", info);
}

static void handle_line(struct virtio_vsock *dev, struct vsock_conn *conn, const char *line)
{
    if (g_str_has_prefix(line, "READY "))
        handle_ready(dev, conn, line + strlen("READY "));
    else if (*line != '\0')
        reply_error(conn, "unknown request: the readiness port takes 'READY {json}'");
}

bool vsock_ready_consume(struct virtio_vsock *dev, struct vsock_conn *conn, const uint8_t *data,
                         size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (data[i] != '\n') {
            if (conn->ready.line->len >= VSOCK_READY_LINE_MAX)
                return false;
            g_string_append_c(conn->ready.line, (char)data[i]);
            continue;
        }
        if (conn->ready.line->len && conn->ready.line->str[conn->ready.line->len - 1] == '\r')
            g_string_truncate(conn->ready.line, conn->ready.line->len - 1);
        if (strlen(conn->ready.line->str) != conn->ready.line->len)
            reply_error(conn, "NUL byte in line");
        else
            handle_line(dev, conn, conn->ready.line->str);
        g_string_truncate(conn->ready.line, 0);
    }
    return true;
}
