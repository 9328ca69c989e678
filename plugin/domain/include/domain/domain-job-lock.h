/* A domain's job lock: one operation on a domain at a time (start, stop,
 * suspend, snapshot, revert, ...), held for the whole operation. A caller
 * waits for it at most the configured time (job_wait_timeout, default 30 s,
 * as libvirt's QEMU driver) and then fails with VIR_ERR_OPERATION_TIMEOUT
 * naming the operation that holds it: a revert pulling a large snapshot from
 * a store holds it for minutes, and no call waits forever. */
#pragma once

#include <glib.h>
#include <stdbool.h>

struct domain_job_lock {
    GMutex mutex;
    GCond released;
    bool held;
    const char *holder;      /* the holder's operation; a string that lives forever */
    gint64 since_us;         /* monotonic: when the holder took it */
};

void domain_job_lock_init(struct domain_job_lock *lock);
void domain_job_lock_clear(struct domain_job_lock *lock);

/* How long domain_job_acquire waits, in seconds (1 or more). */
#define DOMAIN_JOB_WAIT_DEFAULT 30u
void domain_job_set_wait_timeout(unsigned seconds);
unsigned domain_job_wait_timeout(void);

/* Take the lock for the operation `what` (a string literal: "suspend",
 * "snapshot-revert"; the message of a caller that times out names it), of
 * the domain called `domain` (for the message). Waits at most the
 * configured time, then fails with VIR_ERR_OPERATION_TIMEOUT: "cannot
 * acquire state change lock (held by <what of the holder> ...)". The
 * domain's callers use domain_job_acquire and domain_job_release
 * (domain.h). */
bool domain_job_lock_acquire(struct domain_job_lock *lock, const char *domain, const char *what,
                             GError **error);
void domain_job_lock_release(struct domain_job_lock *lock);
