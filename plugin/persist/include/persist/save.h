/* virsh save / restore / save-image-dumpxml and managed save.
 *
 * save: pause, full vm.snapshot into a work directory, pack it with the
 * domain definition into one save image (save-image.h), stop the domain.
 * restore: unpack into a work directory, a new shim restores from it
 * (vm.restore with the domain's restore mode and config_overrides), the work
 * directory goes (the shim holds what it still needs).
 * managedsave: the snapshot directory stays as it is in
 * <state_dir>/saves/<name>/managed/, so `start` restores straight from it, on
 * demand: no unpacking, nothing read before the VM runs. While the VM runs
 * from the current snapshot without a break, the image is a diff on it (its
 * chain then reaches into the snapshot directory; deleting that snapshot
 * folds it into the image like into any child).
 * Errors are VSNAP_VIR_ERROR GErrors with libvirt's codes. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/state.h"

struct caller;

bool save_to_file(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *to,
                  const char *dxml, unsigned flags, GError **error);
/* Restores into the domain the image names (defined or not: an undefined one
 * comes back transient). */
bool save_restore_file(struct vsnap_driver *drv, const char *from, const char *dxml,
                       unsigned flags, GError **error);
/* save-image-dumpxml: the image is opened as caller could (a read-only
 * client's own credentials, caller.h), never as root for someone else. */
char *save_image_xml(struct vsnap_driver *drv, const struct caller *caller, const char *file,
                     unsigned flags, GError **error);
/* save-image-define / save-image-edit: a new definition (same domain, memory
 * and vCPUs) and, with VIR_DOMAIN_SAVE_RUNNING/PAUSED, a new state to restore
 * into. The image is rewritten under a temporary name and renamed. */
bool save_image_define(struct vsnap_driver *drv, const char *file, const char *dxml,
                       unsigned flags, GError **error);

bool save_managed(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                  GError **error);
bool save_has_managed(struct vsnap_driver *drv, struct vsnap_domain *dom);
/* managedsave-remove (takes the job lock). */
bool save_managed_remove(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error);

/* Hooks for the domain driver. start: called under dom->job by a start of
 * an inactive domain; when a managed image exists the domain is restored from
 * it (*handled = true) unless VIR_DOMAIN_START_FORCE_BOOT discards it. */
bool save_start_managed(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                        bool *handled, GError **error);
/* undefine: refuse while a managed image exists unless
 * VIR_DOMAIN_UNDEFINE_MANAGED_SAVE, which removes it. */
bool save_check_undefine(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                         GError **error);

/* A save whose daemon died after its image was in place but before the VM
 * stopped: stop it now, as saved (persist/recovery.c, when the job file says
 * the job made its product: domain_job_made_product). */
void save_finish_recovered(struct vsnap_driver *drv, struct vsnap_domain *dom);

/* domjobinfo: the job under way on dom (VIR_DOMAIN_JOB_NONE when none). */
struct save_job_info {
    int type;                   /* VIR_DOMAIN_JOB_* */
    int operation;              /* VIR_DOMAIN_JOB_OPERATION_* */
    guint64 elapsed_ms;
    guint64 total, processed;   /* bytes */
    guint64 remaining;          /* bytes: total - processed, or a live snapshot's pass's rest */
    char *error;                /* a failed job's (g_free it) */
    /* A live snapshot (the shim's vm.info): its pass and the guest's dirty
     * rate (pages of page_size a second); iteration 0 for other jobs. */
    unsigned iteration;
    guint64 dirty_rate, page_size;
    /* A completed job of the domain's own: the guest's stop. */
    bool has_downtime;
    guint64 downtime_ms;
};
/* The job under way: a save or snapshot, else a background push. */
void save_job_info(struct vsnap_driver *drv, struct vsnap_domain *dom, struct save_job_info *out);
/* domjobinfo --completed: of the last background push that ended and the
 * domain's own last completed job (a live snapshot: persist/job.h), the
 * later; type VIR_DOMAIN_JOB_NONE when none. The domain's own is forgotten
 * once read unless keep (VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED), as libvirt's
 * QEMU driver does. */
void save_job_completed(struct vsnap_driver *drv, struct vsnap_domain *dom, bool keep,
                        struct save_job_info *out);
