/* virsh desc, metadata and setvcpus (driver-config.h). A change is applied
 * to a copy of the definition, which is checked as a define checks it
 * (formatted and parsed again against the schema), then takes its place. */
#include "driver/driver-config.h"

#include <libvirt/libvirt.h>

#include "conf/domain-conf.h"
#include "domain/domain.h"
#include "domain/events.h"
#include "domain/state.h"
#include "limits/vsnap-limits.h"
#include "driver/driver.h"
#include "run/process.h"
#include "util/atomic-file.h"
#include "util/virt-error.h"

typedef bool (*def_change)(struct domain_def *def, const void *data, GError **error);

/* Which definitions a call with flags affects. */
static bool pick(struct vsnap_domain *dom, unsigned flags, unsigned extra, bool *live, bool *config,
                 GError **error)
{
    unsigned known = VIR_DOMAIN_AFFECT_LIVE | VIR_DOMAIN_AFFECT_CONFIG | extra;
    if (flags & ~known) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)", flags & ~known);
        return false;
    }
    g_mutex_lock(&dom->lock);
    bool active = dom->run != NULL, persistent = dom->persistent;
    g_mutex_unlock(&dom->lock);
    *live = (flags & VIR_DOMAIN_AFFECT_LIVE) || (!(flags & VIR_DOMAIN_AFFECT_CONFIG) && active);
    *config = (flags & VIR_DOMAIN_AFFECT_CONFIG) || !active;
    if (*live && !active) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return false;
    }
    if (*config && !persistent) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "transient domains do not have any persistent config");
        return false;
    }
    return true;
}

/* def with change applied, checked as a define would check it. */
static struct domain_def *changed_copy(struct vsnap_driver *drv, const struct domain_def *def, bool live,
                                       def_change change, const void *data, GError **error)
{
    g_autoptr(domain_def) copy = domain_def_copy(def);
    if (!change(copy, data, error))
        return NULL;
    g_autofree char *xml = domain_def_format(copy, live, -1);
    g_autoptr(domain_def) check = live ? domain_def_parse_live_string(xml, drv->paths.schema_dir, error)
                                       : domain_def_parse_string(xml, drv->paths.schema_dir, error);
    return check ? g_steal_pointer(&copy) : NULL;
}

/* Under dom->lock: the live definition of the running domain. */
static bool change_live_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, def_change change,
                               const void *data, GError **error)
{
    struct domain_def *next = changed_copy(drv, dom->def, true, change, data, error);
    if (!next)
        return false;
    g_autofree char *xml = domain_def_format(next, true, -1);
    if (!atomic_file_write(dom->run->xml_path, xml, error)) {
        domain_def_free(next);
        return false;
    }
    /* While running, the persistent definition is the live one until they
     * differ: keep it as it was, to apply at the next start. */
    if (dom->persistent && !dom->next_def) {
        dom->next_def = g_steal_pointer(&dom->def);
        domain_def_forget_net_runtime(dom->next_def);
    } else {
        domain_def_free(dom->def);
    }
    dom->def = next;
    return true;
}

/* Under dom->lock: the persistent definition, the one of the next start. */
static bool change_config_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, def_change change,
                                 const void *data, GError **error)
{
    g_autoptr(domain_def) base = dom->run && !dom->next_def ? domain_def_copy(dom->def) : NULL;
    if (base)
        domain_def_forget_net_runtime(base);
    const struct domain_def *config = base ? base : dom->next_def ? dom->next_def : dom->def;
    struct domain_def *next = changed_copy(drv, config, false, change, data, error);
    if (!next || !driver_save_config(drv, next, error)) {
        domain_def_free(next);
        return false;
    }
    if (dom->run) {
        domain_def_free(dom->next_def);
        dom->next_def = next;
    } else {
        domain_def_free(dom->def);
        dom->def = next;
    }
    return true;
}

static bool change_definition(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *what,
                              unsigned flags, unsigned extra_flags, def_change change, const void *data,
                              GError **error)
{
    bool live, config;
    if (!pick(dom, flags, extra_flags, &live, &config, error) || !domain_job_acquire(dom, what, error))
        return false;
    /* Checked again under the job: a start or stop may have come meanwhile. */
    bool ok = pick(dom, flags, extra_flags, &live, &config, error);
    g_mutex_lock(&dom->lock);
    ok = ok && (!config || change_config_locked(drv, dom, change, data, error));
    ok = ok && (!live || change_live_locked(drv, dom, change, data, error));
    g_mutex_unlock(&dom->lock);
    domain_job_release(dom);
    return ok;
}

/* ---- metadata ---- */

char *driver_get_metadata(struct vsnap_driver *drv, struct vsnap_domain *dom, int type, const char *uri,
                          unsigned flags, GError **error)
{
    bool live, config;
    if (!pick(dom, flags, 0, &live, &config, error))
        return NULL;
    if (live && config) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                    "flags 'affect live' and 'affect config' are mutually exclusive");
        return NULL;
    }
    g_mutex_lock(&dom->lock);
    const struct domain_def *def = config && dom->next_def ? dom->next_def : dom->def;
    char *text = domain_def_get_metadata(def, type, uri, error);
    g_mutex_unlock(&dom->lock);
    return text;
}

struct metadata_change {
    int type;
    const char *metadata, *key, *uri;
};

static bool apply_metadata(struct domain_def *def, const void *data, GError **error)
{
    const struct metadata_change *m = data;
    return domain_def_set_metadata(def, m->type, m->metadata, m->key, m->uri, error);
}

bool driver_set_metadata(struct vsnap_driver *drv, struct vsnap_domain *dom, int type, const char *metadata,
                         const char *key, const char *uri, unsigned flags, GError **error)
{
    const struct metadata_change m = {type, metadata, key, uri};
    if (!change_definition(drv, dom, "metadata", flags, 0, apply_metadata, &m, error))
        return false;
    g_mutex_lock(&dom->lock);
    event_queue_metadata(drv->events, dom, type, type == VIR_DOMAIN_METADATA_ELEMENT ? uri : NULL);
    g_mutex_unlock(&dom->lock);
    return true;
}

/* ---- vCPUs ---- */

static bool apply_vcpus(struct domain_def *def, const void *data, GError **error)
{
    def->vcpus = *(const unsigned *)data;
    return true;
}

bool driver_set_vcpus(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned nvcpus, unsigned flags,
                      GError **error)
{
    if (flags & VIR_DOMAIN_VCPU_GUEST) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_UNSUPPORTED,
                    "vsnap cannot change the vCPUs the guest agent sees (setvcpus --guest)");
        return false;
    }
    bool live, config;
    if (!pick(dom, flags, VIR_DOMAIN_VCPU_MAXIMUM, &live, &config, error))
        return false;
    if (live) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_UNSUPPORTED,
                    "cannot change the vCPUs of a running vsnap domain: virtio-mmio microVMs have no CPU "
                    "hotplug (setvcpus --config changes the next boot)");
        return false;
    }
    if (nvcpus == 0 || nvcpus > VSNAP_MAX_VCPUS) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                    "requested vcpus (%u) must be between 1 and the maximum of %u", nvcpus, VSNAP_MAX_VCPUS);
        return false;
    }
    return change_definition(drv, dom, "setvcpus", flags, VIR_DOMAIN_VCPU_MAXIMUM, apply_vcpus, &nvcpus, error);
}
