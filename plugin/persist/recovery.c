#include "persist/recovery.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <libvirt/libvirt.h>

#include "domain/save-area.h"
#include "monitor/monitor.h"
#include "persist/job.h"
#include "persist/save.h"
#include "domain/disk-state.h"
#include "recovery-job.h"
#include "revert-intent.h"
#include "run/process.h"
#include "snapshot-dir.h"
#include "snapshot-disks.h"
#include "snapshot-remove.h"
#include "snapshot-revert.h"
#include "snapshot-tree.h"
#include "util/virt-error.h"

/* ---- the job a dead daemon left (persist/job.h) ---- */

static const char *operation_name(int operation)
{
    switch (operation) {
    case VIR_DOMAIN_JOB_OPERATION_SNAPSHOT: return "snapshot";
    case VIR_DOMAIN_JOB_OPERATION_SAVE: return "save";
    case VIR_DOMAIN_JOB_OPERATION_DUMP: return "dump";
    default: return "job";
    }
}

/* The VM runs again as it did before the job paused it. */
static void resume_after(struct vsnap_domain *dom, const struct domain_job *job)
{
    g_autofree char *api = process_run_path(dom, "api.sock");
    g_autoptr(GError) error = NULL;
    if (!api || !monitor_vm_resume(api, &error)) {
        g_warning("domain %s: cannot resume it after its interrupted %s: %s", dom->name,
                  operation_name(job->operation), error ? error->message : "not running");
        return;
    }
    g_mutex_lock(&dom->lock);
    vsnap_domain_set_state_locked(dom, job->state, job->reason);
    process_write_status_locked(dom);
    g_mutex_unlock(&dom->lock);
}

static void remove_leftover(struct vsnap_domain *dom, const char *path)
{
    g_autoptr(GError) error = NULL;
    if (g_file_test(path, G_FILE_TEST_IS_DIR) ? !snapdir_remove(path, &error)
                                                : g_unlink(path) < 0 && errno != ENOENT)
        g_warning("domain %s: cannot remove %s: %s", dom->name, path,
                  error ? error->message : g_strerror(errno));
}

/* Undone (the VM it paused runs again, its leftover goes), or finished when
 * it had made its product (a save whose image is in place: the VM stops as
 * saved). The job file goes either way: no phantom job in domjobinfo. */
static void finish_job(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    struct domain_job job = {0};
    if (!domain_job_get(dom, &job))
        return;
    bool made = domain_job_made_product(&job);
    g_message("domain %s: its %s was cut short by the end of the previous daemon; %s", dom->name,
              operation_name(job.operation),
              made        ? "it had made its product, finishing it"
              : job.resume ? "resuming the VM it paused"
              : job.live   ? "it was live: the shim cancelled it when its client went, the VM ran on"
                           : "the VM was paused before it");
    if (job.resume && !made)
        resume_after(dom, &job);
    if (job.leftover)
        remove_leftover(dom, job.leftover);
    domain_job_end(dom);
    if (made && job.operation == VIR_DOMAIN_JOB_OPERATION_SAVE)
        save_finish_recovered(drv, dom);
    domain_job_clear(&job);
}

/* ---- snapshots (snapshot-tree.h) ---- */

bool recovery_finish_leftovers(struct vsnap_driver *drv, struct vsnap_domain *dom,
                               struct snapshot_tree *tree, GError **error)
{
    /* Directories of snapshots the shim wrote and nobody recorded (a daemon
     * killed in a create), once no disk runs on them any more: at start a
     * running VM's disks may still sit on one, which a later revert ends. */
    if (!snapshot_disks_finish_moves(drv, dom, error))
        return false;
    g_autoptr(GPtrArray) in_use = snapshot_disks_in_use(drv, dom);
    snapshot_tree_remove_unfinished(tree, in_use);
    for (guint i = tree->entries->len; i-- > 0;) {
        struct snapshot_entry *e = tree->entries->pdata[i];
        if (!e->deleting)
            continue;
        g_message("domain %s: finishing the interrupted delete of snapshot '%s'", dom->name,
                  e->name);
        if (!snapshot_remove_one(drv, dom, tree, e, error))
            return false;
    }
    /* A kept disk layer (a deleted snapshot's the disks ran on) is not a
     * delete cut short: it stays while the disks run on it, and goes by a
     * fold into what was taken on it since. */
    return snapshot_disks_fold_kept(drv, dom, tree, error);
}

/* A revert the previous daemon did not finish: the old VM still runs (as
 * before: nothing to do), the snapshot's VM runs (record it), or neither
 * (start the snapshot's VM, as the revert would have). */
static void finish_revert(struct vsnap_driver *drv, struct vsnap_domain *dom,
                          struct snapshot_tree *tree)
{
    struct revert_intent intent = {0};
    if (!revert_intent_read(tree->dir, &intent))
        return;
    g_autoptr(GError) error = NULL;
    struct snapshot_entry *e = snapshot_tree_find(tree, intent.snapshot);
    pid_t pid = snapshot_revert_shim_pid(dom);
    g_autoptr(domain_def) def = NULL;
    struct restore_request req;
    if (!e) {
        g_set_error(&error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN_SNAPSHOT,
                    "no domain snapshot with matching name '%s'", intent.snapshot);
        revert_intent_remove(tree->dir);
    } else if (pid != 0 && pid == intent.old_pid) {
        g_message("domain %s: a revert to '%s' was cut short before it stopped the VM",
                  dom->name, e->name);
        revert_intent_remove(tree->dir);
    } else if (pid != 0) {
        g_message("domain %s: recording the revert to '%s'", dom->name, e->name);
        snapshot_revert_recorded(tree, dom, e, &error);
    } else if (snapshot_revert_request(drv, dom, e, intent.flags, &def, &req, &error) &&
               restore_start(drv, dom, &req, &error)) {
        g_message("domain %s: finished the revert to '%s'", dom->name, e->name);
        snapshot_revert_recorded(tree, dom, e, &error);
    } else {
        revert_intent_remove(tree->dir);
    }
    if (error)
        g_warning("domain %s: an interrupted revert to '%s': %s", dom->name, intent.snapshot,
                  error->message);
    revert_intent_clear(&intent);
}

/* Snapshots the shim finished but nobody recorded, partial directories of
 * ones it never finished, deletes cut short (a fold of disks back into their
 * images among them: the domain cannot start before it is finished), a
 * revert cut short. */
static void recover_snapshots(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    g_autoptr(GError) error = NULL;
    char uuid[37];
    uuid_format(dom->uuid, uuid);
    g_autoptr(snapshot_tree) tree =
        snapshot_tree_load(drv->paths.state_dir, dom->name, uuid, &error);
    if (tree && recovery_finish_leftovers(drv, dom, tree, &error))
        finish_revert(drv, dom, tree);
    else
        g_warning("domain %s: %s", dom->name, error->message);
}

/* ---- save areas (domain/save-area.h) ---- */

static bool is_defined(struct vsnap_driver *drv, const char *name)
{
    g_autoptr(vsnap_domain) dom = domain_list_find_name(drv->domains, name);
    return dom != NULL;
}

/* What saves, restores and managed saves left (work directories, managed
 * images never renamed into place, the shim's partial directories); the
 * area of a domain no longer defined goes once empty. */
static void recover_save_areas(struct vsnap_driver *drv)
{
    const char *state = drv->paths.state_dir;
    g_autoptr(GPtrArray) areas = save_area_list(state);
    for (guint i = 0; i < areas->len; i++) {
        save_area_remove_leftovers(state, areas->pdata[i]);
        if (!is_defined(drv, areas->pdata[i]))
            save_area_remove_if_empty(state, areas->pdata[i]);
    }
}

/* The disk directory of no domain (a transient one, a clone among them,
 * whose start a daemon's end cut short) goes when it holds only overlays no
 * record names; one with a record keeps chains that still need folding, and
 * stays. */
static void recover_disk_dirs(struct vsnap_driver *drv)
{
    g_autofree char *root = g_build_filename(drv->paths.state_dir, "disks", NULL);
    g_autoptr(GDir) d = g_dir_open(root, 0, NULL);
    for (const char *name; d && (name = g_dir_read_name(d));) {
        g_autofree char *dir = disk_state_dir(drv->paths.state_dir, name);
        g_autoptr(GError) error = NULL;
        if (is_defined(drv, name) || !disk_state_holds_only_unrecorded(dir))
            continue;
        g_message("removing %s: the disks of a start that never finished", dir);
        if (!disk_state_remove(dir, &error))
            g_warning("%s", error->message);
    }
}

/* The snapshot directory of no domain that holds nothing (made for the jail
 * of a start that never finished) goes; one with snapshots stays. */
static void remove_empty_snapshot_dirs(struct vsnap_driver *drv)
{
    g_autofree char *root = g_build_filename(drv->paths.state_dir, "snapshots", NULL);
    g_autoptr(GDir) d = g_dir_open(root, 0, NULL);
    for (const char *name; d && (name = g_dir_read_name(d));) {
        g_autofree char *dir = snapshot_tree_dir(drv->paths.state_dir, name);
        if (!is_defined(drv, name))
            g_rmdir(dir);   /* ENOTEMPTY: it has snapshots, kept */
    }
}

/* ---- start-up ---- */

void recovery_at_start(struct vsnap_driver *drv)
{
    g_autoptr(GPtrArray) doms = domain_list_snapshot(drv->domains);
    for (guint i = 0; i < doms->len; i++) {
        struct vsnap_domain *dom = doms->pdata[i];
        g_autoptr(GError) error = NULL;
        if (!domain_job_acquire(dom, "recovery", &error)) {
            g_warning("%s", error->message);
            continue;
        }
        finish_job(drv, dom);
        recover_snapshots(drv, dom);
        domain_job_release(dom);
    }
    recover_save_areas(drv);
    recover_disk_dirs(drv);
    remove_empty_snapshot_dirs(drv);
}
