/* The manifest's JSON (manifest.h). */
#include "store/manifest.h"
#include "store/store.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "json/bounded-json.h"
#include "json/vjson.h"

static void file_clear(gpointer p)
{
    g_free(((struct manifest_file *)p)->name);
}

struct manifest *manifest_new(void)
{
    struct manifest *m = g_new0(struct manifest, 1);
    m->files = g_array_new(FALSE, TRUE, sizeof(struct manifest_file));
    g_array_set_clear_func(m->files, file_clear);
    m->disk_parents = g_ptr_array_new_with_free_func(g_free);
    return m;
}

void manifest_free(struct manifest *m)
{
    if (!m)
        return;
    g_free(m->id);
    g_free(m->parent);
    g_ptr_array_unref(m->disk_parents);
    g_free(m->created);
    g_array_unref(m->files);
    g_free(m->domain_xml);
    g_free(m->snapshot_xml);
    g_free(m);
}

char *manifest_name(const char *id)
{
    return g_strdup_printf("manifests/%s.json", id);
}

/* g_ptr_array_sort hands the compare function the elements' addresses. */
static gint by_name(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void manifest_sort_names(GPtrArray *names)
{
    g_ptr_array_sort(names, by_name);
}

/* Ids are the layer ids, UUIDs; anything that could leave manifests/ is refused. */
bool manifest_id_valid(const char *id)
{
    if (!id || !*id || strlen(id) > 128)
        return false;
    for (const char *p = id; *p; p++)
        if (!g_ascii_isalnum(*p) && *p != '-' && *p != '_')
            return false;
    return true;
}

static bool digest_valid(const char *d)
{
    if (!d || strlen(d) != 64)
        return false;
    for (; *d; d++)
        if (!g_ascii_isxdigit(*d) || g_ascii_isupper(*d))
            return false;
    return true;
}

static bool file_name_valid(const char *n)
{
    return n && *n && !strchr(n, '/') && strcmp(n, ".") != 0 && strcmp(n, "..") != 0 &&
           strlen(n) < 256;
}

GBytes *manifest_to_json(const struct manifest *m)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_int(b, "vsnap_manifest_version", MANIFEST_VERSION);
    vjson_str(b, "id", m->id);
    vjson_str_opt(b, "parent", m->parent);
    if (m->disk_parents->len) {
        vjson_array_begin(b, "disk_parents");
        for (guint i = 0; i < m->disk_parents->len; i++)
            vjson_str(b, NULL, m->disk_parents->pdata[i]);
        vjson_array_end(b);
    }
    vjson_str(b, "created", m->created ? m->created : "");
    vjson_array_begin(b, "files");
    for (guint i = 0; i < m->files->len; i++) {
        const struct manifest_file *f = &g_array_index(m->files, struct manifest_file, i);
        vjson_object_begin(b, NULL);
        vjson_str(b, "name", f->name);
        vjson_str(b, "kind", f->kind == MANIFEST_LAYER ? "layer" : "file");
        vjson_int(b, "size", (gint64)f->size);
        vjson_str(b, "sha256", f->digest);
        vjson_int(b, "object_size", (gint64)f->object_size);
        vjson_int(b, "frames", (gint64)f->frames);
        vjson_str(b, "seek_table_sha256", f->table_sha256);
        vjson_object_end(b);
    }
    vjson_array_end(b);
    vjson_str_opt(b, "domain_xml", m->domain_xml);
    vjson_str_opt(b, "snapshot_xml", m->snapshot_xml);
    vjson_object_end(b);
    char *text = vjson_finish(b, true);
    return g_bytes_new_take(text, strlen(text));
}

static const char *opt_string(JsonObject *o, const char *member)
{
    JsonNode *n = json_object_get_member(o, member);
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? json_node_get_string(n) : NULL;
}

static bool get_size(JsonObject *o, const char *member, guint64 *out)
{
    JsonNode *n = json_object_get_member(o, member);
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64 ||
        json_node_get_int(n) < 0)
        return false;
    *out = (guint64)json_node_get_int(n);
    return true;
}

static bool parse_file(JsonNode *node, struct manifest_file *f)
{
    if (!JSON_NODE_HOLDS_OBJECT(node))
        return false;
    JsonObject *o = json_node_get_object(node);
    const char *name = opt_string(o, "name"), *kind = opt_string(o, "kind");
    const char *digest = opt_string(o, "sha256"), *table = opt_string(o, "seek_table_sha256");
    if (!file_name_valid(name) || !kind || !digest_valid(digest) || !digest_valid(table) ||
        !get_size(o, "size", &f->size) || !get_size(o, "object_size", &f->object_size) ||
        !get_size(o, "frames", &f->frames))
        return false;
    if (strcmp(kind, "layer") == 0)
        f->kind = MANIFEST_LAYER;
    else if (strcmp(kind, "file") == 0)
        f->kind = MANIFEST_FILE;
    else
        return false;
    f->name = g_strdup(name);
    g_strlcpy(f->digest, digest, sizeof(f->digest));
    g_strlcpy(f->table_sha256, table, sizeof(f->table_sha256));
    return true;
}

static bool parse_disk_parents(JsonObject *o, struct manifest *m)
{
    JsonNode *node = json_object_get_member(o, "disk_parents");
    if (!JSON_NODE_HOLDS_ARRAY(node))
        return false;
    JsonArray *a = json_node_get_array(node);
    if (json_array_get_length(a) > MANIFEST_MAX_DISK_PARENTS)
        return false;
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *e = json_array_get_element(a, i);
        const char *id = JSON_NODE_HOLDS_VALUE(e) && json_node_get_value_type(e) == G_TYPE_STRING
                             ? json_node_get_string(e) : NULL;
        if (!manifest_id_valid(id))
            return false;
        g_ptr_array_add(m->disk_parents, g_strdup(id));
    }
    return true;
}

static bool parse_root(JsonObject *o, struct manifest *m, const char **what)
{
    guint64 version = 0;
    *what = "vsnap_manifest_version";
    if (!get_size(o, "vsnap_manifest_version", &version) || version != MANIFEST_VERSION)
        return false;
    *what = "id";
    if (!manifest_id_valid(opt_string(o, "id")))
        return false;
    m->id = g_strdup(opt_string(o, "id"));
    *what = "parent";
    if (json_object_has_member(o, "parent")) {
        if (!manifest_id_valid(opt_string(o, "parent")))
            return false;
        m->parent = g_strdup(opt_string(o, "parent"));
    }
    *what = "disk_parents";
    if (json_object_has_member(o, "disk_parents") && !parse_disk_parents(o, m))
        return false;
    m->created = g_strdup(opt_string(o, "created"));
    m->domain_xml = g_strdup(opt_string(o, "domain_xml"));
    m->snapshot_xml = g_strdup(opt_string(o, "snapshot_xml"));
    *what = "files";
    JsonNode *files = json_object_get_member(o, "files");
    if (!files || !JSON_NODE_HOLDS_ARRAY(files))
        return false;
    JsonArray *a = json_node_get_array(files);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        struct manifest_file f = { 0 };
        if (!parse_file(json_array_get_element(a, i), &f))
            return false;
        for (guint j = 0; j < m->files->len; j++)
            if (strcmp(g_array_index(m->files, struct manifest_file, j).name, f.name) == 0) {
                g_free(f.name);
                return false;
            }
        g_array_append_val(m->files, f);
    }
    return true;
}

struct manifest *manifest_parse(GBytes *json, const char *name, GError **error)
{
    gsize len;
    const char *text = g_bytes_get_data(json, &len);
    if (len > MANIFEST_MAX_BYTES) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "manifest %s is too large", name);
        return NULL;
    }
    /* A store is another host's, or anybody's on the way: its manifest is
     * bounded before json-glib's recursion sees it (16 MiB of '[' is
     * nesting deep enough to overflow a thread's stack). */
    g_autoptr(JsonParser) p = json_parser_new();
    g_autoptr(GError) e = NULL;
    if (!bounded_json_load_data(p, text, len, MANIFEST_MAX_BYTES, &e)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "manifest %s: %s", name, e->message);
        return NULL;
    }
    JsonNode *root = json_parser_get_root(p);
    g_autoptr(manifest) m = manifest_new();
    const char *what = "the root";
    if (!root || !JSON_NODE_HOLDS_OBJECT(root) || !parse_root(json_node_get_object(root), m, &what)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "manifest %s: bad or missing \"%s\"",
                    name, what);
        return NULL;
    }
    return g_steal_pointer(&m);
}
