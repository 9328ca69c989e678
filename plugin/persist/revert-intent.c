#include "revert-intent.h"

#include <errno.h>
#include <glib/gstdio.h>

#include "util/atomic-file.h"

#define INTENT_FILE "revert-intent"

static char *intent_path(const char *tree_dir)
{
    return g_build_filename(tree_dir, INTENT_FILE, NULL);
}

bool revert_intent_write(const char *tree_dir, const struct revert_intent *intent,
                         GError **error)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_key_file_set_string(kf, "revert", "snapshot", intent->snapshot);
    g_key_file_set_uint64(kf, "revert", "flags", intent->flags);
    g_key_file_set_int64(kf, "revert", "old_pid", intent->old_pid);
    g_autofree char *text = g_key_file_to_data(kf, NULL, NULL);
    g_autofree char *path = intent_path(tree_dir);
    if (g_mkdir_with_parents(tree_dir, 0700) < 0) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot create %s: %s",
                    tree_dir, g_strerror(errno));
        return false;
    }
    return atomic_file_write(path, text, error);
}

bool revert_intent_read(const char *tree_dir, struct revert_intent *intent)
{
    g_autofree char *path = intent_path(tree_dir);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) error = NULL;
    if (!g_key_file_load_from_file(kf, path, 0, &error)) {
        if (!g_error_matches(error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            g_warning("%s: %s; dropping it", path, error->message);
        revert_intent_remove(tree_dir);
        return false;
    }
    intent->snapshot = g_key_file_get_string(kf, "revert", "snapshot", NULL);
    intent->flags = (unsigned)g_key_file_get_uint64(kf, "revert", "flags", NULL);
    intent->old_pid = (pid_t)g_key_file_get_int64(kf, "revert", "old_pid", NULL);
    if (!intent->snapshot || !*intent->snapshot) {
        g_warning("%s names no snapshot; dropping it", path);
        revert_intent_clear(intent);
        revert_intent_remove(tree_dir);
        return false;
    }
    return true;
}

void revert_intent_remove(const char *tree_dir)
{
    g_autofree char *path = intent_path(tree_dir);
    if (g_unlink(path) < 0 && errno != ENOENT)
        g_warning("cannot remove %s: %s", path, g_strerror(errno));
}

void revert_intent_clear(struct revert_intent *intent)
{
    g_clear_pointer(&intent->snapshot, g_free);
}
