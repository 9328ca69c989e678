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

enum disk_job_kind {
    DISK_JOB_PULL,    /* the chain's blocks into the overlay, which then sits on the image */
    DISK_JOB_COMMIT,  /* a pull, then READY waits for the pivot into the image (vmm.c) */
    DISK_JOB_COPY,    /* the disk through its mirror (blk_mirror_new) into a new image; READY waits */
};
enum disk_job_end { DISK_JOB_COMPLETED, DISK_JOB_FAILED, DISK_JOB_CANCELLED, DISK_JOB_READY };


/* On the main context when the thread ended by itself: a pull completed,
 * or a commit's pull is READY (the job stays for its pivot), or either
 * failed (error names why). old_chain: the chain backend the overlay left
 * (completed, ready), to close. The caller frees a job that completed or
 * failed with disk_job_free. */
typedef void (*disk_job_done_func)(struct disk_job *job, enum disk_job_end end, const char *error,
                                   struct blk_backend *old_chain, void *data);

/* A job of kind on overlay (an overlay backend of disk id; a copy's: the
 * mirror backend the disk runs on), at most
 * bandwidth bytes/s. image_fd: a commit's image, open for writing (the job
 * owns it); -1 for a pull. */
struct disk_job *disk_job_start(GMainContext *ctx, const char *id, enum disk_job_kind kind,
                                struct blk_backend *overlay, int image_fd, uint64_t bandwidth,
                                disk_job_done_func done, void *data);
const char *disk_job_disk(const struct disk_job *job);
enum disk_job_kind disk_job_kind_of(const struct disk_job *job);
const char *disk_job_kind(const struct disk_job *job);    /* "pull", "commit", "copy" */
int disk_job_image_fd(const struct disk_job *job);
/* A copy's target image, for the config once pivoted. */
void disk_job_set_target(struct disk_job *job, const char *path);
const char *disk_job_target(const struct disk_job *job);
/* A commit's copy is done: its pivot may come. */
bool disk_job_ready(struct disk_job *job);
void disk_job_get_info(struct disk_job *job, struct disk_job_info *out);
/* The last step is done and the done callback queued. */
bool disk_job_finished(struct disk_job *job);
void disk_job_set_bandwidth(struct disk_job *job, uint64_t bandwidth);
/* Stop the thread (the step under way finishes; the overlay keeps what was
 * copied, which reads as the chain does) and free the job. A done callback
 * not yet run is dropped. NULL is fine. */
void disk_job_free(struct disk_job *job);
