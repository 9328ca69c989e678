/* systemd's sd_notify over a vsock stream (see notify.h). */
#include "notify.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "json/vjson.h"

#define NOTIFY_LINE_MAX 4096u
#define NOTIFY_X_SYSTEMD_MAX 64u /* distinct X_SYSTEMD_* names kept */

/* One guest connection: the current line so far, and whether the lines of
 * the delivery being read said READY=1. */
struct session {
    GString *line;
    bool ready_seen;
};

static gint64 realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void new_boot_id(char out[17])
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
        id = (uint64_t)g_get_real_time() ^ ((uint64_t)g_random_int() << 32);
    snprintf(out, 17, "%016" G_GINT64_MODIFIER "x", (guint64)id);
}

static gint compare_names(gconstpointer a, gconstpointer b, gpointer data)
{
    (void)data;
    return strcmp(a, b);
}

static void *session_open(void *opaque);
static bool session_receive(void *opaque, void *data, const uint8_t *bytes, size_t len, GByteArray *reply);
static void session_close(void *opaque, void *data);

void notify_service_init(struct notify_service *s, uint32_t port, readiness_announced_func announced, void *data)
{
    memset(s, 0, sizeof *s);
    g_mutex_init(&s->lock);
    s->announced = announced;
    s->data = data;
    s->x_systemd = g_tree_new_full(compare_names, NULL, g_free, g_free);
    new_boot_id(s->boot_id);
    s->handler = (struct vsock_port_handler){
        .port = port, .open = session_open, .receive = session_receive, .close = session_close, .opaque = s,
    };
}

void notify_service_clear(struct notify_service *s)
{
    if (!s->x_systemd)
        return; /* never initialised */
    g_free(s->status);
    g_tree_unref(s->x_systemd);
    g_mutex_clear(&s->lock);
    memset(s, 0, sizeof *s);
}

/* ---- what the guest says -------------------------------------------------- */

/* systemd's variable names: upper-case letters, digits and '_'. */
static bool is_variable_name(const char *name, size_t len)
{
    if (len == 0 || g_ascii_isdigit(name[0]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!(g_ascii_isupper(name[i]) || g_ascii_isdigit(name[i]) || name[i] == '_'))
            return false;
    return true;
}

static void keep_x_systemd(struct notify_service *s, const char *name, const char *value)
{
    if (!g_tree_lookup(s->x_systemd, name) && (unsigned)g_tree_nnodes(s->x_systemd) >= NOTIFY_X_SYSTEMD_MAX)
        return;
    g_tree_replace(s->x_systemd, g_strdup(name), g_strdup(value));
}

static void keep_exit_status(struct notify_service *s, const char *value)
{
    char *end = NULL;
    gint64 status = g_ascii_strtoll(value, &end, 10);
    if (*value && end && *end == '\0') {
        s->has_exit_status = true;
        s->exit_status = status;
    } else {
        s->ignored_lines++;
    }
}

/* One "NAME=VALUE" line, with the service locked. */
static void take_assignment(struct notify_service *s, struct session *session, const char *name,
                            const char *value)
{
    s->messages++;
    if (strcmp(name, "READY") == 0 && strcmp(value, "1") == 0) {
        session->ready_seen = true;
    } else if (strcmp(name, "STATUS") == 0) {
        g_free(s->status);
        s->status = g_strdup(value);
    } else if (strcmp(name, "STOPPING") == 0 && strcmp(value, "1") == 0) {
        s->stopping = true;
    } else if (strcmp(name, "EXIT_STATUS") == 0) {
        keep_exit_status(s, value);
    } else if (strcmp(name, "WATCHDOG") == 0 && strcmp(value, "1") == 0) {
        s->watchdog_count++;
    } else if (g_str_has_prefix(name, "X_SYSTEMD_")) {
        keep_x_systemd(s, name, value);
    }
}

static void take_line(struct notify_service *s, struct session *session, GString *line)
{
    if (line->len && line->str[line->len - 1] == '\r')
        g_string_truncate(line, line->len - 1);
    if (line->len == 0)
        return;
    const char *eq = memchr(line->str, '=', line->len);
    if (!eq || strlen(line->str) != line->len || !is_variable_name(line->str, (size_t)(eq - line->str))) {
        s->ignored_lines++;
        return;
    }
    g_autofree char *name = g_strndup(line->str, (gsize)(eq - line->str));
    take_assignment(s, session, name, eq + 1);
}

/* {"ready":true,"generation":G,"boot_id":"...","ready_ns":T,"port":P,"source":"notify",
 *  "guest":{"READY":"1","STATUS":"..."}}, with the service locked. */
static char *build_ready_info(const struct notify_service *s, gint64 ready_ns)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_bool(b, "ready", TRUE);
    vjson_int(b, "generation", (gint64)s->generation);
    vjson_str(b, "boot_id", s->boot_id);
    vjson_int(b, "ready_ns", ready_ns);
    vjson_int(b, "port", s->handler.port);
    vjson_str(b, "source", "notify");
    vjson_object_begin(b, "guest");
    vjson_str(b, "READY", "1");
    vjson_str_opt(b, "STATUS", s->status);
    vjson_object_end(b);
    vjson_object_end(b);
    return vjson_finish(b, false);
}

/* The lines of a delivery are in: announce if one of them was READY=1. The
 * callback runs unlocked (it only hands the text to the main thread). */
static void finish_delivery(struct notify_service *s, struct session *session)
{
    if (!session->ready_seen)
        return;
    session->ready_seen = false;
    gint64 now = realtime_ns();
    g_mutex_lock(&s->lock);
    s->ready = true;
    g_autofree char *info = build_ready_info(s, now);
    g_mutex_unlock(&s->lock);
    s->announced(s->data, info);
}

/* ---- the port handler ---------------------------------------------------------- */

static void *session_open(void *opaque)
{
    (void)opaque;
    struct session *session = g_new0(struct session, 1);
    session->line = g_string_new(NULL);
    return session;
}

static bool session_receive(void *opaque, void *data, const uint8_t *bytes, size_t len, GByteArray *reply)
{
    (void)reply; /* sd_notify expects no answer */
    struct notify_service *s = opaque;
    struct session *session = data;
    bool ok = true;
    g_mutex_lock(&s->lock);
    for (size_t i = 0; i < len && ok; i++) {
        if (bytes[i] == '\n') {
            take_line(s, session, session->line);
            g_string_truncate(session->line, 0);
        } else if (session->line->len >= NOTIFY_LINE_MAX) {
            s->ignored_lines++;
            ok = false; /* not sd_notify: reset the connection */
        } else {
            g_string_append_c(session->line, (char)bytes[i]);
        }
    }
    g_mutex_unlock(&s->lock);
    finish_delivery(s, session);
    return ok;
}

/* sd_notify("READY=1") sends no final newline: the connection's end ends the line. */
static void session_close(void *opaque, void *data)
{
    struct notify_service *s = opaque;
    struct session *session = data;
    g_mutex_lock(&s->lock);
    take_line(s, session, session->line);
    g_mutex_unlock(&s->lock);
    finish_delivery(s, session);
    g_string_free(session->line, TRUE);
    g_free(session);
}

/* ---- vm.info and snapshots ------------------------------------------------------ */

static gboolean add_tree_member(gpointer key, gpointer value, gpointer data)
{
    vjson_str(data, key, value);
    return FALSE;
}

/* The members shared by vm.info and the saved state, with the lock held. */
static void add_members_locked(struct notify_service *s, JsonBuilder *b)
{
    vjson_bool(b, "ready", s->ready);
    vjson_str(b, "status", s->status);
    vjson_bool(b, "stopping", s->stopping);
    if (s->has_exit_status)
        vjson_int(b, "exit_status", s->exit_status);
    else
        vjson_null(b, "exit_status");
    vjson_int(b, "watchdog_count", (gint64)s->watchdog_count);
    vjson_object_begin(b, "x_systemd");
    g_tree_foreach(s->x_systemd, add_tree_member, b);
    vjson_object_end(b);
}

void notify_service_add_info(struct notify_service *s, JsonBuilder *b)
{
    g_mutex_lock(&s->lock);
    vjson_object_begin(b, NULL);
    vjson_int(b, "port", s->handler.port);
    add_members_locked(s, b);
    vjson_int(b, "messages", (gint64)s->messages);
    vjson_int(b, "ignored_lines", (gint64)s->ignored_lines);
    vjson_object_end(b);
    g_mutex_unlock(&s->lock);
}

JsonNode *notify_service_save(struct notify_service *s)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_mutex_lock(&s->lock);
    vjson_object_begin(b, NULL);
    vjson_str(b, "boot_id", s->boot_id);
    vjson_int(b, "generation", (gint64)s->generation);
    add_members_locked(s, b);
    vjson_object_end(b);
    g_mutex_unlock(&s->lock);
    return json_builder_get_root(b);
}

static gint64 saved_int(JsonObject *saved, const char *name)
{
    JsonNode *node = json_object_get_member(saved, name);
    return node && JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_INT64
               ? json_node_get_int(node) : 0;
}

/* What the snapshot says: a saved member of the wrong type counts as absent
 * (the guest's texts are not worth refusing a restore over). */
bool notify_service_restore(struct notify_service *s, JsonObject *saved)
{
    g_mutex_lock(&s->lock);
    const char *boot_id = json_object_get_string_member_with_default(saved, "boot_id", NULL);
    if (boot_id && strlen(boot_id) < sizeof s->boot_id)
        g_strlcpy(s->boot_id, boot_id, sizeof s->boot_id);
    gint64 generation = saved_int(saved, "generation");
    s->generation = generation >= 0 ? (uint64_t)generation + 1 : 1;
    s->ready = json_object_get_boolean_member_with_default(saved, "ready", FALSE);
    g_free(s->status);
    s->status = g_strdup(json_object_get_string_member_with_default(saved, "status", NULL));
    s->stopping = json_object_get_boolean_member_with_default(saved, "stopping", FALSE);
    JsonNode *exit_status = json_object_get_member(saved, "exit_status");
    s->has_exit_status = exit_status && JSON_NODE_HOLDS_VALUE(exit_status) &&
                         json_node_get_value_type(exit_status) == G_TYPE_INT64;
    s->exit_status = s->has_exit_status ? json_node_get_int(exit_status) : 0;
    gint64 watchdog = saved_int(saved, "watchdog_count");
    s->watchdog_count = watchdog > 0 ? (uint64_t)watchdog : 0;
    JsonNode *x = json_object_get_member(saved, "x_systemd");
    if (x && JSON_NODE_HOLDS_OBJECT(x)) {
        g_autoptr(GList) names = json_object_get_members(json_node_get_object(x));
        for (GList *l = names; l; l = l->next) {
            const char *value = json_object_get_string_member_with_default(json_node_get_object(x), l->data, NULL);
            if (value && g_str_has_prefix(l->data, "X_SYSTEMD_"))
                keep_x_systemd(s, l->data, value);
        }
    }
    bool ready = s->ready;
    g_mutex_unlock(&s->lock);
    return ready;
}

void notify_service_announce_again(struct notify_service *s)
{
    g_mutex_lock(&s->lock);
    g_autofree char *info = build_ready_info(s, realtime_ns());
    g_mutex_unlock(&s->lock);
    s->announced(s->data, info);
}
