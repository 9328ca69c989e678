#include "driver/driver.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <libvirt/libvirt.h>
#include <string.h>
#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include "util/atomic-file.h"
#include "conf/capabilities.h"
#include "conf/xml-util.h"
#include "domain/disk-state.h"
#include "host/host-storage.h"
#include "host/network-port.h"
#include "monitor/monitor.h"
#include "persist/job.h"
#include "persist/pull-job.h"
#include "persist/push.h"
#include "persist/recovery.h"
#include "persist/clone.h"
#include "persist/save.h"
#include "persist/snapshot.h"
#include "run/process.h"
#include "util/virt-error.h"

/* ---- persistence: <state_dir>/domains/<name>.xml, <state_dir>/autostart/<name> ---- */

static char *config_path(struct vsnap_driver *drv, const char *name)
{
    g_autofree char *file = g_strdup_printf("%s.xml", name);
    return g_build_filename(drv->paths.state_dir, "domains", file, NULL);
}

static char *autostart_path(struct vsnap_driver *drv, const char *name)
{
    return g_build_filename(drv->paths.state_dir, "autostart", name, NULL);
}

bool driver_save_config(struct vsnap_driver *drv, const struct domain_def *def, GError **error)
{
    g_autofree char *path = config_path(drv, def->name);
    g_autofree char *xml = domain_def_format(def, false, -1);
    if (!atomic_file_write(path, xml, error)) {
        g_prefix_error(error, "cannot save the definition of %s: ", def->name);
        return false;
    }
    return true;
}

static void delete_config(struct vsnap_driver *drv, const char *name)
{
    g_autofree char *path = config_path(drv, name);
    g_autofree char *mark = autostart_path(drv, name);
    g_unlink(path);
    g_unlink(mark);
}

static bool set_autostart_mark(struct vsnap_driver *drv, const char *name, bool on,
                               GError **error)
{
    g_autofree char *mark = autostart_path(drv, name);
    if (!on)
        return g_unlink(mark) == 0 || errno == ENOENT ||
               (g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR,
                            "cannot remove %s: %s", mark, g_strerror(errno)), false);
    g_autoptr(GError) local = NULL;
    if (!g_file_set_contents(mark, "", 0, &local)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "%s", local->message);
        return false;
    }
    return true;
}

/* ---- creation and loading ---- */

static void end_transient(struct vsnap_driver *drv, struct vsnap_domain *dom);

struct vsnap_driver *driver_new(const struct driver_paths *paths, GError **error)
{
    /* Before any client thread: the schemas are parsed once, here, and
     * every define validates against them (conf/xml-util.h). */
    if (!conf_xml_load_schemas(paths->schema_dir, error))
        return NULL;
    const char *dirs[] = {paths->state_dir, paths->run_dir, paths->log_dir};
    for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
        if (g_mkdir_with_parents(dirs[i], 0700) < 0) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create %s: %s",
                        dirs[i], g_strerror(errno));
            return NULL;
        }
    }
    const char *subdirs[] = {"domains", "autostart"};
    for (size_t i = 0; i < G_N_ELEMENTS(subdirs); i++) {
        g_autofree char *dir = g_build_filename(paths->state_dir, subdirs[i], NULL);
        if (g_mkdir_with_parents(dir, 0700) < 0) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create %s: %s", dir,
                        g_strerror(errno));
            return NULL;
        }
    }
    struct vsnap_driver *drv = g_new0(struct vsnap_driver, 1);
    drv->paths = *paths;
    drv->paths.socket_dir = g_strdup(paths->socket_dir);
    drv->paths.state_dir = g_strdup(paths->state_dir);
    drv->paths.run_dir = g_strdup(paths->run_dir);
    drv->paths.log_dir = g_strdup(paths->log_dir);
    drv->paths.shim_path = g_canonicalize_filename(paths->shim_path, NULL);
    drv->paths.schema_dir = g_strdup(paths->schema_dir);
    drv->paths.network_uri = g_strdup(paths->network_uri ? paths->network_uri : NETWORK_PORT_DEFAULT_URI);
    drv->paths.storage_uri = g_strdup(paths->storage_uri ? paths->storage_uri : HOST_STORAGE_DEFAULT_URI);
    drv->paths.confine_user = g_strdup(paths->confine_user ? paths->confine_user : "vsnap");
    drv->domains = domain_list_new();
    drv->events = event_queue_new();
    drv->hostname = g_strdup(g_get_host_name());
    drv->autostart = g_ptr_array_new_with_free_func((GDestroyNotify)vsnap_domain_unref);
    store_options_init(&drv->store.options);
    drv->store.cache_size = STORE_DEFAULT_CACHE_SIZE;
    drv->pushes = push_queue_new(&drv->store);
    drv->pulls = pull_jobs_new();
    drv->end_transient = end_transient;
    return drv;
}

void driver_set_store(struct vsnap_driver *drv, struct driver_store *store)
{
    g_free(drv->store.url);
    g_free(drv->store.cache_dir);
    store_options_clear(&drv->store.options);
    drv->store = *store;
    memset(store, 0, sizeof(*store));
}

void driver_free(struct vsnap_driver *drv)
{
    if (!drv)
        return;
    event_queue_free(drv->events);
    g_ptr_array_unref(drv->autostart);
    domain_list_free(drv->domains);
    g_free(drv->paths.socket_dir);
    g_free(drv->paths.state_dir);
    g_free(drv->paths.run_dir);
    g_free(drv->paths.log_dir);
    g_free(drv->paths.shim_path);
    g_free(drv->paths.schema_dir);
    g_free(drv->paths.network_uri);
    g_free(drv->paths.storage_uri);
    g_free(drv->paths.confine_user);
    g_free(drv->hostname);
    g_free(drv);
}

static void load_config(struct vsnap_driver *drv, const char *path)
{
    g_autofree char *xml = NULL;
    g_autoptr(GError) error = NULL;
    if (!g_file_get_contents(path, &xml, NULL, &error)) {
        g_warning("%s", error->message);
        return;
    }
    struct domain_def *def = domain_def_parse_string(xml, drv->paths.schema_dir, &error);
    if (!def) {
        g_warning("ignoring %s: %s", path, error->message);
        return;
    }
    g_autofree char *expected = config_path(drv, def->name);
    if (!g_str_equal(expected, path)) {
        g_warning("ignoring %s: it defines domain '%s'", path, def->name);
        domain_def_free(def);
        return;
    }
    g_autoptr(vsnap_domain) dom = vsnap_domain_new(def);
    g_autofree char *mark = autostart_path(drv, dom->name);
    dom->persistent = true;
    dom->autostart = g_file_test(mark, G_FILE_TEST_EXISTS);
    if (!domain_list_add(drv->domains, dom, &error))
        g_warning("ignoring %s: %s", path, error->message);
    else if (dom->autostart)
        g_ptr_array_add(drv->autostart, vsnap_domain_ref(dom));
}

bool driver_load(struct vsnap_driver *drv, GError **error)
{
    g_autofree char *dir_path = g_build_filename(drv->paths.state_dir, "domains", NULL);
    g_autoptr(GError) local = NULL;
    g_autoptr(GDir) dir = g_dir_open(dir_path, 0, &local);
    if (!dir) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "%s", local->message);
        return false;
    }
    const char *name;
    while ((name = g_dir_read_name(dir))) {
        if (!g_str_has_suffix(name, ".xml"))
            continue;
        g_autofree char *path = g_build_filename(dir_path, name, NULL);
        load_config(drv, path);
    }
    process_reattach_all(drv);
    /* What a daemon that died in the middle of a job left behind. */
    recovery_at_start(drv);
    g_autoptr(GPtrArray) doms = domain_list_snapshot(drv->domains);
    for (guint i = 0; i < doms->len; i++)
        snapshot_queue_pushes(drv, doms->pdata[i]);
    return true;
}

static bool start_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                         GError **error);

/* The set comes from driver_load, before any client was served: a pass that
 * took the list when its thread got to run could find a domain a client had
 * just defined and marked, start it, and so keep it alive (as a running
 * transient domain) past the undefine that client sent next. */
void driver_autostart(struct vsnap_driver *drv)
{
    for (guint i = 0; i < drv->autostart->len; i++) {
        struct vsnap_domain *dom = drv->autostart->pdata[i];
        g_autoptr(GError) error = NULL;
        /* Clients are served meanwhile: one may hold the job (a revert
         * pulling from a store), and autostart does not wait for it; one
         * may have undefined the domain (no job then, and nothing to say). */
        if (!domain_job_acquire(dom, "autostart", &error)) {
            if (!g_error_matches(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN))
                g_warning("autostart of %s skipped: %s", dom->name, error->message);
            continue;
        }
        g_mutex_lock(&dom->lock);
        bool wanted = dom->autostart && !dom->run;
        g_mutex_unlock(&dom->lock);
        if (wanted && !start_locked(drv, dom, 0, &error))
            g_warning("autostart of %s failed: %s", dom->name, error->message);
        domain_job_release(dom);
    }
    g_ptr_array_set_size(drv->autostart, 0);
}

unsigned driver_active_count(struct vsnap_driver *drv)
{
    g_autoptr(GPtrArray) doms = domain_list_snapshot(drv->domains);
    unsigned n = 0;
    for (guint i = 0; i < doms->len; i++)
        n += vsnap_domain_is_active(doms->pdata[i]);
    return n;
}

/* ---- lookups ---- */

struct vsnap_domain *driver_lookup_uuid(struct vsnap_driver *drv, const unsigned char *uuid,
                                        const char *name_hint, GError **error)
{
    struct vsnap_domain *dom = domain_list_find_uuid(drv->domains, uuid);
    if (!dom) {
        char text[37];
        uuid_format(uuid, text);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN,
                    "no domain with matching uuid '%s'%s%s%s", text, name_hint ? " (" : "",
                    name_hint ? name_hint : "", name_hint ? ")" : "");
    }
    return dom;
}

struct vsnap_domain *driver_lookup_name(struct vsnap_driver *drv, const char *name,
                                        GError **error)
{
    struct vsnap_domain *dom = domain_list_find_name(drv->domains, name);
    if (!dom)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN,
                    "no domain with matching name '%s'", name);
    return dom;
}

struct vsnap_domain *driver_lookup_id(struct vsnap_driver *drv, int id, GError **error)
{
    struct vsnap_domain *dom = domain_list_find_id(drv->domains, id);
    if (!dom)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN, "no domain with matching id %d",
                    id);
    return dom;
}

void domain_summary_clear(struct domain_summary *s)
{
    g_clear_pointer(&s->name, g_free);
    g_clear_pointer(&s->os_type, g_free);
}

void driver_summary(struct vsnap_driver *drv, struct vsnap_domain *dom,
                    struct domain_summary *out)
{
    g_mutex_lock(&dom->lock);
    out->name = g_strdup(dom->name);
    memcpy(out->uuid, dom->uuid, 16);
    out->id = dom->id;
    out->state = dom->state;
    out->reason = dom->reason;
    out->persistent = dom->persistent;
    out->autostart = dom->autostart;
    out->ready = dom->run && dom->run->ready;
    out->max_mem_kib = dom->def->memory_kib;
    out->cur_mem_kib = dom->def->current_memory_kib;
    out->vcpus = dom->def->vcpus;
    out->generation = dom->generation;
    out->os_type = g_strdup(dom->def->os_type ? dom->def->os_type : "hvm");
    pid_t pid = dom->run ? dom->run->pid : -1;
    g_mutex_unlock(&dom->lock);
    out->cpu_time_ns = pid > 0 ? process_cpu_time_ns(pid) : 0;
}

/* Metadata that cannot be read is no proof that there are none. */
static bool has_snapshots(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    g_autoptr(GError) error = NULL;
    int count = snapshot_count(drv, dom, &error);
    if (count < 0)
        g_warning("domain %s: %s", dom->name, error->message);
    return count != 0;
}

static bool list_filter_match(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags)
{
    g_mutex_lock(&dom->lock);
    bool active = dom->run != NULL;
    bool persistent = dom->persistent, autostart = dom->autostart;
    int state = dom->state;
    g_mutex_unlock(&dom->lock);
#define EITHER(yes, no, value)                                                                   \
    (!(flags & ((yes) | (no))) || ((flags & (yes)) && (value)) || ((flags & (no)) && !(value)))
    bool other = state != VIR_DOMAIN_RUNNING && state != VIR_DOMAIN_PAUSED &&
                 state != VIR_DOMAIN_SHUTOFF;
    unsigned state_flags = VIR_CONNECT_LIST_DOMAINS_RUNNING | VIR_CONNECT_LIST_DOMAINS_PAUSED |
                           VIR_CONNECT_LIST_DOMAINS_SHUTOFF | VIR_CONNECT_LIST_DOMAINS_OTHER;
    bool state_ok = !(flags & state_flags) ||
                    ((flags & VIR_CONNECT_LIST_DOMAINS_RUNNING) && state == VIR_DOMAIN_RUNNING) ||
                    ((flags & VIR_CONNECT_LIST_DOMAINS_PAUSED) && state == VIR_DOMAIN_PAUSED) ||
                    ((flags & VIR_CONNECT_LIST_DOMAINS_SHUTOFF) && state == VIR_DOMAIN_SHUTOFF) ||
                    ((flags & VIR_CONNECT_LIST_DOMAINS_OTHER) && other);
    return state_ok &&
           EITHER(VIR_CONNECT_LIST_DOMAINS_ACTIVE, VIR_CONNECT_LIST_DOMAINS_INACTIVE, active) &&
           EITHER(VIR_CONNECT_LIST_DOMAINS_PERSISTENT, VIR_CONNECT_LIST_DOMAINS_TRANSIENT,
                  persistent) &&
           EITHER(VIR_CONNECT_LIST_DOMAINS_AUTOSTART, VIR_CONNECT_LIST_DOMAINS_NO_AUTOSTART,
                  autostart) &&
           EITHER(VIR_CONNECT_LIST_DOMAINS_MANAGEDSAVE, VIR_CONNECT_LIST_DOMAINS_NO_MANAGEDSAVE,
                  save_has_managed(drv, dom)) &&
           EITHER(VIR_CONNECT_LIST_DOMAINS_HAS_SNAPSHOT, VIR_CONNECT_LIST_DOMAINS_NO_SNAPSHOT,
                  has_snapshots(drv, dom)) &&
           !(flags & VIR_CONNECT_LIST_DOMAINS_HAS_CHECKPOINT);
#undef EITHER
}

GPtrArray *driver_list(struct vsnap_driver *drv, unsigned flags)
{
    GPtrArray *doms = domain_list_snapshot(drv->domains);
    for (guint i = doms->len; i-- > 0;)
        if (!list_filter_match(drv, doms->pdata[i], flags))
            g_ptr_array_remove_index(doms, i);
    return doms;
}

/* ---- definitions ---- */

static bool check_flags(unsigned flags, unsigned allowed, GError **error)
{
    if (flags & ~allowed) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)",
                    flags & ~allowed);
        return false;
    }
    return true;
}

/* Same uuid must mean same name and the other way round. */
static bool check_identity(struct vsnap_driver *drv, const struct domain_def *def,
                           struct vsnap_domain **existing, GError **error)
{
    char uuid[37];
    uuid_format(def->uuid, uuid);
    g_autoptr(vsnap_domain) by_uuid = domain_list_find_uuid(drv->domains, def->uuid);
    g_autoptr(vsnap_domain) by_name = domain_list_find_name(drv->domains, def->name);
    if (by_uuid && !g_str_equal(by_uuid->name, def->name)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "domain '%s' already exists with uuid %s", by_uuid->name, uuid);
        return false;
    }
    if (by_name && !by_uuid && memcmp(by_name->uuid, def->uuid, 16) == 0)
        by_uuid = g_steal_pointer(&by_name);   /* defined between the two look-ups */
    if (by_name && !by_uuid) {
        char other[37];
        uuid_format(by_name->uuid, other);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "domain '%s' already exists with uuid %s", def->name, other);
        return false;
    }
    *existing = g_steal_pointer(&by_uuid);
    return true;
}

/* Define and create check what exists, then change it; a concurrent
 * define, create or undefine of the same domain may come between. They then
 * look again, this many times at most. */
#define IDENTITY_ATTEMPTS 16

static bool too_many_attempts(const struct domain_def *def, GError **error)
{
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                "domain '%s' kept changing under concurrent definitions; try again", def->name);
    return false;
}

/* The job of a domain found by check_identity; *again (and no error) when
 * it ended while we waited: the caller looks again. */
static bool job_or_again(struct vsnap_domain *dom, const char *what, bool *again,
                         GError **error)
{
    g_autoptr(GError) local = NULL;
    *again = false;
    if (domain_job_acquire(dom, what, &local))
        return true;
    *again = g_error_matches(local, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN);
    if (!*again)
        g_propagate_error(error, g_steal_pointer(&local));
    return false;
}

/* A definition for a domain that exists (same name and uuid). Takes def,
 * unless the domain was undefined meanwhile: then *again, and def is not
 * taken. */
static struct vsnap_domain *redefine(struct vsnap_driver *drv, struct vsnap_domain *dom,
                                     struct domain_def *def, bool *again, GError **error)
{
    if (!job_or_again(dom, "define", again, error)) {
        if (!*again)
            domain_def_free(def);
        return NULL;
    }
    if (!driver_save_config(drv, def, error)) {
        domain_job_release(dom);
        domain_def_free(def);
        return NULL;
    }
    g_mutex_lock(&dom->lock);
    if (dom->run) {
        domain_def_free(dom->next_def);
        dom->next_def = def;     /* the running VM keeps its definition */
    } else {
        domain_def_free(dom->def);
        dom->def = def;
    }
    dom->persistent = true;
    event_queue_lifecycle(drv->events, dom, VIR_DOMAIN_EVENT_DEFINED,
                          VIR_DOMAIN_EVENT_DEFINED_UPDATED);
    g_mutex_unlock(&dom->lock);
    domain_job_release(dom);
    return vsnap_domain_ref(dom);
}

/* A new domain object for def, listed with its job lock held (returned
 * locked), so that whoever finds it next waits until the caller is done.
 * NULL with *again when another client listed the name or uuid first: def is
 * then not taken. */
static struct vsnap_domain *list_new_locked(struct vsnap_driver *drv, struct domain_def *def,
                                            bool persistent, const char *what, bool *again)
{
    struct vsnap_domain *dom = vsnap_domain_new(def);
    dom->persistent = persistent;
    /* Nobody else sees the new object yet: its job is free. */
    if (!domain_job_acquire_unlisted(dom, what))
        g_assert_not_reached();
    *again = !domain_list_add(drv->domains, dom, NULL);
    if (*again) {
        domain_job_release(dom);
        dom->def = NULL;   /* not ours to free */
        vsnap_domain_unref(dom);
        return NULL;
    }
    return dom;
}

/* Takes def unless *again (see list_new_locked). */
static struct vsnap_domain *define_new(struct vsnap_driver *drv, struct domain_def *def,
                                       bool *again, GError **error)
{
    struct vsnap_domain *dom = list_new_locked(drv, def, true, "define", again);
    if (!dom)
        return NULL;
    bool saved = driver_save_config(drv, dom->def, error);
    if (saved) {
        g_mutex_lock(&dom->lock);
        event_queue_lifecycle(drv->events, dom, VIR_DOMAIN_EVENT_DEFINED,
                              VIR_DOMAIN_EVENT_DEFINED_ADDED);
        g_mutex_unlock(&dom->lock);
    } else {
        domain_list_remove(drv->domains, dom);
    }
    domain_job_release(dom);
    if (!saved)
        g_clear_pointer(&dom, vsnap_domain_unref);
    return dom;
}

struct vsnap_domain *driver_define_xml(struct vsnap_driver *drv, const char *xml,
                                       unsigned flags, GError **error)
{
    if (!check_flags(flags, VIR_DOMAIN_DEFINE_VALIDATE, error))
        return NULL;
    struct domain_def *def = domain_def_parse_string(xml, drv->paths.schema_dir, error);
    if (!def || !clone_check_definition(drv, def, error)) {
        domain_def_free(def);
        return NULL;
    }
    for (unsigned attempt = 0; attempt < IDENTITY_ATTEMPTS; attempt++) {
        g_autoptr(vsnap_domain) existing = NULL;
        if (!check_identity(drv, def, &existing, error))
            break;
        bool again = false;
        struct vsnap_domain *dom = existing ? redefine(drv, existing, def, &again, error)
                                            : define_new(drv, def, &again, error);
        if (!again)
            return dom;
    }
    if (error && !*error)
        too_many_attempts(def, error);
    domain_def_free(def);
    return NULL;
}

bool driver_undefine(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                     GError **error)
{
    /* Managed save images and snapshots are refused or removed below, as
     * the flags say; vsnap domains have no NVRAM and no checkpoints, so
     * those flags have nothing to act on. */
    unsigned allowed = VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
                       VIR_DOMAIN_UNDEFINE_NVRAM | VIR_DOMAIN_UNDEFINE_KEEP_NVRAM |
                       VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA;
    if (!check_flags(flags, allowed, error) || !domain_job_acquire(dom, "undefine", error))
        return false;
    bool inactive = !vsnap_domain_is_active(dom);
    /* A running one's snapshots go when it stops, transient. */
    if (!inactive && snapshot_has_clones(drv, dom, error)) {
        domain_job_release(dom);
        return false;
    }
    if (inactive && (!snapshot_check_undefine(drv, dom, flags, error) ||
                     !save_check_undefine(drv, dom, flags, error))) {
        domain_job_release(dom);
        return false;
    }
    g_mutex_lock(&dom->lock);
    if (!dom->persistent) {
        g_mutex_unlock(&dom->lock);
        domain_job_release(dom);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "cannot undefine transient domain '%s'", dom->name);
        return false;
    }
    /* Its disks become their images again before the snapshots holding
     * their layers go; a fold that fails leaves the domain defined. */
    g_autofree char *disk_dir = disk_state_dir(drv->paths.state_dir, dom->name);
    g_autoptr(domain_def) disks = inactive ? domain_def_copy(dom->def) : NULL;
    g_mutex_unlock(&dom->lock);
    bool released = !inactive || disk_state_release(disk_dir, disks, error);
    g_mutex_lock(&dom->lock);
    if (!released) {
        g_mutex_unlock(&dom->lock);
        domain_job_release(dom);
        g_prefix_error(error, "cannot undefine %s: ", dom->name);
        return false;
    }
    delete_config(drv, dom->name);
    if (inactive && (flags & VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)) {
        /* It waits for the domain's push under way, which talks to the
         * store: dom->lock (which every reader of the domain takes, virsh
         * list among them) is not held across it; dom->job keeps other jobs
         * out meanwhile. */
        g_mutex_unlock(&dom->lock);
        snapshot_remove_all(drv, dom);
        g_mutex_lock(&dom->lock);
    }
    dom->persistent = false;
    dom->autostart = false;
    g_clear_pointer(&dom->next_def, domain_def_free);
    bool active = dom->run != NULL;
    event_queue_lifecycle(drv->events, dom, VIR_DOMAIN_EVENT_UNDEFINED,
                          VIR_DOMAIN_EVENT_UNDEFINED_REMOVED);
    g_mutex_unlock(&dom->lock);
    if (!active)
        domain_list_remove(drv->domains, dom);   /* a running one goes when it stops */
    domain_job_release(dom);
    return true;
}

char *driver_get_xml(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                     GError **error)
{
    if (!check_flags(flags, VIR_DOMAIN_XML_SECURE | VIR_DOMAIN_XML_INACTIVE |
                                VIR_DOMAIN_XML_UPDATE_CPU | VIR_DOMAIN_XML_MIGRATABLE,
                     error))
        return NULL;
    g_mutex_lock(&dom->lock);
    char *xml;
    if (flags & VIR_DOMAIN_XML_INACTIVE)
        xml = domain_def_format(dom->next_def ? dom->next_def : dom->def, false, -1);
    else
        xml = domain_def_format(dom->def, dom->run != NULL, dom->id);
    g_mutex_unlock(&dom->lock);
    return xml;
}

/* ---- lifecycle ---- */

static int current_state(struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    int state = dom->run ? dom->state : VIR_DOMAIN_SHUTOFF;
    g_mutex_unlock(&dom->lock);
    return state;
}

static bool require_active(struct vsnap_domain *dom, GError **error)
{
    if (current_state(dom) != VIR_DOMAIN_SHUTOFF)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
    return false;
}

static char *api_socket_of(struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    char *path = dom->run ? g_strdup(dom->run->api_socket) : NULL;
    g_mutex_unlock(&dom->lock);
    return path;
}

bool driver_ondemand_stats(struct vsnap_driver *drv, struct vsnap_domain *dom, struct monitor_ondemand *out)
{
    (void)drv;
    g_autofree char *api_socket = api_socket_of(dom);
    return api_socket && monitor_vm_ondemand(api_socket, out, NULL);
}

/* process_set_state_locked under the domain lock. */
static void set_state(struct vsnap_driver *drv, struct vsnap_domain *dom, int state, int reason,
                      int event, int detail)
{
    g_mutex_lock(&dom->lock);
    process_set_state_locked(drv, dom, state, reason, event, detail);
    g_mutex_unlock(&dom->lock);
}

static bool pause_after_start(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    g_autofree char *api = api_socket_of(dom);
    if (!api)
        return false;
    if (!monitor_vm_pause(api, error)) {
        process_kill_if_stuck(dom, error ? *error : NULL);
        return false;
    }
    set_state(drv, dom, VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_USER, VIR_DOMAIN_EVENT_SUSPENDED,
              VIR_DOMAIN_EVENT_SUSPENDED_PAUSED);
    return true;
}

static bool start_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                         GError **error)
{
    if (current_state(dom) != VIR_DOMAIN_SHUTOFF) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "domain is already running");
        return false;
    }
    /* A managed save image, when there is one, is where the domain resumes. */
    bool restored = false;
    if (!save_start_managed(drv, dom, flags, &restored, error))
        return false;
    if (restored)
        return true;
    /* A clone starts from its own snapshot or its origin's, never boots. */
    bool paused = flags & VIR_DOMAIN_START_PAUSED;
    if (!clone_start(drv, dom, paused, &restored, error))
        return false;
    if (restored)
        return true;
    if (!process_start(drv, dom, error))
        return false;
    return !(flags & VIR_DOMAIN_START_PAUSED) || pause_after_start(drv, dom, error);
}

bool driver_start(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                  GError **error)
{
    if (!check_flags(flags, VIR_DOMAIN_START_PAUSED | VIR_DOMAIN_START_BYPASS_CACHE |
                                VIR_DOMAIN_START_FORCE_BOOT,
                     error))
        return false;
    if (!domain_job_acquire(dom, "start", error))
        return false;
    bool ok = start_locked(drv, dom, flags, error);
    domain_job_release(dom);
    return ok;
}

/* create of a defined domain (same name and uuid; check_identity refused
 * the rest), as libvirt's QEMU driver does it: when it is not running, def
 * runs as its live definition and the persistent one applies again at the
 * next start. Takes def, unless the domain was undefined meanwhile: then
 * *again, and def is not taken. */
static bool create_defined(struct vsnap_driver *drv, struct vsnap_domain *dom,
                           struct domain_def *def, unsigned flags, bool *again, GError **error)
{
    if (!job_or_again(dom, "create", again, error)) {
        if (!*again)
            domain_def_free(def);
        return false;
    }
    if (vsnap_domain_is_active(dom)) {
        domain_job_release(dom);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "domain '%s' is already active", dom->name);
        domain_def_free(def);
        return false;
    }
    /* Inactive: next_def is empty (a stop moves it into def). */
    g_mutex_lock(&dom->lock);
    dom->next_def = dom->def;
    dom->def = def;
    g_mutex_unlock(&dom->lock);
    bool from_clone = false;
    if (!clone_start(drv, dom, flags & VIR_DOMAIN_START_PAUSED, &from_clone, error) ||
        (!from_clone && !process_start(drv, dom, error))) {
        g_mutex_lock(&dom->lock);
        domain_def_free(dom->def);
        dom->def = g_steal_pointer(&dom->next_def);
        g_mutex_unlock(&dom->lock);
        domain_job_release(dom);
        return false;
    }
    bool ok = from_clone || !(flags & VIR_DOMAIN_START_PAUSED) || pause_after_start(drv, dom, error);
    domain_job_release(dom);
    return ok;
}

/* A new transient domain, started. Takes def unless *again (see
 * list_new_locked). */
static struct vsnap_domain *create_new(struct vsnap_driver *drv, struct domain_def *def,
                                       unsigned flags, bool *again, GError **error)
{
    struct vsnap_domain *dom = list_new_locked(drv, def, false, "create", again);
    if (!dom)
        return NULL;
    bool ok = start_locked(drv, dom, flags, error);
    if (!ok)
        domain_list_remove(drv->domains, dom);
    domain_job_release(dom);
    if (!ok)
        g_clear_pointer(&dom, vsnap_domain_unref);
    return dom;
}

struct vsnap_domain *driver_create_xml(struct vsnap_driver *drv, const char *xml,
                                       unsigned flags, GError **error)
{
    if (!check_flags(flags, VIR_DOMAIN_START_PAUSED | VIR_DOMAIN_START_VALIDATE, error))
        return NULL;
    struct domain_def *def = domain_def_parse_string(xml, drv->paths.schema_dir, error);
    if (!def || !clone_check_definition(drv, def, error)) {
        domain_def_free(def);
        return NULL;
    }
    flags &= VIR_DOMAIN_START_PAUSED;
    for (unsigned attempt = 0; attempt < IDENTITY_ATTEMPTS; attempt++) {
        g_autoptr(vsnap_domain) existing = NULL;
        if (!check_identity(drv, def, &existing, error))
            break;
        bool again = false;
        if (existing && create_defined(drv, existing, def, flags, &again, error))
            return vsnap_domain_ref(existing);
        struct vsnap_domain *dom = existing ? NULL : create_new(drv, def, flags, &again, error);
        if (!again)
            return dom;
    }
    if (error && !*error)
        too_many_attempts(def, error);
    domain_def_free(def);
    return NULL;
}

/* A transient domain stopped: it ceases to exist (vsnap_driver.end_transient).
 * Its files go before it leaves the list: until then a create of the same
 * name waits for this job (or is refused), so it never finds them, nor has
 * its own removed. A chain that cannot be folded keeps the snapshots that
 * hold its layers. */
static void end_transient(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    /* Clones run on its snapshots and its image: those stay, with its
     * disk record (an origin defined again under its name finds them). */
    g_autoptr(GError) clones = NULL;
    if (snapshot_has_clones(drv, dom, &clones))
        g_warning("%s", clones->message);
    else if (process_release_disks(drv, dom))
        snapshot_remove_all(drv, dom);
    domain_list_remove(drv->domains, dom);
}

/* After a stop: a transient domain ceases to exist. */
static void forget_if_transient(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    bool transient = !dom->persistent;
    g_mutex_unlock(&dom->lock);
    if (transient)
        end_transient(drv, dom);
}

bool driver_destroy(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                    GError **error)
{
    if (!check_flags(flags, VIR_DOMAIN_DESTROY_GRACEFUL, error))
        return false;
    /* A revert importing a snapshot from the store holds the job for as
     * long as the transfer takes: its import stops first (the revert then
     * fails and leaves the domain as it was, starting nothing), so the
     * destroy does not wait for the transfer. A revert past its import
     * finishes first and its VM is the one destroyed. */
    char uuid[37];
    uuid_format(dom->uuid, uuid);
    if (vsnap_domain_is_active(dom))
        pull_job_cancel(drv->pulls, uuid, "canceled: the domain was destroyed");
    if (!domain_job_acquire(dom, "destroy", error))
        return false;
    bool ok = require_active(dom, error) &&
              process_stop(drv, dom, VIR_DOMAIN_SHUTOFF_DESTROYED,
                           flags & VIR_DOMAIN_DESTROY_GRACEFUL, error);
    if (ok) {
        g_mutex_lock(&dom->lock);
        event_queue_lifecycle(drv->events, dom, VIR_DOMAIN_EVENT_STOPPED,
                              VIR_DOMAIN_EVENT_STOPPED_DESTROYED);
        g_mutex_unlock(&dom->lock);
        forget_if_transient(drv, dom);
    }
    domain_job_release(dom);
    return ok;
}

static const char *job_name(int operation)
{
    switch (operation) {
    case VIR_DOMAIN_JOB_OPERATION_SNAPSHOT: return "snapshot";
    case VIR_DOMAIN_JOB_OPERATION_SAVE: return "save";
    case VIR_DOMAIN_JOB_OPERATION_DUMP: return "dump";
    default: return "current";
    }
}

bool driver_abort_job(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                      GError **error)
{
    if (flags & VIR_DOMAIN_ABORT_JOB_POSTCOPY) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "current job is not outgoing migration in post-copy mode (vsnap domains "
                    "do not migrate)");
        return false;
    }
    if (!check_flags(flags, 0, error))
        return false;
    /* Not under dom->job: the job to stop holds it. The same job
     * domjobinfo shows: the domain's own (a snapshot or save in the VMM),
     * else a revert's import, else a background push. */
    struct domain_job job = {0};
    if (domain_job_get(dom, &job)) {
        int operation = job.operation;
        domain_job_clear(&job);
        if (operation != VIR_DOMAIN_JOB_OPERATION_DUMP) /* a snapshot or a save: cancelled in steps */
            return domain_job_cancel(dom, error);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "cannot abort the %s job of %s: it runs in the VMM and ends on its own "
                    "(virsh destroy stops the domain)", job_name(operation), dom->name);
        return false;
    }
    char uuid[37];
    uuid_format(dom->uuid, uuid);
    if (pull_job_cancel(drv->pulls, uuid, "canceled by client") ||
        push_cancel(drv->pushes, uuid))
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                "no job is active on the domain");
    return false;
}

/* Run one shim action that needs the domain in `needed` state. */
static bool simple_action(struct vsnap_domain *dom, int needed, const char *not_in_state,
                          bool (*action)(const char *, GError **), GError **error)
{
    if (!require_active(dom, error))
        return false;
    if (current_state(dom) != needed) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "%s", not_in_state);
        return false;
    }
    g_autofree char *api = api_socket_of(dom);
    if (!api)
        return false;
    if (!action(api, error)) {
        process_kill_if_stuck(dom, error ? *error : NULL);
        return false;
    }
    return true;
}

bool driver_shutdown(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                     GError **error)
{
    if (flags & ~VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_ARGUMENT_UNSUPPORTED,
                    "vsnap shuts domains down only with the ACPI power button (flags 0x%x)",
                    flags);
        return false;
    }
    /* The guest powers off in its own time; the watcher reports it. */
    if (!domain_job_acquire(dom, "shutdown", error))
        return false;
    bool ok = simple_action(dom, VIR_DOMAIN_RUNNING, "domain is paused; resume it first",
                            monitor_vm_power_button, error);
    domain_job_release(dom);
    return ok;
}

bool driver_reboot(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                   GError **error)
{
    if (flags & ~(VIR_DOMAIN_REBOOT_DEFAULT | VIR_DOMAIN_REBOOT_ACPI_POWER_BTN)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_ARGUMENT_UNSUPPORTED,
                    "unsupported reboot method (flags 0x%x)", flags);
        return false;
    }
    if (!domain_job_acquire(dom, "reboot", error))
        return false;
    bool ok = simple_action(dom, VIR_DOMAIN_RUNNING, "domain is paused; resume it first",
                            monitor_vm_reboot, error);
    domain_job_release(dom);
    return ok;
}

bool driver_suspend(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    if (!domain_job_acquire(dom, "suspend", error))
        return false;
    bool ok = require_active(dom, error);
    /* As libvirt: suspending a paused domain is not an error. */
    if (ok && current_state(dom) != VIR_DOMAIN_PAUSED) {
        ok = simple_action(dom, VIR_DOMAIN_RUNNING, "domain is not running", monitor_vm_pause,
                           error);
        if (ok)
            set_state(drv, dom, VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_USER,
                      VIR_DOMAIN_EVENT_SUSPENDED, VIR_DOMAIN_EVENT_SUSPENDED_PAUSED);
    }
    domain_job_release(dom);
    return ok;
}

bool driver_resume(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    if (!domain_job_acquire(dom, "resume", error))
        return false;
    bool ok = simple_action(dom, VIR_DOMAIN_PAUSED, "domain is not paused", monitor_vm_resume,
                            error);
    if (ok)
        set_state(drv, dom, VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_UNPAUSED,
                  VIR_DOMAIN_EVENT_RESUMED, VIR_DOMAIN_EVENT_RESUMED_UNPAUSED);
    domain_job_release(dom);
    return ok;
}

bool driver_set_autostart(struct vsnap_driver *drv, struct vsnap_domain *dom, bool autostart,
                          GError **error)
{
    if (!domain_job_acquire(dom, "autostart", error))
        return false;
    g_mutex_lock(&dom->lock);
    bool persistent = dom->persistent;
    g_mutex_unlock(&dom->lock);
    bool ok = persistent;
    if (!persistent)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "cannot set autostart for transient domain");
    else
        ok = set_autostart_mark(drv, dom->name, autostart, error);
    if (ok) {
        g_mutex_lock(&dom->lock);
        dom->autostart = autostart;
        g_mutex_unlock(&dom->lock);
    }
    domain_job_release(dom);
    return ok;
}

/* The serial's pty, opened as a console's end: raw, so the guest gets every
 * key; without becoming the daemon's controlling terminal; non-blocking, so a
 * guest that stops reading never stalls the daemon (stream.c waits briefly,
 * then drops input, as a UART without flow control would). What the guest
 * wrote while no console was open is discarded, as QEMU discards a pty's
 * output while nobody has it open: the console starts at the present. */
static int open_console_pty(const char *path, GError **error)
{
    int fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    struct termios t;
    if (fd < 0 || tcgetattr(fd, &t) < 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR,
                    "cannot open the serial console's pty %s: %s", path, g_strerror(err));
        return -1;
    }
    cfmakeraw(&t);
    tcsetattr(fd, TCSANOW, &t);
    tcflush(fd, TCIFLUSH);
    return fd;
}

int driver_console_connect(struct vsnap_driver *drv, struct vsnap_domain *dom,
                           const char *dev_name, GError **error)
{
    if (dev_name && !g_str_equal(dev_name, "serial0") && !g_str_equal(dev_name, "console0")) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR,
                    "cannot find character device %s (vsnap domains have serial0/console0)",
                    dev_name);
        return -1;
    }
    g_mutex_lock(&dom->lock);
    bool active = dom->run != NULL;
    enum domain_chr_type type = dom->def->serial.type;
    g_autofree char *pty = type == DOMAIN_CHR_PTY ? g_strdup(dom->def->serial.path) : NULL;
    g_mutex_unlock(&dom->lock);
    if (!active) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return -1;
    }
    if (type == DOMAIN_CHR_FILE) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "character device serial0 of domain '%s' is not using a PTY (its serial "
                    "port writes to a file)", dom->name);
        return -1;
    }
    if (!pty) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "domain '%s' has no serial console (add <serial type='pty'/>)", dom->name);
        return -1;
    }
    return open_console_pty(pty, error);
}

char *driver_capabilities(struct vsnap_driver *drv, GError **error)
{
    return capabilities_get_xml(drv->paths.shim_path, error);
}

char *driver_domain_capabilities(struct vsnap_driver *drv, const char *emulatorbin,
                                 const char *arch, const char *machine, const char *virttype,
                                 GError **error)
{
    return domain_capabilities_format(drv->paths.shim_path, emulatorbin, arch, machine, virttype,
                                      error);
}
