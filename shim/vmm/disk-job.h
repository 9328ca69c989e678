/* Block jobs on a running disk (virsh blockpull, blockjob): one thread per
 * job copying a step at a time under the disk's overlay lock
 * (block/blk-backend.h's block pull), so the guest's I/O goes on between
 * steps. Private to vmm/: vmm.c owns the jobs (one per disk) and ends them
 * before the VM goes. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmm/vmm.h"

struct blk_backend;
struct disk_job;

enum disk_job_end { DISK_JOB_COMPLETED, DISK_JOB_FAILED, DISK_JOB_CANCELLED };


/* On the main context when the thread ended by itself (completed or
 * failed; error names why): the caller frees the job with disk_job_free.
 * old_chain: the chain backend the overlay left (completed), to close. */
typedef void (*disk_job_done_func)(struct disk_job *job, enum disk_job_end end, const char *error,
                                   struct blk_backend *old_chain, void *data);

/* Pull every block of overlay's chain into overlay (an overlay backend of
 * disk id), at most bandwidth bytes/s. */
struct disk_job *disk_job_start_pull(GMainContext *ctx, const char *id, struct blk_backend *overlay,
                                     uint64_t bandwidth, disk_job_done_func done, void *data);
const char *disk_job_disk(const struct disk_job *job);
void disk_job_get_info(struct disk_job *job, struct disk_job_info *out);
/* The last step is done and the done callback queued. */
bool disk_job_finished(struct disk_job *job);
void disk_job_set_bandwidth(struct disk_job *job, uint64_t bandwidth);
/* Stop the thread (the step under way finishes; the overlay keeps what was
 * copied, which reads as the chain does) and free the job. A done callback
 * not yet run is dropped. NULL is fine. */
void disk_job_free(struct disk_job *job);
