#include "persist/save.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <libvirt/libvirt.h>
#include <string.h>

#include "util/caller.h"
#include "domain/disk-state.h"
#include "domain/events.h"
#include "run/jail.h"
#include "persist/job.h"
#include "lineage.h"
#include "managed-image.h"
#include "monitor/monitor.h"
#include "run/process.h"
#include "persist/pull-job.h"
#include "persist/push.h"
#include "restore.h"
#include "domain/save-area.h"
#include "persist/save-image.h"
#include "snapshot-dir.h"
#include "snapshot-vm.h"
#include "util/test-hook.h"
#include "util/virt-error.h"

static bool refuse(GError **error, int code, const char *text)
{
    g_set_error_literal(error, VSNAP_VIR_ERROR, code, text);
    return false;
}

static bool check_flags(unsigned flags, unsigned allowed, GError **error)
{
    if (flags & VIR_DOMAIN_SAVE_RESET_NVRAM)
        return refuse(error, VIR_ERR_ARGUMENT_UNSUPPORTED, "vsnap domains have no NVRAM");
    if (flags & ~allowed) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)",
                    flags & ~allowed);
        return false;
    }
    if ((flags & VIR_DOMAIN_SAVE_RUNNING) && (flags & VIR_DOMAIN_SAVE_PAUSED))
        return refuse(error, VIR_ERR_INVALID_ARG,
                      "flags 'running' and 'paused' in one call are mutually exclusive");
    return true;
}

static bool create_dir(const char *dir, GError **error)
{
    if (g_mkdir_with_parents(dir, 0700) == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create %s: %s", dir,
                g_strerror(errno));
    return false;
}

/* A fresh directory for transient work (packing, unpacking) in the save
 * area of the domain named name: the only one its shim's jail holds. */
static char *work_dir(struct vsnap_driver *drv, const char *name, GError **error)
{
    g_autofree char *dir = save_area_new_work_dir(drv->paths.state_dir, name);
    return create_dir(dir, error) ? g_steal_pointer(&dir) : NULL;
}

/* With the partial directories of a shim that died while writing into it. */
static void remove_dir(const char *dir)
{
    g_autoptr(GError) error = NULL;
    if (dir && !snapdir_remove_with_partials(dir, &error))
        g_warning("%s", error->message);
}

/* The definition to store: dxml when given (same domain), else the live one. */
static char *definition_to_save(struct vsnap_driver *drv, struct vsnap_domain *dom,
                                const char *dxml, GError **error)
{
    if (!dxml) {
        g_mutex_lock(&dom->lock);
        char *xml = domain_def_format(dom->def, false, -1);
        g_mutex_unlock(&dom->lock);
        return xml;
    }
    g_autoptr(domain_def) def = domain_def_parse_string(dxml, drv->paths.schema_dir, error);
    if (!def)
        return NULL;
    if (memcmp(def->uuid, dom->uuid, 16) != 0 || !g_str_equal(def->name, dom->name)) {
        refuse(error, VIR_ERR_INVALID_ARG,
               "the XML given for the save image describes another domain (name or uuid)");
        return NULL;
    }
    g_mutex_lock(&dom->lock);
    bool same = domain_def_check_same_disks(dom->def, def, error);
    g_mutex_unlock(&dom->lock);
    return same ? domain_def_format(def, false, -1) : NULL;
}

/* ---- disks: a save's snapshot files stay while the disks run on them ---- */

/* A save seals each writable disk's overlay into a disk layer beside the
 * memory layer, and the disks go on from there (the stopped domain's next
 * boot, the restore): those snapshot files live in the domain's disk
 * directory (disk-state.h), not in a transient work directory. */
static bool has_writable_disk(const struct domain_def *def)
{
    for (size_t i = 0; i < def->n_disks; i++)
        if (!def->disks[i].readonly)
            return true;
    return false;
}

static bool domain_has_writable_disk(struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    bool has = has_writable_disk(dom->def);
    g_mutex_unlock(&dom->lock);
    return has;
}

/* A saved-* directory and the files in it belong to the confined shims'
 * user: a shim reopens its disks' chains (their layers in here) after each
 * snapshot, long after it gave up root. */
static bool give_saved_dir(struct vsnap_driver *drv, const char *dir, GError **error)
{
    if (!jail_give_dir(drv, dir, error))
        return false;
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *entry;
    while (d && (entry = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, entry, NULL);
        if (!jail_give_dir(drv, path, error))
            return false;
    }
    return true;
}

/* A new saved-* directory in dom's disk directory (created). */
static char *saved_dir(struct vsnap_driver *drv, const char *name, GError **error)
{
    g_autofree char *disks = disk_state_dir(drv->paths.state_dir, name);
    g_autofree char *dir = disk_state_new_saved_dir(disks);
    return create_dir(dir, error) && give_saved_dir(drv, dir, error) ? g_steal_pointer(&dir) : NULL;
}

/* The recorded chains of dom (shut off, or about to be) with the paths
 * under from moved to to. */
static bool relocate_record(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *from, const char *to,
                            GError **error)
{
    g_autofree char *disks = disk_state_dir(drv->paths.state_dir, dom->name);
    g_mutex_lock(&dom->lock);
    g_autoptr(domain_def) def = domain_def_copy(dom->def);
    g_mutex_unlock(&dom->lock);
    return disk_state_load(disks, def, error) && disk_state_relocate(disks, def, from, to, error);
}

/* Move a managed save image's files (dir) into the disk directory, where
 * the disks' chains keep what they use of them, and record the new place.
 * Returns the new directory. */
static char *keep_managed_files(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *dir,
                                GError **error)
{
    g_autofree char *disks = disk_state_dir(drv->paths.state_dir, dom->name);
    g_autofree char *kept = disk_state_new_saved_dir(disks);
    if (!disk_state_make_dir(disks, error))
        return NULL;
    if (g_rename(dir, kept) != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot rename %s to %s: %s", dir, kept,
                    g_strerror(errno));
        return NULL;
    }
    if (!give_saved_dir(drv, kept, error) || !relocate_record(drv, dom, dir, kept, error)) {
        (void)g_rename(kept, dir);
        return NULL;
    }
    return g_steal_pointer(&kept);
}

/* ---- pausing for a save, and undoing it ---- */

static bool pause_for_save(struct vsnap_driver *drv, struct vsnap_domain *dom, bool *was_running,
                           GError **error)
{
    g_mutex_lock(&dom->lock);
    bool active = dom->run != NULL;
    *was_running = active && dom->state == VIR_DOMAIN_RUNNING;
    char *api = active ? g_strdup(dom->run->api_socket) : NULL;
    g_mutex_unlock(&dom->lock);
    g_autofree char *api_owned = api;
    if (!active)
        return refuse(error, VIR_ERR_OPERATION_INVALID, "domain is not running");
    if (*was_running && !monitor_vm_pause(api, error)) {
        process_kill_if_stuck(dom, error ? *error : NULL);
        return false;
    }
    g_mutex_lock(&dom->lock);
    vsnap_domain_set_state_locked(dom, VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_SAVE);
    g_mutex_unlock(&dom->lock);
    return true;
}

static void cancel_save(struct vsnap_domain *dom, bool was_running)
{
    g_mutex_lock(&dom->lock);
    char *api = dom->run ? g_strdup(dom->run->api_socket) : NULL;
    g_mutex_unlock(&dom->lock);
    g_autofree char *api_owned = api;
    g_autoptr(GError) error = NULL;
    if (was_running && api && !monitor_vm_resume(api, &error)) {
        process_kill_if_stuck(dom, error);
        g_warning("domain %s: cannot resume after a failed save: %s", dom->name, error->message);
    }
    g_mutex_lock(&dom->lock);
    if (dom->run)
        vsnap_domain_set_state_locked(dom, was_running ? VIR_DOMAIN_RUNNING : VIR_DOMAIN_PAUSED,
                                      was_running ? VIR_DOMAIN_RUNNING_SAVE_CANCELED
                                                  : VIR_DOMAIN_PAUSED_USER);
    g_mutex_unlock(&dom->lock);
    domain_job_end(dom);
}

/* After a successful save the domain stops; a transient one ceases to exist. */
static bool stop_saved(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    if (!process_stop(drv, dom, VIR_DOMAIN_SHUTOFF_SAVED, false, error))
        return false;
    g_mutex_lock(&dom->lock);
    event_queue_lifecycle(drv->events, dom, VIR_DOMAIN_EVENT_STOPPED,
                          VIR_DOMAIN_EVENT_STOPPED_SAVED);
    bool transient = !dom->persistent;
    g_mutex_unlock(&dom->lock);
    if (transient)
        domain_list_remove(drv->domains, dom);
    return true;
}

static guint64 ram_bytes(struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    guint64 bytes = dom->def->memory_kib * 1024;
    g_mutex_unlock(&dom->lock);
    return bytes;
}

/* ---- save to a file ---- */

struct pack_progress {
    struct vsnap_domain *dom;
};

static bool on_pack_progress(void *data, guint64 done, guint64 total)
{
    struct pack_progress *p = data;
    domain_job_progress(p->dom, total, done, NULL);
    return !domain_job_cancelled(p->dom);
}

/* The job, recorded before the VM is paused: a daemon that dies during the
 * save leaves the next one what it needs to resume the VM and remove
 * leftover (persist/recovery.c). */
static bool begin_save_job(struct vsnap_domain *dom, const char *watch_dir, const char *leftover,
                           const char *product, GError **error)
{
    g_mutex_lock(&dom->lock);
    bool running = dom->run && dom->state == VIR_DOMAIN_RUNNING;
    g_mutex_unlock(&dom->lock);
    struct domain_job job = {
        .operation = VIR_DOMAIN_JOB_OPERATION_SAVE, .total = ram_bytes(dom),
        .watch_dir = (char *)watch_dir, .resume = running, .leftover = (char *)leftover,
        .product = (char *)product,
    };
    return domain_job_begin(dom, &job, error);
}

/* The job began, the VM is paused: pause_for_save after begin_save_job. */
static bool pause_in_job(struct vsnap_driver *drv, struct vsnap_domain *dom, bool *was_running,
                         GError **error)
{
    if (pause_for_save(drv, dom, was_running, error)) {
        test_hook("save-paused");
        return true;
    }
    domain_job_end(dom);
    return false;
}

static bool save_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *to,
                        const char *dxml, unsigned flags, GError **error)
{
    if (!g_path_is_absolute(to))
        return refuse(error, VIR_ERR_INVALID_ARG, "the save file must be an absolute path");
    g_autofree char *xml = definition_to_save(drv, dom, dxml, error);
    if (!xml)
        return false;
    bool disks = domain_has_writable_disk(dom);
    g_autofree char *work = disks ? saved_dir(drv, dom->name, error) : work_dir(drv, dom->name, error);
    g_autofree char *tmp_image = save_image_temp_path(to);
    bool was_running = false;
    if (!work || !begin_save_job(dom, work, tmp_image, to, error) ||
        !pause_in_job(drv, dom, &was_running, error)) {
        remove_dir(work);
        return false;
    }
    bool paused = (flags & VIR_DOMAIN_SAVE_PAUSED) ||
                  (!(flags & VIR_DOMAIN_SAVE_RUNNING) && !was_running);
    struct pack_progress progress = {.dom = dom};
    bool taken = vmsnap_take(dom, work, NULL, error);
    /* Taken, the disks run on the layers in work: it stays, recorded. */
    bool ok = taken && (!disks || process_refresh_disks(dom, error)) &&
              save_image_write(to, xml, work, paused, on_pack_progress, &progress, error);
    if (!disks || !taken)
        remove_dir(work);
    if (!ok) {
        cancel_save(dom, was_running);
        return false;
    }
    test_hook("save-written");
    return stop_saved(drv, dom, error);
}

bool save_to_file(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *to,
                  const char *dxml, unsigned flags, GError **error)
{
    if (!check_flags(flags, VIR_DOMAIN_SAVE_BYPASS_CACHE | VIR_DOMAIN_SAVE_RUNNING |
                                VIR_DOMAIN_SAVE_PAUSED, error))
        return false;
    if (!domain_job_acquire(dom, "save", error))
        return false;
    bool ok = save_locked(drv, dom, to, dxml, flags, error);
    domain_job_release(dom);
    return ok;
}

/* ---- restoring (from a file or a managed image) ---- */

static struct domain_def *image_definition(struct vsnap_driver *drv, const char *image_xml,
                                           const char *dxml, bool allow_clone, GError **error)
{
    g_autoptr(domain_def) def = domain_def_parse_string(image_xml, drv->paths.schema_dir, error);
    if (!def || !dxml)
        return g_steal_pointer(&def);
    struct domain_def *given = domain_def_parse_string(dxml, drv->paths.schema_dir, error);
    /* For a restore, another name with another uuid is a clone: a new
     * domain, running beside the saved one, with the interfaces (taps,
     * MACs) of its own definition. One of the two alone would be neither. */
    bool same_name = given && g_str_equal(given->name, def->name);
    bool same_uuid = given && memcmp(given->uuid, def->uuid, 16) == 0;
    bool identity_ok = same_name && same_uuid ? true : allow_clone && !same_name && !same_uuid;
    if (given && (!identity_ok || given->memory_kib != def->memory_kib ||
                  given->vcpus != def->vcpus || given->n_nets != def->n_nets)) {
        refuse(error, VIR_ERR_INVALID_ARG,
               "the XML given for the restore must describe the saved domain with the same "
               "name, uuid, memory, vCPUs and number of interfaces (a restore may also give "
               "another name with another uuid: a clone)");
        g_clear_pointer(&given, domain_def_free);
    }
    if (given && !domain_def_check_same_disks(def, given, error))
        g_clear_pointer(&given, domain_def_free);
    return given;
}

/* The domain object the image restores into; *added when made here. */
/* The domain a restore goes into: the listed one with def's uuid (its job
 * not taken), or a new transient one, listed with its job held (*added), so
 * that no other call can start or undefine it before the restore has run. */
static struct vsnap_domain *restore_target(struct vsnap_driver *drv,
                                           const struct domain_def *def, bool *added,
                                           GError **error)
{
    struct vsnap_domain *dom = domain_list_find_uuid(drv->domains, def->uuid);
    *added = false;
    if (dom) {
        if (!g_str_equal(dom->name, def->name)) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                        "domain '%s' already exists with the uuid of the saved domain '%s'",
                        dom->name, def->name);
            vsnap_domain_unref(dom);
            return NULL;
        }
        return dom;
    }
    dom = vsnap_domain_new(domain_def_copy(def));
    /* Nobody else sees the new object yet: its job is free. */
    if (!domain_job_acquire_unlisted(dom, "restore"))
        g_assert_not_reached();
    if (!domain_list_add(drv->domains, dom, error)) {
        domain_job_release(dom);
        vsnap_domain_unref(dom);
        return NULL;
    }
    *added = true;
    test_hook("restore-listed");
    return dom;
}

static bool restore_into(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *from,
                         const struct domain_def *def, bool run, GError **error)
{
    if (vsnap_domain_is_active(dom)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "domain '%s' is already active", dom->name);
        return false;
    }
    /* The restored disks run on the image's disk layers: kept beside them. */
    bool disks = has_writable_disk(def);
    g_autofree char *work = disks ? saved_dir(drv, dom->name, error) : work_dir(drv, dom->name, error);
    struct restore_request req = {
        .source_dir = work, .def = def, .run = run, .origin = RESTORE_FROM_SAVE,
    };
    bool ok = work && save_image_extract(from, work, error) &&
              (!disks || give_saved_dir(drv, work, error)) && restore_start(drv, dom, &req, error);
    if (!ok || !disks)
        remove_dir(work);
    return ok;
}

bool save_restore_file(struct vsnap_driver *drv, const char *from, const char *dxml,
                       unsigned flags, GError **error)
{
    if (!check_flags(flags, VIR_DOMAIN_SAVE_BYPASS_CACHE | VIR_DOMAIN_SAVE_RUNNING |
                                VIR_DOMAIN_SAVE_PAUSED, error))
        return false;
    struct save_image_info info = {0};
    if (!save_image_read_info(from, &caller_daemon, &info, error))
        return false;
    g_autoptr(domain_def) def = image_definition(drv, info.domain_xml, dxml, true, error);
    bool run = (flags & VIR_DOMAIN_SAVE_RUNNING) ||
               (!(flags & VIR_DOMAIN_SAVE_PAUSED) && !info.paused);
    save_image_info_clear(&info);
    bool added = false;
    g_autoptr(vsnap_domain) dom = def ? restore_target(drv, def, &added, error) : NULL;
    if (!dom)
        return false;
    if (!added && !domain_job_acquire(dom, "restore", error))
        return false;
    bool ok = restore_into(drv, dom, from, def, run, error);
    if (!ok && added)   /* unlisted before its job is free: nobody took it meanwhile */
        domain_list_remove(drv->domains, dom);
    domain_job_release(dom);
    return ok;
}

char *save_image_xml(struct vsnap_driver *drv, const struct caller *caller, const char *file,
                     unsigned flags, GError **error)
{
    if (flags & ~VIR_DOMAIN_SAVE_IMAGE_XML_SECURE) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)",
                    flags);
        return NULL;
    }
    struct save_image_info info = {0};
    if (!save_image_read_info(file, caller, &info, error))
        return NULL;
    return info.domain_xml;
}

bool save_image_define(struct vsnap_driver *drv, const char *file, const char *dxml,
                       unsigned flags, GError **error)
{
    if (!check_flags(flags, VIR_DOMAIN_SAVE_RUNNING | VIR_DOMAIN_SAVE_PAUSED, error))
        return false;
    struct save_image_info info = {0};
    if (!save_image_read_info(file, &caller_daemon, &info, error))
        return false;
    g_autoptr(domain_def) def = image_definition(drv, info.domain_xml, dxml, false, error);
    bool paused = (flags & VIR_DOMAIN_SAVE_PAUSED) ||
                  (!(flags & VIR_DOMAIN_SAVE_RUNNING) && info.paused);
    save_image_info_clear(&info);
    if (!def)
        return false;
    g_autofree char *xml = domain_def_format(def, false, -1);
    g_autofree char *work = work_dir(drv, def->name, error);
    bool ok = work && save_image_extract(file, work, error) &&
              save_image_write(file, xml, work, paused, NULL, NULL, error);
    remove_dir(work);
    return ok;
}

void save_finish_recovered(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    g_autoptr(GError) error = NULL;
    if (!stop_saved(drv, dom, &error))
        g_warning("domain %s: cannot stop it after its save: %s", dom->name, error->message);
}

/* ---- managed save ---- */

static bool rename_dir(const char *from, const char *to, GError **error)
{
    if (g_rename(from, to) == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot rename %s to %s: %s", from,
                to, g_strerror(errno));
    return false;
}

/* Taken under a temporary name (tmp, created) and renamed to final: a crash
 * leaves no half image under the final name. A diff on the current snapshot
 * while the VM runs from it without a break, else full. */
static bool write_managed(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *final,
                          const char *tmp, const char *xml, bool paused, GError **error)
{
    g_autofree char *base = lineage_diff_base_dir(drv, dom);
    bool is_diff = false;
    bool disks = domain_has_writable_disk(dom);
    bool ok = vmsnap_take_diff_or_full(dom, tmp, base, &is_diff, error) &&
              (!disks || process_refresh_disks(dom, error)) &&
              managed_image_write_info(tmp, xml, paused, error) &&
              snapdir_remove(final, error) && rename_dir(tmp, final, error) &&
              (!disks || relocate_record(drv, dom, tmp, final, error));
    if (!ok)
        remove_dir(tmp);
    return ok;
}

static bool managed_save_locked(struct vsnap_driver *drv, struct vsnap_domain *dom,
                                unsigned flags, GError **error)
{
    g_mutex_lock(&dom->lock);
    bool persistent = dom->persistent;
    g_mutex_unlock(&dom->lock);
    if (!persistent)
        return refuse(error, VIR_ERR_OPERATION_INVALID,
                      "cannot do managed save for transient domain");
    g_autofree char *xml = definition_to_save(drv, dom, NULL, error);
    g_autofree char *final = managed_image_dir(drv->paths.state_dir, dom->name);
    g_autofree char *tmp = managed_image_tmp_dir(drv->paths.state_dir, dom->name);
    bool was_running = false;
    if (!xml || !snapdir_remove(tmp, error) || !create_dir(tmp, error))
        return false;
    if (!begin_save_job(dom, tmp, tmp, final, error) || !pause_in_job(drv, dom, &was_running, error)) {
        remove_dir(tmp);
        return false;
    }
    bool paused = (flags & VIR_DOMAIN_SAVE_PAUSED) ||
                  (!(flags & VIR_DOMAIN_SAVE_RUNNING) && !was_running);
    if (!write_managed(drv, dom, final, tmp, xml, paused, error)) {
        cancel_save(dom, was_running);
        return false;
    }
    return stop_saved(drv, dom, error);
}

bool save_managed(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                  GError **error)
{
    if (!check_flags(flags, VIR_DOMAIN_SAVE_BYPASS_CACHE | VIR_DOMAIN_SAVE_RUNNING |
                                VIR_DOMAIN_SAVE_PAUSED, error))
        return false;
    if (!domain_job_acquire(dom, "managedsave", error))
        return false;
    bool ok = managed_save_locked(drv, dom, flags, error);
    domain_job_release(dom);
    return ok;
}

bool save_has_managed(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    return managed_image_exists(drv->paths.state_dir, dom->name);
}

/* Without its memory, a managed save image's disk layers are still what
 * the disks hold since the last snapshot: they are kept for the next boot. */
static bool remove_managed_locked(struct vsnap_driver *drv, struct vsnap_domain *dom,
                                  GError **error)
{
    g_autofree char *dir = managed_image_dir(drv->paths.state_dir, dom->name);
    if (domain_has_writable_disk(dom) && save_has_managed(drv, dom)) {
        g_autofree char *kept = keep_managed_files(drv, dom, dir, error);
        return kept != NULL;
    }
    return snapdir_remove(dir, error);
}

bool save_managed_remove(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    if (!domain_job_acquire(dom, "managedsave-remove", error))
        return false;
    bool ok = remove_managed_locked(drv, dom, error);
    domain_job_release(dom);
    return ok;
}

bool save_start_managed(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                        bool *handled, GError **error)
{
    *handled = false;
    if (!save_has_managed(drv, dom))
        return true;
    g_autofree char *dir = managed_image_dir(drv->paths.state_dir, dom->name);
    if (flags & VIR_DOMAIN_START_FORCE_BOOT)
        return remove_managed_locked(drv, dom, error);
    g_autofree char *xml = NULL;
    bool paused = false;
    if (!managed_image_read_info(dir, &xml, &paused, error)) {
        g_prefix_error(error, "the managed save image of %s is damaged (remove it with "
                              "managedsave-remove or start with --force-boot): ", dom->name);
        return false;
    }
    g_autoptr(domain_def) def = domain_def_parse_string(xml, drv->paths.schema_dir, error);
    if (!def || !snapdir_check_chain(dir, NULL, error)) {
        g_prefix_error(error, "cannot start %s from its managed save image: ", dom->name);
        return false;
    }
    /* The restored disks run on its disk layers: moved where they are kept. */
    bool disks = has_writable_disk(def);
    g_autofree char *kept = disks ? keep_managed_files(drv, dom, dir, error) : NULL;
    if (disks && !kept) {
        g_prefix_error(error, "cannot start %s from its managed save image: ", dom->name);
        return false;
    }
    struct restore_request req = {
        .source_dir = disks ? kept : dir, .def = def, .run = !(flags & VIR_DOMAIN_START_PAUSED) && !paused,
        .origin = RESTORE_FROM_SAVE,
    };
    if (!restore_start(drv, dom, &req, error)) {
        g_autoptr(GError) back = NULL;
        if (disks && (g_rename(kept, dir) != 0 || !relocate_record(drv, dom, kept, dir, &back)))
            g_warning("domain %s: cannot put its managed save image back: %s", dom->name,
                      back ? back->message : g_strerror(errno));
        g_prefix_error(error, "cannot start %s from its managed save image: ", dom->name);
        return false;
    }
    *handled = true;
    /* The new shim holds the layer mapped: the files can go (not the disk
     * layers of a domain with disks: its disks run on them). */
    if (!disks)
        remove_dir(dir);
    return true;
}

bool save_check_undefine(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                         GError **error)
{
    if (save_has_managed(drv, dom)) {
        if (!(flags & VIR_DOMAIN_UNDEFINE_MANAGED_SAVE))
            return refuse(error, VIR_ERR_OPERATION_INVALID,
                          "Refusing to undefine while domain managed save image exists");
        if (!remove_managed_locked(drv, dom, error))
            return false;
    }
    /* The domain is inactive (the caller's rule): its area is in no jail. */
    save_area_remove_if_empty(drv->paths.state_dir, dom->name);
    return true;
}

/* The background push of a snapshot (persist/push.h) or the import of one
 * at a revert (persist/pull-job.h), when no job of the domain's own runs:
 * the one under way (a pull first: the revert waits for it), or
 * (completed) the one of the two that ended last. */
static gint64 transfer_job(struct vsnap_driver *drv, struct vsnap_domain *dom, bool completed,
                           struct save_job_info *out)
{
    char uuid[37];
    uuid_format(dom->uuid, uuid);
    struct push_info info = {0}, pull = {0};
    bool have, pulled = false;
    if (completed) {
        have = push_last(drv->pushes, uuid, &info);
        if (pull_job_last(drv->pulls, uuid, &pull) && (!have || pull.ended_us > info.ended_us)) {
            push_info_clear(&info);
            info = pull;
            have = pulled = true;
        } else
            push_info_clear(&pull);
    } else {
        have = pulled = pull_job_current(drv->pulls, uuid, &info);
        have = have || push_current(drv->pushes, uuid, &info);
    }
    if (!have)
        return 0;
    *out = (struct save_job_info){
        .type = info.type,
        .operation = pulled ? VIR_DOMAIN_JOB_OPERATION_SNAPSHOT_REVERT
                            : VIR_DOMAIN_JOB_OPERATION_SNAPSHOT,
        .elapsed_ms = info.elapsed_ms, .total = info.total,
        .processed = MIN(info.processed, info.total), .error = g_steal_pointer(&info.error),
    };
    out->remaining = out->total - out->processed;
    return info.ended_us;
}

/* The domain's own last completed job (persist/job.h), if it ended after
 * the transfer in out; kept unless keep is false, as libvirt does. */
static void own_completed(struct vsnap_domain *dom, gint64 transfer_ended_us, bool keep, struct save_job_info *out)
{
    g_mutex_lock(&dom->lock);
    struct domain_job_stats *c = dom->completed;
    if (c && (out->type == VIR_DOMAIN_JOB_NONE || c->ended_us > transfer_ended_us)) {
        g_free(out->error);
        *out = (struct save_job_info){
            .type = VIR_DOMAIN_JOB_COMPLETED, .operation = c->operation, .elapsed_ms = c->elapsed_ms,
            .total = c->total, .processed = c->processed, .remaining = c->remaining,
            .iteration = (unsigned)c->iteration, .dirty_rate = c->dirty_rate, .page_size = c->page_size,
            .downtime_ms = c->downtime_ms, .has_downtime = true,
        };
        if (c->forced_stop[0])
            out->error = g_strdup_printf("the guest dirtied memory faster than it was copied: a forced stop "
                                         "after the %s limit, with %" G_GUINT64_FORMAT " ms of downtime",
                                         g_str_equal(c->forced_stop, "time") ? "time" : "passes",
                                         c->downtime_ms);
        if (!keep)
            g_clear_pointer(&dom->completed, g_free);
    }
    g_mutex_unlock(&dom->lock);
}

void save_job_completed(struct vsnap_driver *drv, struct vsnap_domain *dom, bool keep,
                        struct save_job_info *out)
{
    memset(out, 0, sizeof(*out));
    out->type = VIR_DOMAIN_JOB_NONE;
    gint64 ended_us = transfer_job(drv, dom, true, out);
    own_completed(dom, ended_us, keep, out);
}

/* A live snapshot's figures are the shim's: RAM copied over every pass
 * (more than RAM once pages are copied again), what the pass still copies,
 * the pass, the guest's dirty rate. A shim that does not answer leaves the
 * job's own (nothing processed). */
static void live_job_info(struct vsnap_domain *dom, struct save_job_info *out)
{
    g_mutex_lock(&dom->lock);
    g_autofree char *api = dom->run ? g_strdup(dom->run->api_socket) : NULL;
    g_mutex_unlock(&dom->lock);
    struct monitor_snapshot_job live;
    g_autoptr(GError) error = NULL;
    if (!api || !monitor_vm_snapshot_job(api, &live, &error)) {
        if (error)
            g_message("domain %s: no progress of its live snapshot: %s", dom->name, error->message);
        return;
    }
    const guint64 page = 4096;
    out->total = live.ram_pages * page;
    out->processed = live.copied_pages * page;
    out->remaining = (live.pass_pages_total - MIN(live.pass_pages_copied, live.pass_pages_total)) * page;
    out->iteration = live.pass;
    out->dirty_rate = live.dirty_pages_per_s;
    out->page_size = page;
}

void save_job_info(struct vsnap_driver *drv, struct vsnap_domain *dom, struct save_job_info *out)
{
    struct domain_job job = {0};
    memset(out, 0, sizeof(*out));
    out->type = VIR_DOMAIN_JOB_NONE;
    if (!domain_job_get(dom, &job)) {
        transfer_job(drv, dom, false, out);
        return;
    }
    out->type = VIR_DOMAIN_JOB_BOUNDED;
    out->operation = job.operation;
    out->elapsed_ms = (guint64)(g_get_monotonic_time() - job.started_us) / 1000;
    out->total = job.total;
    out->processed = MIN(job.processed, job.total);
    out->remaining = out->total - out->processed;
    if (job.live)
        live_job_info(dom, out);
    domain_job_clear(&job);
}
