/* The import of a snapshot learnt from another host (persist/import.c), as
 * virsh domjobinfo shows it: the pull under way (bytes fetched of the
 * layers' total) and, for domjobinfo --completed, the last one that ended.
 *
 * Kept in memory, per domain, rather than in the domain's job file
 * (persist/job.h): a revert that imports usually starts from a domain that
 * is shut off and has no runtime directory, and nothing of a pull needs
 * recovering after a crash (the store library pulls into a partial
 * directory and renames it whole). The figures are a struct push_info, the
 * same ones a background push shows. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "persist/push.h"
#include "store/store.h"

struct pull_jobs;

struct pull_jobs *pull_jobs_new(void);

/* A pull of the domain begins: o's on_progress, progress_data and cancel
 * become this job's (domjobinfo shows its progress, pull_job_cancel stops
 * it), until pull_job_end. */
void pull_job_begin(struct pull_jobs *p, const char *domain_uuid, struct store_options *o);
/* The pull ended; error says why it failed, NULL when it completed. True
 * when a cancel was asked before its end: the job then ends as cancelled
 * (domjobinfo --completed: Cancelled), whatever the pull's outcome, and
 * *reason names who asked (see pull_job_cancel). */
bool pull_job_end(struct pull_jobs *p, const char *domain_uuid, const GError *error,
                  const char **reason);

/* Stop the domain's pull under way (virsh domjobabort, or a destroy that
 * must not wait for it): its transfers end within about 100 ms. reason, a
 * static text ("canceled by client"), is what the pull's caller reports.
 * Waits until the pull has ended (at most PULL_CANCEL_WAIT_S); no lock is
 * held meanwhile. False when no pull runs. */
#define PULL_CANCEL_WAIT_S 5
bool pull_job_cancel(struct pull_jobs *p, const char *domain_uuid, const char *reason);

/* Like push_current and push_last. */
bool pull_job_current(struct pull_jobs *p, const char *domain_uuid, struct push_info *out);
bool pull_job_last(struct pull_jobs *p, const char *domain_uuid, struct push_info *out);
