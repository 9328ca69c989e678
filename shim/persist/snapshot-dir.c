/* Files of a snapshot directory (see snapshot-dir.h). */
#include "persist/snapshot-dir.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <string.h>
#include <unistd.h>

#include "persist/persist.h"

void snapshot_meta_clear(struct snapshot_meta *meta)
{
    g_free(meta->dir);
    g_free(meta->layer_path);
    g_free(meta->parent_url);
    memset(meta, 0, sizeof *meta);
}

static bool bad_meta(GError **error, const char *dir, const char *problem)
{
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "snapshot %s: state.json: %s", dir, problem);
    return false;
}

static bool parse_memory(JsonObject *memory, const char *dir, struct snapshot_meta *meta, GError **error)
{
    const char *layer = json_object_get_string_member_with_default(memory, "layer", NULL);
    const char *kind = json_object_get_string_member_with_default(memory, "kind", NULL);
    const char *id = json_object_get_string_member_with_default(memory, "id", NULL);
    if (!layer || strchr(layer, '/') || !g_strcmp0(layer, "..") || !g_strcmp0(layer, "."))
        return bad_meta(error, dir, "memory.layer is missing or not a file name");
    if (g_strcmp0(kind, "full") && g_strcmp0(kind, "diff"))
        return bad_meta(error, dir, "memory.kind must be \"full\" or \"diff\"");
    if (!id || !snap_id_parse(id, &meta->id))
        return bad_meta(error, dir, "memory.id is missing or not a UUID");
    meta->diff = !g_strcmp0(kind, "diff");
    meta->layer_path = g_build_filename(dir, layer, NULL);
    if (!meta->diff)
        return true;
    const char *parent_id = json_object_get_string_member_with_default(memory, "parent_id", NULL);
    const char *parent_url = json_object_get_string_member_with_default(memory, "parent_url", NULL);
    if (!parent_id || !snap_id_parse(parent_id, &meta->parent_id))
        return bad_meta(error, dir, "memory.parent_id of a diff is missing or not a UUID");
    if (!parent_url)
        return bad_meta(error, dir, "memory.parent_url of a diff is missing");
    meta->parent_url = g_strdup(parent_url);
    return true;
}

static bool read_state(const char *dir, struct snapshot_meta *meta, JsonParser **parser_out, GError **error)
{
    g_autofree char *path = g_build_filename(dir, "state.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) local = NULL;
    if (!json_parser_load_from_mapped_file(parser, path, &local)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "snapshot %s: cannot read state.json: %s", dir,
                    local->message);
        return false;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return bad_meta(error, dir, "not a JSON object");
    JsonObject *obj = json_node_get_object(root);
    gint64 version = json_object_get_int_member_with_default(obj, "vsnap_state_version", -1);
    if (version != PERSIST_STATE_VERSION) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "snapshot %s: state.json has format version %" G_GINT64_FORMAT ", this shim reads %d", dir,
                    version, PERSIST_STATE_VERSION);
        return false;
    }
    JsonNode *memory = json_object_get_member(obj, "memory");
    if (!memory || !JSON_NODE_HOLDS_OBJECT(memory))
        return bad_meta(error, dir, "\"memory\" is missing");
    if (!parse_memory(json_node_get_object(memory), dir, meta, error))
        return false;
    if (parser_out)
        *parser_out = g_steal_pointer(&parser);
    return true;
}

bool snapshot_dir_read(const char *dir, struct snapshot_meta *meta, JsonParser **parser_out, GError **error)
{
    memset(meta, 0, sizeof *meta);
    meta->dir = g_strdup(dir);
    if (read_state(dir, meta, parser_out, error))
        return true;
    snapshot_meta_clear(meta); /* nothing to free for the caller on failure */
    return false;
}

static bool io_failed(GError **error, const char *what, const char *path)
{
    int e = errno;
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_FAILED, "%s %s: %s", what, path, g_strerror(e));
    return false;
}

bool snapshot_dir_write_file(const char *dir, const char *name, const char *text, GError **error)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) local = NULL;
    if (!g_file_set_contents_full(path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                  0644, &local)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_FAILED, "cannot write %s: %s", path, local->message);
        return false;
    }
    return true;
}

bool snapshot_dir_sync(const char *dir, GError **error)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return io_failed(error, "cannot open directory", dir);
    bool ok = fsync(fd) == 0 || io_failed(error, "cannot fsync directory", dir);
    close(fd);
    return ok;
}

void snapshot_dir_remove(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (unlink(path) != 0)
            g_warning("cannot remove %s: %s", path, g_strerror(errno));
    }
    if (rmdir(dir) != 0 && errno != ENOENT)
        g_warning("cannot remove %s: %s", dir, g_strerror(errno));
}
