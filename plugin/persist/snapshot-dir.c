#include "snapshot-dir.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/stat.h>

#include "chain.h"
#include "compact.h"
#include "layer.h"
#include "virt-error.h"

/* Longest chain we follow: the layer library's own limit. */
#define CHAIN_MAX SNAP_MAX_CHAIN

static void set_error(GError **error, int code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static void set_error(GError **error, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error_literal(error, VSNAP_VIR_ERROR, code, text);
}

/* Layer library errors keep their message (it names the file). */
static bool from_snap_error(GError *local, GError **error)
{
    set_error(error, VIR_ERR_OPERATION_FAILED, "%s", local->message);
    g_error_free(local);
    return false;
}

char *snapdir_url(const char *dir)
{
    return g_strconcat("file://", dir, NULL);
}

/* ---- state.json: {"memory": {"layer", "kind", "id", "parent_id", "parent_url"}} ---- */

struct state_file {
    char *path;
    JsonParser *parser;
    JsonObject *memory;
};

static void state_file_clear(struct state_file *st)
{
    g_clear_pointer(&st->path, g_free);
    g_clear_object(&st->parser);
}

static bool state_read(const char *dir, struct state_file *st, GError **error)
{
    st->path = g_build_filename(dir, "state.json", NULL);
    st->parser = json_parser_new();
    g_autoptr(GError) local = NULL;
    if (!json_parser_load_from_file(st->parser, st->path, &local)) {
        set_error(error, VIR_ERR_OPERATION_FAILED, "snapshot %s: cannot read state.json: %s", dir,
                  local->message);
        return false;
    }
    JsonNode *root = json_parser_get_root(st->parser);
    JsonNode *memory = root && JSON_NODE_HOLDS_OBJECT(root)
                           ? json_object_get_member(json_node_get_object(root), "memory") : NULL;
    if (!memory || !JSON_NODE_HOLDS_OBJECT(memory)) {
        set_error(error, VIR_ERR_OPERATION_FAILED, "snapshot %s: state.json has no \"memory\"",
                  dir);
        return false;
    }
    st->memory = json_node_get_object(memory);
    return true;
}

static const char *memory_string(const struct state_file *st, const char *key)
{
    return json_object_get_string_member_with_default(st->memory, key, NULL);
}

char *snapdir_layer_path(const char *dir, GError **error)
{
    struct state_file st = {0};
    char *path = NULL;
    if (state_read(dir, &st, error)) {
        const char *layer = memory_string(&st, "layer");
        if (layer && !strchr(layer, '/') && g_strcmp0(layer, "..") != 0)
            path = g_build_filename(dir, layer, NULL);
        else
            set_error(error, VIR_ERR_OPERATION_FAILED, "snapshot %s names no memory layer", dir);
    }
    state_file_clear(&st);
    return path;
}

static char *path_of_url(const char *url)
{
    if (!url || !*url)
        return NULL;
    if (g_str_has_prefix(url, "file://"))
        return g_strdup(url + strlen("file://"));
    return g_strdup(url);
}

bool snapdir_parent(const char *dir, char **parent, GError **error)
{
    struct state_file st = {0};
    *parent = NULL;
    bool ok = state_read(dir, &st, error);
    if (ok && g_strcmp0(memory_string(&st, "kind"), "diff") == 0)
        *parent = path_of_url(memory_string(&st, "parent_url"));
    state_file_clear(&st);
    return ok;
}

static bool write_json_atomic(const char *path, JsonNode *root, GError **error)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, root);
    gsize len = 0;
    g_autofree char *text = json_generator_to_data(gen, &len);
    g_autoptr(GError) local = NULL;
    if (!g_file_set_contents_full(path, text, (gssize)len,
                                  G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                  0600, &local)) {
        set_error(error, VIR_ERR_SYSTEM_ERROR, "cannot rewrite %s: %s", path, local->message);
        return false;
    }
    return true;
}

/* kind, parent_id and parent_url as a diff on parent (or a full layer). */
bool snapdir_set_parent(const char *dir, const char *parent, GError **error)
{
    struct state_file st = {0}, pst = {0};
    bool ok = state_read(dir, &st, error) && (!parent || state_read(parent, &pst, error));
    if (ok && parent) {
        g_autofree char *url = snapdir_url(parent);
        const char *parent_id = memory_string(&pst, "id");
        json_object_set_string_member(st.memory, "kind", "diff");
        json_object_set_string_member(st.memory, "parent_id", parent_id ? parent_id : "");
        json_object_set_string_member(st.memory, "parent_url", url);
    } else if (ok) {
        json_object_set_string_member(st.memory, "kind", "full");
        json_object_remove_member(st.memory, "parent_id");
        json_object_remove_member(st.memory, "parent_url");
    }
    ok = ok && write_json_atomic(st.path, json_parser_get_root(st.parser), error);
    state_file_clear(&st);
    state_file_clear(&pst);
    return ok;
}

GPtrArray *snapdir_chain(const char *top, GError **error)
{
    g_autoptr(GPtrArray) dirs = g_ptr_array_new_with_free_func(g_free);
    char *dir = g_strdup(top);
    while (dir) {
        if (dirs->len >= CHAIN_MAX) {
            set_error(error, VIR_ERR_OPERATION_FAILED,
                      "the chain below %s is longer than %u layers (a loop?)", top, CHAIN_MAX);
            g_free(dir);
            return NULL;
        }
        g_ptr_array_insert(dirs, 0, dir);
        char *parent = NULL;
        if (!snapdir_parent(dir, &parent, error))
            return NULL;
        dir = parent;
    }
    return g_steal_pointer(&dirs);
}

static GPtrArray *chain_layers(const char *top, GError **error)
{
    g_autoptr(GPtrArray) dirs = snapdir_chain(top, error);
    if (!dirs)
        return NULL;
    g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < dirs->len; i++) {
        char *layer = snapdir_layer_path(dirs->pdata[i], error);
        if (!layer)
            return NULL;
        g_ptr_array_add(layers, layer);
    }
    return g_steal_pointer(&layers);
}

/* A layer file's identity on disk: any write, replacement or truncation
 * changes its inode, size, mtime or ctime (ctime cannot be set back by hand). */
static char *layer_seal_text(const char *layer_path, GError **error)
{
    struct stat st;
    if (stat(layer_path, &st) < 0) {
        set_error(error, VIR_ERR_OPERATION_FAILED, "cannot stat snapshot layer %s: %s",
                  layer_path, g_strerror(errno));
        return NULL;
    }
    return g_strdup_printf("%llu %llu %lld.%09ld %lld.%09ld\n", (unsigned long long)st.st_ino,
                           (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec,
                           st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
}

static char *seal_path(const char *layer_path)
{
    return g_strconcat(layer_path, ".seal", NULL);
}

static bool write_seal(const char *layer_path, GError **error)
{
    g_autofree char *text = layer_seal_text(layer_path, error);
    g_autofree char *path = seal_path(layer_path);
    if (!text)
        return false;
    GError *local = NULL;
    if (!g_file_set_contents(path, text, -1, &local)) {
        set_error(error, VIR_ERR_OPERATION_FAILED, "cannot seal snapshot layer %s: %s",
                  layer_path, local->message);
        g_error_free(local);
        return false;
    }
    return true;
}

static bool seal_matches(const char *layer_path)
{
    g_autofree char *path = seal_path(layer_path);
    g_autofree char *recorded = NULL;
    g_autofree char *now = layer_seal_text(layer_path, NULL);
    return now && g_file_get_contents(path, &recorded, NULL, NULL) && g_str_equal(recorded, now);
}

bool snapdir_seal(const char *dir, GError **error)
{
    g_autofree char *layer = snapdir_layer_path(dir, error);
    return layer && write_seal(layer, error);
}

/* Read and check every data block of a layer that changed since its seal. */
static bool verify_changed_layer(struct snap_layer *layer, GError **error)
{
    if (seal_matches(layer->path))
        return true;
    GError *local = NULL;
    if (!snap_layer_verify_data(layer, 0, layer->hdr.page_count, &local))
        return from_snap_error(local, error);
    g_autoptr(GError) ignored = NULL;
    if (!write_seal(layer->path, &ignored))
        g_warning("%s", ignored->message); /* verified anyway: next time reads it again */
    return true;
}

bool snapdir_check_chain(const char *top, GError **error)
{
    g_autoptr(GPtrArray) layers = chain_layers(top, error);
    if (!layers)
        return false;
    GError *local = NULL;
    g_autoptr(snap_chain) chain =
        snap_chain_open((const char *const *)layers->pdata, layers->len, SNAP_CHAIN_DEFAULT,
                        &local);
    if (!chain)
        return from_snap_error(local, error);
    for (unsigned i = 0; i < chain->nlayers; i++)
        if (!verify_changed_layer(chain->layers[i], error))
            return false;
    return true;
}

bool snapdir_layer_ids(const char *dir, char out_id[37], char out_parent[37], GError **error)
{
    g_autofree char *path = snapdir_layer_path(dir, error);
    if (!path)
        return false;
    GError *local = NULL;
    struct snap_layer *layer = snap_layer_open(path, &local);
    if (!layer)
        return from_snap_error(local, error);
    snap_id_to_string(&layer->hdr.id, out_id);
    snap_id_to_string(&layer->hdr.parent_id, out_parent);
    snap_layer_close(layer);
    return true;
}

bool snapdir_fold_into_child(const char *inner, const char *child, GError **error)
{
    char inner_id[37], inner_parent[37], child_id[37], child_parent[37];
    if (!snapdir_layer_ids(inner, inner_id, inner_parent, error) ||
        !snapdir_layer_ids(child, child_id, child_parent, error))
        return false;
    if (g_str_equal(child_parent, inner_id)) {
        g_autofree char *inner_layer = snapdir_layer_path(inner, error);
        g_autofree char *child_layer = inner_layer ? snapdir_layer_path(child, error) : NULL;
        GError *local = NULL;
        if (!child_layer)
            return false;
        if (!snap_compact_fold(inner_layer, child_layer, &local))
            return from_snap_error(local, error);
    } else if (!g_str_equal(child_parent, inner_parent)) {
        set_error(error, VIR_ERR_OPERATION_FAILED,
                  "cannot fold %s into %s: the child's layer names neither it nor its parent",
                  inner, child);
        return false;
    }
    g_autofree char *grandparent = NULL;
    return snapdir_parent(inner, &grandparent, error) &&
           snapdir_set_parent(child, grandparent, error);
}

static guint64 files_bytes(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    guint64 total = 0;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        struct stat st;
        /* st_blocks: a sparse temporary file counts what is written. */
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            total += MIN((guint64)st.st_size, (guint64)st.st_blocks * 512);
    }
    return total;
}

bool snapdir_remove(const char *dir, GError **error)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    if (!d)
        return true;   /* already gone */
    const char *name;
    while ((name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
            if (!snapdir_remove(path, error))
                return false;
        } else if (g_unlink(path) < 0 && errno != ENOENT) {
            set_error(error, VIR_ERR_SYSTEM_ERROR, "cannot remove %s: %s", path,
                      g_strerror(errno));
            return false;
        }
    }
    if (g_rmdir(dir) < 0 && errno != ENOENT) {
        set_error(error, VIR_ERR_SYSTEM_ERROR, "cannot remove %s: %s", dir, g_strerror(errno));
        return false;
    }
    return true;
}

/* The shim writes a snapshot into ".<name>.partial-XXXXXX" beside the
 * destination and renames it into place (shim/persist/persist.h): while it
 * writes, that directory is the progress. */
guint64 snapdir_bytes(const char *dir)
{
    g_autofree char *parent = g_path_get_dirname(dir);
    g_autofree char *base = g_path_get_basename(dir);
    g_autofree char *prefix = g_strdup_printf(".%s.partial-", base);
    guint64 total = files_bytes(dir);
    g_autoptr(GDir) d = g_dir_open(parent, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        if (g_str_has_prefix(name, prefix)) {
            g_autofree char *path = g_build_filename(parent, name, NULL);
            total += files_bytes(path);
        }
    }
    return total;
}
