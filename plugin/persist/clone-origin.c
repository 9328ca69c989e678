/* A clone's origin: clone-origin.h. */
#include "clone-origin.h"

#include <libvirt/virterror.h>

#include "conf/domain-conf.h"
#include "domain/domain.h"
#include "lineage.h"
#include "snapshot-dir.h"
#include "util/virt-error.h"

bool clone_origin_load(struct vsnap_driver *drv, const struct domain_def *def, struct clone_origin *out,
                       GError **error)
{
    *out = (struct clone_origin){0};
    g_autoptr(vsnap_domain) origin = domain_list_find_name(drv->domains, def->vsnap.from_domain);
    if (!origin) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN,
                    "clone '%s': its origin domain '%s' (<vsnap:from domain>) does not exist", def->name,
                    def->vsnap.from_domain);
        return false;
    }
    char uuid[37];
    uuid_format(origin->uuid, uuid);
    out->tree = snapshot_tree_load(drv->paths.state_dir, origin->name, uuid, error);
    out->entry = out->tree ? snapshot_tree_find(out->tree, def->vsnap.from_snapshot) : NULL;
    if (out->tree && (!out->entry || out->entry->deleting)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN_SNAPSHOT,
                    "clone '%s': domain '%s' has no snapshot '%s' (<vsnap:from snapshot>)", def->name,
                    def->vsnap.from_domain, def->vsnap.from_snapshot);
    }
    if (!out->entry || out->entry->deleting) {
        clone_origin_clear(out);
        return false;
    }
    return true;
}

void clone_origin_clear(struct clone_origin *o)
{
    g_clear_pointer(&o->tree, snapshot_tree_free);
    o->entry = NULL;
}

bool clone_diff_base(struct vsnap_driver *drv, struct vsnap_domain *dom, const struct snapshot_tree *own,
                     struct clone_origin *o)
{
    if (own->current)
        return false;
    g_mutex_lock(&dom->lock);
    g_autoptr(domain_def) def = domain_def_is_clone(dom->def) ? domain_def_copy(dom->def) : NULL;
    g_mutex_unlock(&dom->lock);
    g_autofree char *lineage = def ? lineage_get(dom) : NULL;
    struct clone_origin found;
    g_autoptr(GError) ignored = NULL;
    if (!lineage || !clone_origin_load(drv, def, &found, &ignored))
        return false;
    if (!g_str_equal(found.entry->id, lineage)) {
        clone_origin_clear(&found);
        return false;
    }
    *o = found;
    return true;
}

/* Whether the snapshot of id `top` in tree is one of doomed or sits, through
 * layer parents, on one. At most one step per entry: a loop ends. */
static bool sits_on_doomed(struct snapshot_tree *tree, const char *top, GPtrArray *doomed)
{
    const char *id = top;
    for (guint steps = 0; id && steps <= tree->entries->len; steps++) {
        for (guint i = 0; i < doomed->len; i++)
            if (g_str_equal(((struct snapshot_entry *)doomed->pdata[i])->id, id))
                return true;
        struct snapshot_entry *e = snapshot_tree_find_id(tree, id);
        id = e ? e->layer_parent : NULL;
    }
    return false;
}

/* Whether other's definition (the running one or the next) is a clone of
 * origin's snapshot that sits on a doomed one. */
static bool clone_of_doomed(struct vsnap_domain *other, const char *origin, struct snapshot_tree *tree,
                            GPtrArray *doomed)
{
    g_mutex_lock(&other->lock);
    const struct domain_def *defs[] = {other->def, other->next_def};
    g_autofree char *from = NULL;
    for (unsigned i = 0; i < G_N_ELEMENTS(defs) && !from; i++)
        if (domain_def_is_clone(defs[i]) && g_str_equal(defs[i]->vsnap.from_domain, origin))
            from = g_strdup(defs[i]->vsnap.from_snapshot);
    g_mutex_unlock(&other->lock);
    struct snapshot_entry *e = from ? snapshot_tree_find(tree, from) : NULL;
    return e && sits_on_doomed(tree, e->id, doomed);
}

/* other's snapshots whose layers sit on a doomed snapshot of tree (their
 * layer parent is no snapshot of other's own): appended to names. */
static void clone_snapshots_on_doomed(struct vsnap_driver *drv, struct vsnap_domain *other,
                                      struct snapshot_tree *tree, GPtrArray *doomed, GString *names)
{
    char uuid[37];
    uuid_format(other->uuid, uuid);
    g_autoptr(GError) ignored = NULL;
    g_autoptr(snapshot_tree) own = snapshot_tree_load(drv->paths.state_dir, other->name, uuid, &ignored);
    for (guint i = 0; own && i < own->entries->len; i++) {
        struct snapshot_entry *e = own->entries->pdata[i];
        if (e->layer_parent && !snapshot_tree_find_id(own, e->layer_parent) &&
            sits_on_doomed(tree, e->layer_parent, doomed))
            g_string_append_printf(names, "%ssnapshot '%s' of domain '%s'", names->len ? ", " : "", e->name,
                                   other->name);
    }
}

bool clone_check_snapshots_unused(struct vsnap_driver *drv, struct vsnap_domain *origin,
                                  struct snapshot_tree *tree, GPtrArray *doomed, GError **error)
{
    g_autoptr(GString) names = g_string_new(NULL);
    g_autoptr(GPtrArray) doms = domain_list_snapshot(drv->domains);
    for (guint i = 0; i < doms->len; i++) {
        struct vsnap_domain *other = doms->pdata[i];
        if (other == origin)
            continue;
        if (clone_of_doomed(other, origin->name, tree, doomed))
            g_string_append_printf(names, "%sdomain '%s'", names->len ? ", " : "", other->name);
        clone_snapshots_on_doomed(drv, other, tree, doomed, names);
    }
    if (!names->len)
        return true;
    const struct snapshot_entry *first = doomed->pdata[0];
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                "snapshot '%s' of domain '%s' cannot go: clones descend from it (%s); their memory and "
                "disks sit on its layers", first->name, origin->name, names->str);
    return false;
}

/* The snapshot directories of top's memory chain, top first. */
static GPtrArray *chain_dirs(const char *top, GError **error)
{
    GPtrArray *dirs = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *dir = g_strdup(top);
    for (guint steps = 0; dir && steps < 4096; steps++) {
        char *parent = NULL;
        if (!snapdir_parent(dir, &parent, error)) {
            g_ptr_array_free(dirs, TRUE);
            return NULL;
        }
        g_ptr_array_add(dirs, g_steal_pointer(&dir));
        dir = parent;
    }
    g_ptr_array_add(dirs, NULL);
    return dirs;
}

GPtrArray *clone_origin_dirs(struct vsnap_driver *drv, const struct domain_def *def, GError **error)
{
    if (!domain_def_is_clone(def)) {
        GPtrArray *none = g_ptr_array_new();
        g_ptr_array_add(none, NULL);
        return none;
    }
    struct clone_origin o;
    if (!clone_origin_load(drv, def, &o, error))
        return NULL;
    GPtrArray *dirs = chain_dirs(o.entry->dir, error);
    clone_origin_clear(&o);
    return dirs;
}
