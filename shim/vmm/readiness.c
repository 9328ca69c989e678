/* The readiness port, served by the shim itself (no UNIX socket behind it):
 * a vsock port handler (devices/virtio-vsock.h) that vmm.c installs.
 *
 * The guest sends one line per announcement:
 *     READY {"boot_id":"...","generation":G,"mono_ns":N,...}\n
 * and gets
 *     ACK {"host_realtime_ns":T,"generation":G,"entropy":"<64 hex>"}\n
 * T is the host's wall clock at the instant the line was read, which a guest
 * restored from a snapshot uses to set its clock; entropy is fresh random
 * bytes from the host for the guest's pool. The same instant is the
 * "ready_ns" in the announcement the VMM gets (readiness.h). A malformed line
 * gets "ERR <why>\n" and the connection stays usable; a line longer than
 * READY_LINE_MAX bytes resets the connection.
 */
#include "vmm/readiness.h"

#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "json/bounded-json.h"
#include "json/vjson.h"

#define READY_ENTROPY_BYTES 32
#define READY_LINE_MAX 4096u

/* One guest connection: the bytes of the current line so far. */
struct session {
    GString *line;
};

static gint64 realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *session_open(void *opaque)
{
    (void)opaque;
    struct session *session = g_new0(struct session, 1);
    session->line = g_string_new(NULL);
    return session;
}

static void session_close(void *opaque, void *data)
{
    (void)opaque;
    struct session *session = data;
    g_string_free(session->line, TRUE);
    g_free(session);
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

static void reply(GByteArray *out, const char *text)
{
    g_byte_array_append(out, (const guint8 *)text, (guint)strlen(text));
}

static void reply_error(GByteArray *out, const char *why)
{
    g_autofree char *line = g_strdup_printf("ERR %s\n", why);
    reply(out, line);
}

/* Parse the JSON after "READY ": an object with a string boot_id and a
 * non-negative integer generation; other members are passed on as they are. */
static JsonObject *parse_announcement(const char *json, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!bounded_json_load_data(parser, json, strlen(json), READY_LINE_MAX, error))
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

/* {"ready":true,"generation":G,"boot_id":"...","ready_ns":T,"port":P,"source":"agent","guest":{...}} */
static char *build_info(const struct readiness_service *s, JsonObject *guest, gint64 ready_ns)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_bool(b, "ready", TRUE);
    vjson_int(b, "generation", json_object_get_int_member(guest, "generation"));
    vjson_str(b, "boot_id", json_object_get_string_member(guest, "boot_id"));
    vjson_int(b, "ready_ns", ready_ns);
    vjson_int(b, "port", s->handler.port);
    vjson_str(b, "source", "agent");
    JsonNode *copy = json_node_new(JSON_NODE_OBJECT);
    json_node_set_object(copy, guest);
    vjson_node(b, "guest", copy);
    vjson_object_end(b);
    return vjson_finish(b, false);
}

static void handle_ready(struct readiness_service *s, GByteArray *out, const char *json)
{
    gint64 ready_ns = realtime_ns(); /* the instant the announcement arrived */
    g_autoptr(GError) error = NULL;
    JsonObject *guest = parse_announcement(json, &error);
    if (!guest) {
        reply_error(out, error->message);
        return;
    }
    gint64 generation = json_object_get_int_member(guest, "generation");
    char entropy[2 * READY_ENTROPY_BYTES + 1];
    fresh_entropy_hex(entropy);
    g_autofree char *ack = g_strdup_printf(
        "ACK {\"host_realtime_ns\":%" G_GINT64_FORMAT ",\"generation\":%" G_GINT64_FORMAT
        ",\"entropy\":\"%s\"}\n",
        ready_ns, generation, entropy);
    reply(out, ack);
    g_autofree char *info = build_info(s, guest, ready_ns);
    json_object_unref(guest);
    s->announced(s->data, info);
}

static void handle_line(struct readiness_service *s, GByteArray *out, const char *line)
{
    if (g_str_has_prefix(line, "READY "))
        handle_ready(s, out, line + strlen("READY "));
    else if (*line != '\0')
        reply_error(out, "unknown request: the readiness port takes 'READY {json}'");
}

static bool session_receive(void *opaque, void *data, const uint8_t *bytes, size_t len, GByteArray *out)
{
    struct readiness_service *s = opaque;
    GString *line = ((struct session *)data)->line;
    for (size_t i = 0; i < len; i++) {
        if (bytes[i] != '\n') {
            if (line->len >= READY_LINE_MAX)
                return false;
            g_string_append_c(line, (char)bytes[i]);
            continue;
        }
        if (line->len && line->str[line->len - 1] == '\r')
            g_string_truncate(line, line->len - 1);
        if (strlen(line->str) != line->len)
            reply_error(out, "NUL byte in line");
        else
            handle_line(s, out, line->str);
        g_string_truncate(line, 0);
    }
    return true;
}

void readiness_service_init(struct readiness_service *s, uint32_t port, readiness_announced_func announced,
                            void *data)
{
    *s = (struct readiness_service){
        .handler = { .port = port, .open = session_open, .receive = session_receive, .close = session_close,
                     .opaque = s },
        .announced = announced,
        .data = data,
    };
}
