/* A running domain's block jobs (virsh blockpull, blockjob): at most one per
 * disk, recorded under dom->lock while the shim runs the copy. The record
 * is what blockjob --info and --abort find, what a snapshot is refused by
 * (naming the job), and what the shim's job events end. */
#pragma once

#include <glib.h>
#include <stdbool.h>

struct vsnap_domain;

struct domain_block_job {
    char *disk;     /* the disk's target (vda): BLOCK_JOB_2's dst */
    char *path;     /* the file the disk wrote when the job began: BLOCK_JOB's path */
    int type;       /* VIR_DOMAIN_BLOCK_JOB_TYPE_* */
    char *dest;     /* a copy's destination image, NULL for other jobs */
    bool ready;     /* READY came (a commit's or copy's): a copy's destination is whole */
};

/* All under dom->lock. */
struct domain_block_job *domain_block_job_find(struct vsnap_domain *dom, const char *disk);
/* false (VIR_ERR_OPERATION_INVALID "disk 'vda' already in active block
 * job", libvirt's words) when the disk has one. */
bool domain_block_job_add(struct vsnap_domain *dom, const char *disk, const char *path, int type, GError **error);
void domain_block_job_remove(struct vsnap_domain *dom, const char *disk);
/* Some job of dom, NULL when none runs. */
struct domain_block_job *domain_block_job_any(struct vsnap_domain *dom);
/* Every record goes (the shim ended: its jobs with it), and the destination
 * of a copy that never was READY. */
void domain_block_jobs_clear(struct vsnap_domain *dom);
/* "pull" for VIR_DOMAIN_BLOCK_JOB_TYPE_PULL, ... for messages. */
const char *domain_block_job_type_name(int type);
