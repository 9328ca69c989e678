#include "snapshot-tree.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "util/atomic-file.h"
#include "conf/domain-conf.h"
#include "snapshot-dir.h"
#include "util/virt-error.h"

#define META_FILE "snapshot.ini"
#define DOMAIN_FILE "domain.xml"
#define DELETING_FILE "deleting"
#define CURRENT_FILE "current"
#define GROUP "snapshot"

const char *const snapshot_entry_own_files[] = {META_FILE, DOMAIN_FILE, DELETING_FILE, NULL};

static void entry_free(struct snapshot_entry *e)
{
    if (!e)
        return;
    g_free(e->id);
    g_free(e->dir);
    g_free(e->name);
    g_free(e->description);
    g_free(e->parent);
    g_free(e->layer_parent);
    g_free(e->memory_id);
    g_free(e->store_url);
    g_free(e->disk_commit);
    g_free(e->domain_uuid);
    g_free(e);
}

void snapshot_tree_free(struct snapshot_tree *tree)
{
    if (!tree)
        return;
    g_ptr_array_free(tree->entries, TRUE);
    g_free(tree->dir);
    g_free(tree->domain_uuid);
    g_free(tree->current);
    g_free(tree);
}

char *snapshot_tree_dir(const char *state_dir, const char *domain)
{
    return g_build_filename(state_dir, "snapshots", domain, NULL);
}

static char *opt_string(GKeyFile *kf, const char *key)
{
    char *value = g_key_file_get_string(kf, GROUP, key, NULL);
    if (value && !*value)
        g_clear_pointer(&value, g_free);
    return value;
}

static struct snapshot_entry *load_entry(const char *tree_dir, const char *id)
{
    g_autofree char *dir = g_build_filename(tree_dir, id, NULL);
    g_autofree char *meta = g_build_filename(dir, META_FILE, NULL);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) error = NULL;
    if (!g_key_file_load_from_file(kf, meta, 0, &error)) {
        if (!g_error_matches(error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            g_warning("ignoring snapshot %s: %s", dir, error->message);
        return NULL;
    }
    struct snapshot_entry *e = g_new0(struct snapshot_entry, 1);
    e->id = g_strdup(id);
    e->dir = g_steal_pointer(&dir);
    e->name = opt_string(kf, "name");
    e->description = opt_string(kf, "description");
    e->parent = opt_string(kf, "parent");
    e->creation_time = g_key_file_get_int64(kf, GROUP, "creation_time", NULL);
    e->state = g_key_file_get_integer(kf, GROUP, "state", NULL);
    e->full = g_key_file_get_boolean(kf, GROUP, "full", NULL);
    e->layer_parent = opt_string(kf, "layer_parent");
    e->memory_id = opt_string(kf, "memory_id");
    e->store_url = opt_string(kf, "store_url");
    e->disk_commit = opt_string(kf, "disk_commit");
    e->domain_uuid = opt_string(kf, "domain_uuid");
    g_autofree char *deleting = g_build_filename(e->dir, DELETING_FILE, NULL);
    e->deleting = g_file_test(deleting, G_FILE_TEST_EXISTS);
    if (!e->name) {
        g_warning("ignoring snapshot %s: its metadata has no name", e->dir);
        entry_free(e);
        return NULL;
    }
    return e;
}

static gint by_creation(gconstpointer a, gconstpointer b)
{
    const struct snapshot_entry *ea = *(const struct snapshot_entry *const *)a;
    const struct snapshot_entry *eb = *(const struct snapshot_entry *const *)b;
    if (ea->creation_time != eb->creation_time)
        return ea->creation_time < eb->creation_time ? -1 : 1;
    return strcmp(ea->name, eb->name);
}

struct snapshot_tree *snapshot_tree_load(const char *state_dir, const char *domain,
                                         const char *domain_uuid, GError **error)
{
    struct snapshot_tree *tree = g_new0(struct snapshot_tree, 1);
    tree->dir = snapshot_tree_dir(state_dir, domain);
    tree->domain_uuid = g_strdup(domain_uuid);
    tree->entries = g_ptr_array_new_with_free_func((GDestroyNotify)entry_free);
    g_autoptr(GError) local = NULL;
    g_autoptr(GDir) d = g_dir_open(tree->dir, 0, &local);
    if (!d) {
        if (g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            return tree;
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot read %s: %s",
                    tree->dir, local->message);
        snapshot_tree_free(tree);
        return NULL;
    }
    const char *name;
    while ((name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(tree->dir, name, NULL);
        /* A hidden directory is the partial one of a snapshot being written
         * or imported (snap_dir_create_partial): never a snapshot, whatever
         * files it holds already. */
        struct snapshot_entry *e = name[0] != '.' && g_file_test(path, G_FILE_TEST_IS_DIR)
                                       ? load_entry(tree->dir, name) : NULL;
        if (e && e->domain_uuid && g_strcmp0(e->domain_uuid, domain_uuid) != 0)
            g_clear_pointer(&e, entry_free);
        if (e)
            g_ptr_array_add(tree->entries, e);
    }
    g_ptr_array_sort(tree->entries, by_creation);
    g_autofree char *current_path = g_build_filename(tree->dir, CURRENT_FILE, NULL);
    g_autofree char *current = NULL;
    if (g_file_get_contents(current_path, &current, NULL, NULL)) {
        g_strchomp(current);
        if (*current && snapshot_tree_find(tree, current))
            tree->current = g_steal_pointer(&current);
    }
    return tree;
}

struct snapshot_entry *snapshot_tree_find(struct snapshot_tree *tree, const char *name)
{
    for (guint i = 0; i < tree->entries->len; i++) {
        struct snapshot_entry *e = tree->entries->pdata[i];
        if (!e->deleting && g_str_equal(e->name, name))
            return e;
    }
    return NULL;
}

struct snapshot_entry *snapshot_tree_find_id(struct snapshot_tree *tree, const char *id)
{
    for (guint i = 0; i < tree->entries->len; i++) {
        struct snapshot_entry *e = tree->entries->pdata[i];
        if (g_str_equal(e->id, id))
            return e;
    }
    return NULL;
}

/* A snapshot whose parent is gone (a delete a crash interrupted, to be
 * finished by the next change) counts as a root meanwhile, so it stays
 * visible. */
static bool is_root(struct snapshot_tree *tree, const struct snapshot_entry *e)
{
    return !e->parent || !snapshot_tree_find(tree, e->parent);
}

GPtrArray *snapshot_tree_children(struct snapshot_tree *tree, const char *name)
{
    GPtrArray *out = g_ptr_array_new();
    for (guint i = 0; i < tree->entries->len; i++) {
        struct snapshot_entry *e = tree->entries->pdata[i];
        if (!e->deleting && (name ? g_strcmp0(e->parent, name) == 0 : is_root(tree, e)))
            g_ptr_array_add(out, e);
    }
    return out;
}

GPtrArray *snapshot_tree_descendants(struct snapshot_tree *tree, const char *name)
{
    GPtrArray *out = snapshot_tree_children(tree, name);
    /* Breadth first: out grows while we walk it. */
    for (guint i = 0; i < out->len; i++) {
        g_autoptr(GPtrArray) more =
            snapshot_tree_children(tree, ((struct snapshot_entry *)out->pdata[i])->name);
        for (guint j = 0; j < more->len; j++)
            g_ptr_array_add(out, more->pdata[j]);
    }
    return out;
}

GPtrArray *snapshot_tree_layer_children(struct snapshot_tree *tree,
                                        const struct snapshot_entry *entry)
{
    GPtrArray *out = g_ptr_array_new();
    for (guint i = 0; i < tree->entries->len; i++) {
        struct snapshot_entry *e = tree->entries->pdata[i];
        if (e != entry && g_strcmp0(e->layer_parent, entry->id) == 0)
            g_ptr_array_add(out, e);
    }
    return out;
}

unsigned snapshot_tree_count_live(struct snapshot_tree *tree)
{
    unsigned n = 0;
    for (guint i = 0; i < tree->entries->len; i++)
        n += !((struct snapshot_entry *)tree->entries->pdata[i])->deleting;
    return n;
}

struct snapshot_entry *snapshot_tree_new_entry(struct snapshot_tree *tree, GError **error)
{
    struct snapshot_entry *e = g_new0(struct snapshot_entry, 1);
    e->id = g_uuid_string_random();
    e->dir = g_build_filename(tree->dir, e->id, NULL);
    e->domain_uuid = g_strdup(tree->domain_uuid);
    if (g_mkdir_with_parents(e->dir, 0700) < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create %s: %s",
                    e->dir, g_strerror(errno));
        entry_free(e);
        return NULL;
    }
    g_ptr_array_add(tree->entries, e);
    return e;
}

bool snapshot_entry_save(const struct snapshot_entry *e, GError **error)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_key_file_set_string(kf, GROUP, "name", e->name);
    g_key_file_set_string(kf, GROUP, "description", e->description ? e->description : "");
    g_key_file_set_string(kf, GROUP, "parent", e->parent ? e->parent : "");
    g_key_file_set_int64(kf, GROUP, "creation_time", e->creation_time);
    g_key_file_set_integer(kf, GROUP, "state", e->state);
    g_key_file_set_boolean(kf, GROUP, "full", e->full);
    g_key_file_set_string(kf, GROUP, "layer_parent", e->layer_parent ? e->layer_parent : "");
    g_key_file_set_string(kf, GROUP, "domain_uuid", e->domain_uuid ? e->domain_uuid : "");
    g_key_file_set_string(kf, GROUP, "memory_id", e->memory_id ? e->memory_id : "");
    if (e->store_url)
        g_key_file_set_string(kf, GROUP, "store_url", e->store_url);
    if (e->disk_commit)
        g_key_file_set_string(kf, GROUP, "disk_commit", e->disk_commit);
    g_autofree char *text = g_key_file_to_data(kf, NULL, NULL);
    g_autofree char *path = g_build_filename(e->dir, META_FILE, NULL);
    return atomic_file_write(path, text, error);
}

bool snapshot_tree_set_current(struct snapshot_tree *tree, const char *name, GError **error)
{
    g_autofree char *path = g_build_filename(tree->dir, CURRENT_FILE, NULL);
    if (!atomic_file_write(path, name ? name : "", error))
        return false;
    g_free(tree->current);
    tree->current = g_strdup(name);
    return true;
}

bool snapshot_entry_mark_deleting(struct snapshot_entry *e, GError **error)
{
    g_autofree char *path = g_build_filename(e->dir, DELETING_FILE, NULL);
    if (!atomic_file_write(path, "", error))
        return false;
    e->deleting = true;
    return true;
}

bool snapshot_tree_remove(struct snapshot_tree *tree, struct snapshot_entry *e, GError **error)
{
    g_autofree char *meta = g_build_filename(e->dir, META_FILE, NULL);
    if (g_unlink(meta) < 0 && errno != ENOENT) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot remove %s: %s", meta,
                    g_strerror(errno));
        return false;
    }
    /* Forgotten from here on; leftover files are cleaned up later if this fails. */
    g_autoptr(GError) local = NULL;
    if (!snapdir_remove(e->dir, &local))
        g_warning("%s", local->message);
    g_ptr_array_remove(tree->entries, e);
    return true;
}

void snapshot_tree_forget(struct snapshot_tree *tree, struct snapshot_entry *e)
{
    g_ptr_array_remove(tree->entries, e);
}

static bool holds_any(const char *dir, GPtrArray *paths)
{
    size_t len = strlen(dir);
    for (guint i = 0; paths && i < paths->len; i++) {
        const char *p = paths->pdata[i];
        if (strncmp(p, dir, len) == 0 && p[len] == '/')
            return true;
    }
    return false;
}

void snapshot_tree_remove_unfinished(struct snapshot_tree *tree, GPtrArray *in_use)
{
    g_autoptr(GDir) d = g_dir_open(tree->dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(tree->dir, name, NULL);
        g_autofree char *meta = g_build_filename(path, META_FILE, NULL);
        /* A partial directory (hidden) is unfinished even once it holds a
         * snapshot.ini (one pulled from a store that has them). */
        if (!g_file_test(path, G_FILE_TEST_IS_DIR) ||
            (name[0] != '.' && g_file_test(meta, G_FILE_TEST_EXISTS)))
            continue;
        if (holds_any(path, in_use)) {
            g_message("keeping unfinished snapshot directory %s: the domain's disks run on its layers", path);
            continue;
        }
        g_autoptr(GError) error = NULL;
        g_message("removing unfinished snapshot directory %s", path);
        if (!snapdir_remove(path, &error))
            g_warning("%s", error->message);
    }
}

bool snapshot_tree_remove_all(const char *state_dir, const char *domain, GError **error)
{
    g_autofree char *dir = snapshot_tree_dir(state_dir, domain);
    return snapdir_remove(dir, error);
}

char *snapshot_entry_domain_xml(const struct snapshot_entry *e, GError **error)
{
    g_autofree char *path = g_build_filename(e->dir, DOMAIN_FILE, NULL);
    char *xml = NULL;
    g_autoptr(GError) local = NULL;
    if (!g_file_get_contents(path, &xml, NULL, &local)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR,
                    "snapshot '%s' has lost its domain definition: %s", e->name, local->message);
        return NULL;
    }
    return xml;
}

bool snapshot_entry_save_domain_xml(const struct snapshot_entry *e, const char *xml,
                                    GError **error)
{
    g_autofree char *path = g_build_filename(e->dir, DOMAIN_FILE, NULL);
    return atomic_file_write(path, xml, error);
}
