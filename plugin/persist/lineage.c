#include "lineage.h"

#include <errno.h>
#include <glib/gstdio.h>

#include "util/atomic-file.h"
#include "managed-image.h"
#include "run/process.h"
#include "snapshot-dir.h"
#include "util/virt-error.h"

#define LINEAGE_FILE "snapshot-lineage"

void lineage_set(struct vsnap_domain *dom, const char *snapshot_id)
{
    g_autofree char *path = process_run_path(dom, LINEAGE_FILE);
    if (!path)
        return;
    g_mutex_lock(&dom->lock);
    g_autofree char *text = g_strdup_printf("%s %" G_GUINT64_FORMAT "\n", snapshot_id,
                                            dom->generation);
    g_mutex_unlock(&dom->lock);
    g_autoptr(GError) error = NULL;
    if (!atomic_file_write(path, text, &error))
        g_warning("domain %s: %s (the next snapshot will be full)", dom->name, error->message);
}

bool lineage_clear(struct vsnap_domain *dom, GError **error)
{
    g_autofree char *path = process_run_path(dom, LINEAGE_FILE);
    if (path && g_unlink(path) < 0 && errno != ENOENT) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot remove %s: %s", path,
                    g_strerror(errno));
        return false;
    }
    return true;
}

char *lineage_get(struct vsnap_domain *dom)
{
    g_autofree char *path = process_run_path(dom, LINEAGE_FILE);
    g_autofree char *text = NULL;
    if (!path || !g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    g_auto(GStrv) words = g_strsplit(g_strstrip(text), " ", 2);
    if (g_strv_length(words) != 2)
        return NULL;
    g_mutex_lock(&dom->lock);
    /* A reboot inside the shim starts the guest afresh: no lineage then. */
    bool same = g_ascii_strtoull(words[1], NULL, 10) == dom->generation;
    g_mutex_unlock(&dom->lock);
    return same ? g_strdup(words[0]) : NULL;
}

struct snapshot_entry *lineage_diff_base(struct vsnap_domain *dom, struct snapshot_tree *tree)
{
    g_autofree char *lineage = lineage_get(dom);
    struct snapshot_entry *current = tree->current ? snapshot_tree_find(tree, tree->current) : NULL;
    if (!lineage || !current || !g_str_equal(current->id, lineage))
        return NULL;
    return current;
}

char *lineage_diff_base_dir(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    char uuid[37];
    uuid_format(dom->uuid, uuid);
    g_autoptr(GError) error = NULL;
    g_autoptr(snapshot_tree) tree =
        snapshot_tree_load(drv->paths.state_dir, dom->name, uuid, &error);
    if (!tree) {
        g_warning("domain %s: %s; the image will not be a diff on a snapshot", dom->name,
                  error->message);
        return NULL;
    }
    struct snapshot_entry *base = lineage_diff_base(dom, tree);
    return base ? g_strdup(base->dir) : NULL;
}

bool lineage_managed_child(struct vsnap_driver *drv, struct vsnap_domain *dom,
                           const struct snapshot_entry *snapshot, char **child, GError **error)
{
    *child = NULL;
    if (!managed_image_exists(drv->paths.state_dir, dom->name))
        return true;
    g_autofree char *dir = managed_image_dir(drv->paths.state_dir, dom->name);
    g_autofree char *parent = NULL;
    if (!snapdir_parent(dir, &parent, error)) {
        g_prefix_error(error, "the managed save image of %s: ", dom->name);
        return false;
    }
    if (g_strcmp0(parent, snapshot->dir) == 0)
        *child = g_steal_pointer(&dir);
    return true;
}
