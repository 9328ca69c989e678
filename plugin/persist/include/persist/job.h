/* The long job under way on an active domain (a snapshot or a save), for
 * domjobinfo / domjobinfo --completed readers on other connections: a key
 * file in the domain's runtime directory,
 *
 *   <run_dir>/<name>/job   operation, start, bytes total and done; the
 *                          state to return to and what a crash leaves behind
 *
 * written whole each time (atomic replace) and gone when the job ends or the
 * domain stops. A job file that a new daemon finds belongs to a job that died
 * with the old one: persist/recovery.c resumes the VM the job paused, removes
 * what it left and the file. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/domain.h"

/* total/processed are bytes; watch_dir, when given, is a directory whose
 * growing files are the progress (a snapshot being written). */
struct domain_job {
    int operation;           /* VIR_DOMAIN_JOB_OPERATION_* */
    gint64 started_us;       /* monotonic */
    guint64 total, processed;
    char *watch_dir;
    bool resume;             /* the job pauses a running VM, which must run again */
    bool live;               /* a live snapshot: the shim runs it (progress, cancel) */
    int state, reason;       /* the domain's state and reason when the job began */
    char *leftover;          /* a file or directory the job writes, NULL if none */
    /* What the job makes under its final name (a save file, a managed-save
     * image), NULL if nothing. Its identity when the job began is recorded
     * beside it, so a new daemon can tell a job that got as far as making
     * it (rename done, VM not yet stopped) from one that did not. */
    char *product;
    char *product_was;       /* set by domain_job_begin */
};

/* Record the job before it touches the VM: operation, total and watch_dir
 * (progress), resume, leftover; the state and reason are the domain's now.
 * Errors are VSNAP_VIR_ERROR: the domain is not active, or the file cannot
 * be written. */
bool domain_job_begin(struct vsnap_domain *dom, const struct domain_job *job, GError **error);
/* A job's new figures; a failure to record them is logged (the job itself
 * goes on: only the progress readers see stale numbers). */
void domain_job_progress(struct vsnap_domain *dom, guint64 total, guint64 processed,
                         const char *watch_dir);
void domain_job_end(struct vsnap_domain *dom);
/* domjobabort of a snapshot or a save, live or not: the job is marked
 * cancelled (domain_job_cancelled), the shim's snapshot job is cancelled
 * (vm.cancel-snapshot, again until one is under way), then this waits (at
 * most JOB_CANCEL_WAIT_S) for the job to end. False with an error when the
 * domain has no shim. */
#define JOB_CANCEL_WAIT_S 10
bool domain_job_cancel(struct vsnap_domain *dom, GError **error);
/* Whether domjobabort asked the job under way to end: its steps check it
 * (before the shim's snapshot, between two steps of a save's copy). */
bool domain_job_cancelled(struct vsnap_domain *dom);
/* Whether the job made its product: a file exists under the product's name
 * and is not the one that was there when the job began. */
bool domain_job_made_product(const struct domain_job *job);
/* A job of the domain's own that completed: kept for domjobinfo
 * --completed and sent as the job-completed event (domain/events.h), as
 * libvirt's QEMU driver does for a snapshot or a save. stats->ended_us is
 * set here. */
struct event_queue;
struct domain_job_stats;
void domain_job_completed(struct event_queue *events, struct vsnap_domain *dom, struct domain_job_stats *stats);
/* The job under way; false when none. */
bool domain_job_get(struct vsnap_domain *dom, struct domain_job *job);
void domain_job_clear(struct domain_job *job);
