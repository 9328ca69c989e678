#include "snapshot-revert.h"

#include <libvirt/libvirt.h>
#include <string.h>

#include "conf/snapshot-conf.h"
#include "lineage.h"
#include "revert-intent.h"
#include "run/process.h"
#include "snapshot-dir.h"
#include "util/virt-error.h"

static struct domain_def *snapshot_domain(struct vsnap_driver *drv, struct vsnap_domain *dom,
                                          struct snapshot_entry *e, GError **error)
{
    g_autofree char *xml = snapshot_entry_domain_xml(e, error);
    struct domain_def *def = xml ? domain_def_parse_string(xml, drv->paths.schema_dir, error)
                                 : NULL;
    if (def && memcmp(def->uuid, dom->uuid, 16) != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR,
                    "snapshot '%s' belongs to another domain (uuid differs)", e->name);
        g_clear_pointer(&def, domain_def_free);
    }
    return def;
}

bool snapshot_revert_request(struct vsnap_driver *drv, struct vsnap_domain *dom,
                             struct snapshot_entry *e, unsigned flags, struct domain_def **def,
                             struct restore_request *req, GError **error)
{
    *def = snapshot_domain(drv, dom, e, error);
    if (!*def || !snapdir_check_chain(e->dir, e->memory_id, error) ||
        !snapdir_check_disks(e->dir, *def, error)) {
        g_prefix_error(error, "cannot revert to snapshot '%s': ", e->name);
        return false;
    }
    bool run = (flags & VIR_DOMAIN_SNAPSHOT_REVERT_RUNNING) ||
               (!(flags & VIR_DOMAIN_SNAPSHOT_REVERT_PAUSED) && e->state != SNAPSHOT_STATE_PAUSED);
    *req = (struct restore_request){
        .source_dir = e->dir, .def = *def, .run = run, .origin = RESTORE_FROM_SNAPSHOT,
    };
    return true;
}

bool snapshot_revert_recorded(struct snapshot_tree *tree, struct vsnap_domain *dom,
                              struct snapshot_entry *e, GError **error)
{
    lineage_set(dom, e->id);
    bool ok = snapshot_tree_set_current(tree, e->name, error);
    revert_intent_remove(tree->dir);
    return ok;
}

pid_t snapshot_revert_shim_pid(struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    pid_t pid = dom->run ? dom->run->pid : 0;
    g_mutex_unlock(&dom->lock);
    return pid;
}
