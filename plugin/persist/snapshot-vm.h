/* The shim side of snapshots, saves and restores: the vm.snapshot and
 * vm.restore bodies, the running VM's lineage (which snapshot its memory
 * descends from without a break, so the next snapshot can be a diff) and the
 * progress of a long job, as files in the domain's runtime directory:
 *
 *   <run_dir>/<name>/snapshot-lineage   id of that snapshot + the VM generation
 *   <run_dir>/<name>/job                the job under way (domjobinfo)
 *
 * Both vanish with the runtime directory when the domain stops. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "state.h"
#include "process.h"

/* Pause (if running), vm.snapshot into dir (a diff on parent_dir when given),
 * resume (if it was running, also after a failure). */
bool vmsnap_take(struct vsnap_domain *dom, const char *dir, const char *parent_dir,
                 GError **error);

/* process_start_how.setup_vm for a restore: vm.restore from source_dir with
 * the overrides that put the VM's vsock socket and serial port in the new
 * runtime directory. */
struct vmsnap_restore {
    const char *source_dir;
    const char *mode;        /* copy, merge, ondemand */
    bool resume;
};
bool vmsnap_restore_setup(struct domain_run *run, const struct domain_def *live, void *data,
                          GError **error);

/* Lineage of the running VM (call under the job lock). */
void vmsnap_lineage_set(struct vsnap_domain *dom, const char *snapshot_id);
void vmsnap_lineage_clear(struct vsnap_domain *dom);
/* The snapshot id, NULL when the VM restarted or has none. */
char *vmsnap_lineage_get(struct vsnap_domain *dom);

/* Job progress. total/processed are bytes; watch_dir, when given, is a
 * directory whose growing files are the progress (a snapshot being written). */
struct vmsnap_job {
    int operation;           /* VIR_DOMAIN_JOB_OPERATION_* */
    gint64 started_us;       /* monotonic */
    guint64 total, processed;
    char *watch_dir;
};
void vmsnap_job_begin(struct vsnap_domain *dom, int operation, guint64 total,
                      const char *watch_dir);
void vmsnap_job_progress(struct vsnap_domain *dom, guint64 total, guint64 processed,
                         const char *watch_dir);
void vmsnap_job_end(struct vsnap_domain *dom);
/* The job under way; false when none. */
bool vmsnap_job_get(struct vsnap_domain *dom, struct vmsnap_job *job);
void vmsnap_job_clear(struct vmsnap_job *job);
