#include "domain/disk-state.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "util/atomic-file.h"
#include "snapshot/disk.h"
#include "util/virt-error.h"

#define CHAINS_FILE "chains"
#define SAVED_PREFIX "saved-"
#define KEPT_PREFIX "kept-"
#define OVERLAY_SUFFIX ".overlay"

char *disk_state_dir(const char *state_dir, const char *name)
{
    return g_build_filename(state_dir, "disks", name, NULL);
}

bool disk_state_make_dir(const char *dir, GError **error)
{
    if (g_mkdir_with_parents(dir, 0700) == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create %s: %s", dir,
                g_strerror(errno));
    return false;
}

static char *chains_path(const char *dir)
{
    return g_build_filename(dir, CHAINS_FILE, NULL);
}

/* The recorded layers are base first; domain_disk.chain is top first
 * (overlay, then the layers newest first). */
static void set_recorded_chain(struct domain_disk *disk, char **layers, const char *overlay)
{
    guint n = layers ? g_strv_length(layers) : 0;
    g_autofree const char **chain = g_new0(const char *, n + 2);
    chain[0] = overlay;
    for (guint i = 0; i < n; i++)
        chain[1 + i] = layers[n - 1 - i];
    domain_disk_set_chain(disk, chain);
}

bool disk_state_load(const char *dir, struct domain_def *def, GError **error)
{
    g_autofree char *path = chains_path(dir);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) local = NULL;
    for (size_t i = 0; i < def->n_disks; i++)
        domain_disk_set_chain(&def->disks[i], NULL);
    if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &local)) {
        if (g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            return true;
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "cannot read the disk chains %s: %s", path,
                    local->message);
        return false;
    }
    for (size_t i = 0; i < def->n_disks; i++) {
        struct domain_disk *disk = &def->disks[i];
        g_autofree char *image = g_key_file_get_string(kf, disk->target, "image", NULL);
        g_autofree char *overlay = g_key_file_get_string(kf, disk->target, "overlay", NULL);
        g_auto(GStrv) layers = g_key_file_get_string_list(kf, disk->target, "layers", NULL, NULL);
        if (image && overlay && g_str_equal(image, disk->path) && !disk->readonly)
            set_recorded_chain(disk, layers, overlay);
    }
    return true;
}

static guint chain_length(const struct domain_disk *disk)
{
    return disk->chain ? g_strv_length(disk->chain) : 0;
}

bool disk_state_save(const char *dir, const struct domain_def *def, GError **error)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    bool any = false;
    for (size_t i = 0; i < def->n_disks; i++) {
        const struct domain_disk *disk = &def->disks[i];
        guint n = chain_length(disk);
        if (n == 0)
            continue;
        any = true;
        g_autofree const char **layers = g_new0(const char *, n);
        for (guint j = 1; j < n; j++)
            layers[j - 1] = disk->chain[n - j];   /* base first */
        g_key_file_set_string(kf, disk->target, "image", disk->path);
        g_key_file_set_string_list(kf, disk->target, "layers", layers, n - 1);
        g_key_file_set_string(kf, disk->target, "overlay", disk->chain[0]);
    }
    g_autofree char *path = chains_path(dir);
    if (!any) {
        if (g_unlink(path) == 0 || errno == ENOENT)
            return true;
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot remove %s: %s", path,
                    g_strerror(errno));
        return false;
    }
    g_autofree char *text = g_key_file_to_data(kf, NULL, NULL);
    return disk_state_make_dir(dir, error) && atomic_file_write(path, text, error);
}

bool disk_state_has_chain(const char *dir)
{
    g_autofree char *path = chains_path(dir);
    return g_file_test(path, G_FILE_TEST_EXISTS);
}

/* Whether a chain of def names path or a file inside it. */
static bool in_use(const struct domain_def *def, const char *path)
{
    size_t len = strlen(path);
    for (size_t i = 0; i < def->n_disks; i++)
        for (char **p = def->disks[i].chain; p && *p; p++)
            if (strncmp(*p, path, len) == 0 && ((*p)[len] == '\0' || (*p)[len] == '/'))
                return true;
    return false;
}

static bool remove_tree(const char *path)
{
    g_autoptr(GFile) file = g_file_new_for_path(path);
    g_autoptr(GFileEnumerator) e = g_file_enumerate_children(file, G_FILE_ATTRIBUTE_STANDARD_NAME,
                                                              G_FILE_QUERY_INFO_NOFOLLOW_SYMLINKS, NULL, NULL);
    GFileInfo *info;
    while (e && (info = g_file_enumerator_next_file(e, NULL, NULL))) {
        g_autofree char *child = g_build_filename(path, g_file_info_get_name(info), NULL);
        if (g_file_info_get_file_type(info) == G_FILE_TYPE_DIRECTORY)
            remove_tree(child);
        else
            g_unlink(child);
        g_object_unref(info);
    }
    return g_rmdir(path) == 0 || errno == ENOENT;
}

void disk_state_collect(const char *dir, const struct domain_def *def)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (g_str_has_suffix(name, OVERLAY_SUFFIX) && !in_use(def, path))
            g_unlink(path);
    }
}

char *disk_state_new_saved_dir(const char *dir)
{
    g_autofree char *id = g_uuid_string_random();
    g_autofree char *name = g_strconcat(SAVED_PREFIX, id, NULL);
    return g_build_filename(dir, name, NULL);
}

char *disk_state_kept_dir(const char *dir, const char *snapshot_dir)
{
    g_autofree char *base = g_path_get_basename(snapshot_dir);
    g_autofree char *name = g_strconcat(KEPT_PREFIX, base, NULL);
    return g_build_filename(dir, name, NULL);
}

GPtrArray *disk_state_list(const char *dir, bool kept)
{
    GPtrArray *dirs = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d)))
        if (g_str_has_prefix(name, kept ? KEPT_PREFIX : SAVED_PREFIX))
            g_ptr_array_add(dirs, g_build_filename(dir, name, NULL));
    return dirs;
}

char *disk_state_kept_path(const char *dir, const char *layer)
{
    g_autofree char *from = g_path_get_dirname(layer);
    g_autofree char *file = g_path_get_basename(layer);
    g_autofree char *kept = disk_state_kept_dir(dir, from);
    char *path = g_build_filename(kept, file, NULL);
    if (g_file_test(path, G_FILE_TEST_EXISTS))
        return path;
    g_free(path);
    return NULL;
}

static char *relocated(const char *path, const char *from, const char *to)
{
    size_t len = strlen(from);
    if (strncmp(path, from, len) != 0 || (path[len] != '\0' && path[len] != '/'))
        return NULL;
    return g_strconcat(to, path + len, NULL);
}

bool disk_state_relocate(const char *dir, struct domain_def *def, const char *from, const char *to,
                         GError **error)
{
    bool changed = false;
    for (size_t i = 0; i < def->n_disks; i++)
        for (char **p = def->disks[i].chain; p && *p; p++) {
            char *moved = relocated(*p, from, to);
            if (moved) {
                g_free(*p);
                *p = moved;
                changed = true;
            }
        }
    return !changed || disk_state_save(dir, def, error);
}

bool disk_state_drop_layers(const char *dir, struct domain_def *def, const char *snapshot_dir,
                            GError **error)
{
    bool changed = false;
    for (size_t i = 0; i < def->n_disks; i++) {
        char **chain = def->disks[i].chain;
        size_t k = 0;
        for (size_t j = 0; chain && chain[j]; j++) {
            g_autofree char *inside = relocated(chain[j], snapshot_dir, snapshot_dir);
            if (inside && j > 0) {
                g_free(chain[j]);
                changed = true;
            } else {
                chain[k++] = chain[j];
            }
        }
        if (chain)
            chain[k] = NULL;
    }
    return !changed || disk_state_save(dir, def, error);
}

bool disk_state_remove(const char *dir, GError **error)
{
    if (remove_tree(dir))
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot remove %s: %s", dir, g_strerror(errno));
    return false;
}

/* The overlay to fold, NULL when it is gone: what it held is lost, and the
 * image gets the disk as the last snapshot left it, so that a domain whose
 * overlay went can still be undefined (or end) instead of never. */
static const char *overlay_to_fold(const struct domain_disk *disk)
{
    if (g_file_test(disk->chain[0], G_FILE_TEST_EXISTS))
        return disk->chain[0];
    g_warning("disk '%s': its overlay %s is gone; %s gets the disk as its last snapshot left it",
              disk->target, disk->chain[0], disk->path);
    return NULL;
}

bool disk_state_fold_into_images(const struct domain_def *def, GError **error)
{
    /* A clone's base is its origin's image, which its origin's layers need. */
    if (domain_def_is_clone(def)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "the disks of clone '%s' are not folded into their images: those are the base of domain "
                    "'%s' and its snapshots", def->name, def->vsnap.from_domain);
        return false;
    }
    for (size_t i = 0; i < def->n_disks; i++) {
        const struct domain_disk *disk = &def->disks[i];
        guint n = chain_length(disk);
        if (n == 0)
            continue;
        g_autofree const char **layers = g_new0(const char *, n);
        for (guint j = 1; j < n; j++)
            layers[j - 1] = disk->chain[n - j];   /* base first */
        g_autoptr(GError) local = NULL;
        if (!snap_disk_fold_into_image(disk->path, layers, n - 1, overlay_to_fold(disk), NULL,
                                       &local)) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                        "cannot fold disk '%s' back into %s: %s", disk->target, disk->path, local->message);
            return false;
        }
    }
    return true;
}

bool disk_state_release(const char *dir, const struct domain_def *def, GError **error)
{
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR))
        return true;
    /* A clone's disks were its overlays over its origin's: they go. */
    if (domain_def_is_clone(def))
        return disk_state_remove(dir, error);
    g_autoptr(domain_def) copy = domain_def_copy(def);
    return disk_state_load(dir, copy, error) && disk_state_fold_into_images(copy, error) &&
           disk_state_remove(dir, error);
}

bool disk_state_holds_only_unrecorded(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    if (!d)
        return false;
    for (const char *name; (name = g_dir_read_name(d));)
        if (!g_str_has_suffix(name, OVERLAY_SUFFIX))
            return false;   /* the chains record, a kept or saved directory */
    return true;
}

#define PIVOT_PREFIX "pivot-"

static char *pivot_path(const char *dir, const char *target)
{
    g_autofree char *name = g_strconcat(PIVOT_PREFIX, target, NULL);
    return g_build_filename(dir, name, NULL);
}

bool disk_state_begin_pivot(const char *dir, const char *target, GError **error)
{
    g_autofree char *path = pivot_path(dir, target);
    return atomic_file_write(path, target, error);
}

void disk_state_end_pivot(const char *dir, const char *target)
{
    g_autofree char *path = pivot_path(dir, target);
    g_unlink(path);
}

bool disk_state_finish_pivots(const char *dir, struct domain_def *def, GError **error)
{
    for (size_t i = 0; i < def->n_disks; i++) {
        struct domain_disk *disk = &def->disks[i];
        g_autofree char *path = pivot_path(dir, disk->target);
        if (!g_file_test(path, G_FILE_TEST_EXISTS))
            continue;
        g_autoptr(GError) local = NULL;
        /* The pull left the overlay on the image alone: only it to fold. */
        if (chain_length(disk) == 1 &&
            !snap_disk_fold_into_image(disk->path, NULL, 0, overlay_to_fold(disk), NULL, &local)) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                        "cannot finish the pivot of disk '%s' into %s: %s", disk->target, disk->path, local->message);
            return false;
        }
        g_message("disk '%s': the pivot of its active commit a crash cut short is finished: it is %s again",
                  disk->target, disk->path);
        domain_disk_set_chain(disk, NULL);
        if (!disk_state_save(dir, def, error))
            return false;
        g_unlink(path);
    }
    return true;
}
