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

#include "push.h"

struct pull_jobs;

struct pull_jobs *pull_jobs_new(void);

/* A pull of the domain begins; its progress reaches the job through
 * pull_job_on_progress with the data pull_job_begin returns (a
 * store_options.on_progress and its progress_data), until pull_job_end. */
void *pull_job_begin(struct pull_jobs *p, const char *domain_uuid);
void pull_job_on_progress(void *data, guint64 done, guint64 total);
void pull_job_end(struct pull_jobs *p, const char *domain_uuid, const GError *error);

/* Like push_current and push_last. */
bool pull_job_current(struct pull_jobs *p, const char *domain_uuid, struct push_info *out);
bool pull_job_last(struct pull_jobs *p, const char *domain_uuid, struct push_info *out);
