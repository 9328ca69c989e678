/* Block job entry points: virsh blockpull (virDomainBlockPull, and
 * virDomainBlockRebase without a base but the image), blockjob --info,
 * --bandwidth and --abort. A pull folds every sealed layer of the disk's
 * chain into its active overlay while the guest runs (the image stays the
 * base); the shim copies, this records the job (domain/block-jobs.h: one
 * per disk), and run/shim-events.c ends it with the BLOCK_JOB and
 * BLOCK_JOB_2 events when the shim reports the copy done. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "domain/state.h"

struct block_job_info {
    int type;                 /* VIR_DOMAIN_BLOCK_JOB_TYPE_* */
    uint64_t bandwidth;       /* MiB/s, or bytes/s with VIR_DOMAIN_BLOCK_JOB_INFO_BANDWIDTH_BYTES */
    uint64_t cur, end;        /* bytes */
};

/* bandwidth: MiB/s, or bytes/s with VIR_DOMAIN_BLOCK_PULL_BANDWIDTH_BYTES. */
bool driver_block_pull(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, uint64_t bandwidth,
                       unsigned flags, GError **error);
/* virDomainBlockRebase: a pull when base is NULL or the disk's image (what
 * every layer sits on); a partial pull or a copy is refused by name. */
bool driver_block_rebase(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, const char *base,
                         uint64_t bandwidth, unsigned flags, GError **error);
/* virDomainBlockCommit with VIR_DOMAIN_BLOCK_COMMIT_ACTIVE (top the active
 * layer or absent, base the image or absent): every layer and the overlay
 * are written into the image while the guest runs; BLOCK_JOB(_2) READY,
 * then virDomainBlockJobAbort with _PIVOT puts the disk on its image alone
 * (COMPLETED); without _PIVOT the disk stays on its chain (CANCELED). Every
 * snapshot is marked first: reverting to one is then refused naming the
 * commit. A commit of inner layers is refused by name. */
bool driver_block_commit(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, const char *base,
                         const char *top, uint64_t bandwidth, unsigned flags, GError **error);
/* *found false: the disk has no job (virsh: "No current block job"). */
bool driver_block_job_info(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, unsigned flags,
                           struct block_job_info *out, bool *found, GError **error);
bool driver_block_job_set_speed(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk,
                                uint64_t bandwidth, unsigned flags, GError **error);
/* The copy stops where it is (the overlay keeps what it copied, the
 * chain's own bytes) and BLOCK_JOB(_2) CANCELED is sent. */
bool driver_block_job_abort(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, unsigned flags,
                            GError **error);
