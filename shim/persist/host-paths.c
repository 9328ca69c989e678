/* A store snapshot's host paths: dropped, then required from the caller
 * (host-paths.h). */
#define G_LOG_DOMAIN "vsnap-shim"

#include "host-paths.h"

#include "config/vm-config-json.h"
#include "persist/persist.h"

static const char *const payload_paths[] = { "kernel", "initramfs", "firmware", NULL };
static const char *const console_paths[] = { "file", "socket", NULL };
static const char *const vsock_paths[] = { "socket", NULL };
static const char *const rng_paths[] = { "src", NULL };
static const char *const disk_paths[] = { "path", "vsnap_chain", "vsnap_overlay", NULL };
/* A tap is a host interface, and its address and MAC are the host's too. */
static const char *const net_host_members[] = { "tap", "fds", "ip", "mask", "host_mac", NULL };

static JsonObject *object_member(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;
    return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

static JsonArray *array_member(JsonObject *o, const char *name)
{
    JsonNode *n = json_object_get_member(o, name);
    return n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
}

static const char *string_member(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING ? json_node_get_string(n)
                                                                                        : NULL;
}

static void drop_members(JsonObject *o, const char *const *names)
{
    for (; o && *names; names++)
        json_object_remove_member(o, *names);
}

static void drop_in_each(JsonArray *list, const char *const *names)
{
    for (guint i = 0; list && i < json_array_get_length(list); i++) {
        JsonNode *n = json_array_get_element(list, i);
        if (JSON_NODE_HOLDS_OBJECT(n))
            drop_members(json_node_get_object(n), names);
    }
}

void host_paths_drop(JsonObject *config)
{
    drop_members(object_member(config, "payload"), payload_paths);
    drop_members(object_member(config, "serial"), console_paths);
    drop_members(object_member(config, "console"), console_paths);
    drop_members(object_member(config, "vsock"), vsock_paths);
    drop_members(object_member(config, "rng"), rng_paths);
    drop_in_each(array_member(config, "disks"), disk_paths);
    drop_in_each(array_member(config, "net"), net_host_members);
    json_object_remove_member(config, "vsnap_work_dir");
}

static bool missing(GError **error, const char *dir, const char *device, const char *give)
{
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                "snapshot %s came from a store, which supplies no host paths: %s needs %s", dir, device, give);
    return false;
}

/* File and Socket write or listen where they say; the other modes name nothing. */
static bool check_console(JsonObject *config, const char *name, const char *dir, GError **error)
{
    JsonObject *c = object_member(config, name);
    enum console_mode mode;
    if (!c || !console_mode_from_string(string_member(c, "mode"), &mode))
        return true; /* its default mode, or an error the parser names */
    const char *member = mode == CONSOLE_MODE_FILE ? "file" : mode == CONSOLE_MODE_SOCKET ? "socket" : NULL;
    if (!member || string_member(c, member))
        return true;
    g_autofree char *device = g_strdup_printf("the %s port (mode %s)", name, console_mode_to_string(mode));
    g_autofree char *give = g_strdup_printf("config_overrides.%s.%s", name, member);
    return missing(error, dir, device, give);
}

static const char *item_id(JsonArray *list, guint i, char **fallback)
{
    JsonNode *n = json_array_get_element(list, i);
    const char *id = JSON_NODE_HOLDS_OBJECT(n) ? string_member(json_node_get_object(n), "id") : NULL;
    return id ? id : (*fallback = g_strdup_printf("#%u (no id)", i));
}

static bool check_disks(JsonObject *config, const char *dir, GError **error)
{
    JsonArray *disks = array_member(config, "disks");
    for (guint i = 0; disks && i < json_array_get_length(disks); i++) {
        JsonNode *n = json_array_get_element(disks, i);
        if (JSON_NODE_HOLDS_OBJECT(n) && string_member(json_node_get_object(n), "path"))
            continue;
        g_autofree char *fallback = NULL;
        const char *id = item_id(disks, i, &fallback);
        g_autofree char *device = g_strdup_printf("disk %s", id);
        g_autofree char *give = g_strdup_printf("its image from config_overrides.disks ([{\"id\": \"%s\", "
                                                "\"path\": ...}])", id);
        return missing(error, dir, device, give);
    }
    return true;
}

static bool check_nets(JsonObject *config, const char *dir, GError **error)
{
    JsonArray *nets = array_member(config, "net");
    for (guint i = 0; nets && i < json_array_get_length(nets); i++) {
        JsonNode *n = json_array_get_element(nets, i);
        JsonObject *net = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
        if (net && (string_member(net, "tap") || json_object_has_member(net, "fds")))
            continue;
        g_autofree char *fallback = NULL;
        const char *id = item_id(nets, i, &fallback);
        g_autofree char *device = g_strdup_printf("network interface %s", id);
        g_autofree char *give = g_strdup_printf("its tap from config_overrides.net ([{\"id\": \"%s\", \"tap\" or "
                                                "\"fds\"}]) or net_fds", id);
        return missing(error, dir, device, give);
    }
    return true;
}

bool host_paths_check(JsonObject *config, const char *dir, GError **error)
{
    if (!string_member(object_member(config, "payload"), "kernel"))
        return missing(error, dir, "the payload (the kernel a vm.reboot boots)", "config_overrides.payload.kernel");
    if (!check_console(config, "serial", dir, error) || !check_console(config, "console", dir, error))
        return false;
    JsonObject *vsock = object_member(config, "vsock");
    if (vsock && !string_member(vsock, "socket"))
        return missing(error, dir, "the vsock device", "config_overrides.vsock.socket");
    JsonObject *rng = object_member(config, "rng");
    if (rng && !string_member(rng, "src"))
        return missing(error, dir, "the rng device", "config_overrides.rng.src");
    return check_disks(config, dir, error) && check_nets(config, dir, error);
}
