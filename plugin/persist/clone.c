/* Clones through libvirt: persist/clone.h. */
#include "persist/clone.h"

#include <libvirt/virterror.h>

#include "clone-origin.h"
#include "conf/domain-conf.h"
#include "lineage.h"
#include "persist/snapshot.h"
#include "restore.h"
#include "snapshot-dir.h"
#include "util/virt-error.h"

static struct domain_def *snapshot_definition(struct vsnap_driver *drv, const struct snapshot_entry *e,
                                              GError **error)
{
    g_autofree char *xml = snapshot_entry_domain_xml(e, error);
    return xml ? domain_def_parse_string(xml, drv->paths.schema_dir, error) : NULL;
}

/* The clone runs the snapshot's memory and vCPUs on the snapshot's disks. */
static bool check_fits(const struct domain_def *clone, const struct domain_def *snap, GError **error)
{
    if (clone->memory_kib != snap->memory_kib || clone->vcpus != snap->vcpus) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "clone '%s' has %" G_GUINT64_FORMAT " KiB of memory and %u vCPUs, snapshot '%s' of domain "
                    "'%s' has %" G_GUINT64_FORMAT " KiB and %u: a clone runs the snapshot's memory and vCPUs",
                    clone->name, clone->memory_kib, clone->vcpus, clone->vsnap.from_snapshot,
                    clone->vsnap.from_domain, snap->memory_kib, snap->vcpus);
        return false;
    }
    if (!domain_def_check_same_disks(snap, clone, error)) {
        g_prefix_error(error, "clone '%s' of snapshot '%s' of domain '%s': ", clone->name,
                       clone->vsnap.from_snapshot, clone->vsnap.from_domain);
        return false;
    }
    return true;
}

bool clone_check_definition(struct vsnap_driver *drv, const struct domain_def *def, GError **error)
{
    if (!domain_def_is_clone(def))
        return true;
    struct clone_origin o;
    if (!clone_origin_load(drv, def, &o, error))
        return false;
    g_autoptr(domain_def) snap = snapshot_definition(drv, o.entry, error);
    bool ok = snap && check_fits(def, snap, error);
    clone_origin_clear(&o);
    return ok;
}

static bool start_from_origin(struct vsnap_driver *drv, struct vsnap_domain *dom, const struct domain_def *def,
                              bool paused, GError **error)
{
    struct clone_origin o;
    if (!clone_origin_load(drv, def, &o, error))
        return false;
    g_autoptr(domain_def) snap = snapshot_definition(drv, o.entry, error);
    struct restore_request req = {
        .source_dir = o.entry->dir, .def = def, .run = !paused, .origin = RESTORE_FROM_SNAPSHOT,
    };
    bool ok = snap && check_fits(def, snap, error) && snapdir_check_chain(o.entry->dir, o.entry->memory_id, error) &&
              snapdir_check_disks(o.entry->dir, def, error) && restore_start(drv, dom, &req, error);
    if (ok)
        lineage_set(dom, o.entry->id);   /* its first snapshot is a diff on the origin's */
    else
        g_prefix_error(error, "cannot start clone '%s' from snapshot '%s' of domain '%s': ", def->name,
                       def->vsnap.from_snapshot, def->vsnap.from_domain);
    clone_origin_clear(&o);
    return ok;
}

bool clone_start(struct vsnap_driver *drv, struct vsnap_domain *dom, bool paused, bool *started,
                 GError **error)
{
    g_mutex_lock(&dom->lock);
    g_autoptr(domain_def) def = domain_def_is_clone(dom->def) ? domain_def_copy(dom->def) : NULL;
    g_mutex_unlock(&dom->lock);
    *started = def != NULL;
    if (!def)
        return true;
    bool own = false;
    if (!snapshot_start_from_current(drv, dom, paused, &own, error))
        return false;
    return own || start_from_origin(drv, dom, def, paused, error);
}
