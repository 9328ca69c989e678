#include "snapshot-remove.h"

#include <libvirt/libvirt.h>

#include "import.h"
#include "lineage.h"
#include "persist/push.h"
#include "snapshot-dir.h"
#include "snapshot-disks.h"
#include "util/virt-error.h"

/* Survivors whose layer is a diff on `gone` take its pages and its parent;
 * so does a managed save image taken as a diff on it. */
static bool fold_into_layer_children(struct vsnap_driver *drv, struct vsnap_domain *dom,
                                     struct snapshot_tree *tree, struct snapshot_entry *gone,
                                     GError **error)
{
    g_autoptr(GPtrArray) kids = snapshot_tree_layer_children(tree, gone);
    g_autofree char *managed = NULL;
    if (!lineage_managed_child(drv, dom, gone, &managed, error))
        return false;
    if (kids->len == 0 && !managed)
        return true;
    if (!gone->deleting && !snapshot_entry_mark_deleting(gone, error))
        return false;
    if (managed && !snapdir_fold_into_child(gone->dir, managed, error))
        return false;
    for (guint i = 0; i < kids->len; i++) {
        struct snapshot_entry *kid = kids->pdata[i];
        if (!snapdir_fold_into_child(gone->dir, kid->dir, error))
            return false;
        g_free(kid->layer_parent);
        kid->layer_parent = g_strdup(gone->layer_parent);
        kid->full = gone->full;
        if (!snapshot_entry_save(kid, error))
            return false;
    }
    return true;
}

/* A diff learnt from another host and not imported names the layer it is
 * a diff on by id, and its files (in the store) need that layer: its parent
 * cannot be folded into it here, nor dropped. */
static bool check_learnt_delete(struct snapshot_tree *tree, struct snapshot_entry *gone,
                                GError **error)
{
    g_autoptr(GPtrArray) layer_kids = snapshot_tree_layer_children(tree, gone);
    for (guint i = 0; i < layer_kids->len; i++) {
        struct snapshot_entry *kid = layer_kids->pdata[i];
        if (import_is_local(kid))
            continue;
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "cannot delete snapshot '%s': snapshot '%s' is a diff on it and is not on "
                    "this host (it is in %s): delete '%s' first, or revert to it (which "
                    "imports both)", gone->name, kid->name,
                    kid->store_url ? kid->store_url : "a store", kid->name);
        return false;
    }
    return true;
}

/* The disks' part first: the one refusal comes before anything changed. A
 * delete that folds the disks back into their images (the last snapshot)
 * or keeps the layer they run on is marked first, so that a crash in the
 * middle is finished later (recovery.c). */
static bool remove_disks(struct vsnap_driver *drv, struct vsnap_domain *dom, struct snapshot_tree *tree,
                         struct snapshot_entry *gone, GPtrArray *kid_dirs, bool last, bool *keeps, GError **error)
{
    if (!gone->deleting && !snapshot_disks_check_delete(drv, dom, gone->dir, keeps, error))
        return false;
    if ((last || *keeps) && !gone->deleting && !snapshot_entry_mark_deleting(gone, error))
        return false;
    return snapshot_disks_delete(drv, dom, gone->dir, kid_dirs, last, keeps, error) &&
           fold_into_layer_children(drv, dom, tree, gone, error);
}

bool snapshot_remove_one(struct vsnap_driver *drv, struct vsnap_domain *dom,
                         struct snapshot_tree *tree, struct snapshot_entry *gone, GError **error)
{
    g_autoptr(GPtrArray) kids = snapshot_tree_children(tree, gone->name);
    g_autoptr(GPtrArray) kid_dirs = g_ptr_array_new();
    for (guint i = 0; i < kids->len; i++)
        g_ptr_array_add(kid_dirs, ((struct snapshot_entry *)kids->pdata[i])->dir);
    /* Entries being deleted do not count: gone itself may be one. */
    bool last = snapshot_tree_count_live(tree) == (gone->deleting ? 0u : 1u);
    if (!check_learnt_delete(tree, gone, error))
        return false;
    /* Learnt from another host and never imported: no VM ran from it, so
     * no disk runs on it, and it has no files to fold. */
    bool files = import_is_local(gone), keeps = false;
    if (files && !remove_disks(drv, dom, tree, gone, kid_dirs, last, &keeps, error)) {
        /* Their messages name the snapshot by its directory. */
        g_prefix_error(error, "cannot delete snapshot '%s': ", gone->name);
        return false;
    }
    for (guint i = 0; i < kids->len; i++) {
        struct snapshot_entry *kid = kids->pdata[i];
        g_free(kid->parent);
        kid->parent = g_strdup(gone->parent);
        if (!snapshot_entry_save(kid, error))
            return false;
    }
    if (g_strcmp0(tree->current, gone->name) == 0 &&
        !snapshot_tree_set_current(tree, gone->parent, error))
        return false;
    g_autofree char *lineage = lineage_get(dom);
    /* The running VM's base is gone: the next snapshot is full. */
    if (g_strcmp0(lineage, gone->id) == 0 && !lineage_clear(dom, error))
        return false;
    push_drop(drv->pushes, tree->domain_uuid, gone->dir);
    if (!keeps)
        return snapshot_tree_remove(tree, gone, error);
    /* Its directory, metadata and all, leaves the snapshots in one rename. */
    if (!snapshot_disks_keep_layer(drv, dom, gone->dir, error)) {
        g_prefix_error(error, "snapshot '%s' is deleted, but its disk layer, which the disks run on: ", gone->name);
        return false;
    }
    snapshot_tree_forget(tree, gone);
    return true;
}
