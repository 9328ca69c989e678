/* vsnap domain objects and the list that owns them.
 *
 * Locking: `lock` protects the fields and is held briefly; `job` serialises
 * operations on one domain (start, stop, suspend, ...) and is held for the
 * whole operation, which may wait on the shim (domain-job-lock.h: taken with
 * a bounded wait, never while `lock` is held). The list lock is never held
 * while a domain's job lock is taken. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "conf/domain-conf.h"
#include "domain/domain-job-lock.h"

struct domain_run;
struct domain_job_stats;

struct vsnap_domain {
    gint refs;
    GMutex lock;
    struct domain_job_lock job;
    GCond changed;               /* broadcast when state changes */

    char *name;                  /* immutable */
    unsigned char uuid[16];      /* immutable */

    struct domain_def *def;      /* the definition (persistent or transient) */
    struct domain_def *next_def; /* redefined while running: applies at stop */
    bool persistent;
    bool autostart;
    bool listed;                 /* still in the domain list (written under both locks) */

    int id;                      /* -1 when inactive */
    int state;                   /* virDomainState */
    int reason;                  /* the matching virDomain*Reason */
    uint64_t generation;         /* counts VM starts (boots and reboots) */
    struct domain_run *run;      /* the shim when active, else NULL */
    struct domain_job_stats *completed; /* the last job that completed (domjobinfo --completed), or NULL */
    gint job_cancel;             /* atomic: domjobabort asked the job under way to end (persist/job.h) */
    GPtrArray *block_jobs;       /* struct domain_block_job * (block-jobs.h), under lock; NULL until the first */
};

struct vsnap_domain *vsnap_domain_new(struct domain_def *def);   /* takes def */
struct vsnap_domain *vsnap_domain_ref(struct vsnap_domain *dom);
void vsnap_domain_unref(struct vsnap_domain *dom);
typedef struct vsnap_domain vsnap_domain;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vsnap_domain, vsnap_domain_unref)

/* The domain's job for the operation `what` (a string literal: "suspend"),
 * waited for at most job_wait_timeout seconds; a caller that times out gets
 * VIR_ERR_OPERATION_TIMEOUT naming the holder's operation
 * (domain-job-lock.h). Never call it holding dom->lock. Taken, the job is
 * the domain's only while dom is still the object in the list: a domain
 * that ended (destroyed, undefined) while the caller waited gets
 * VIR_ERR_NO_DOMAIN and no job, so nothing acts on (or starts a shim for)
 * a domain that is gone; a same-named domain defined since is another
 * object. Only the creator of an object not listed yet takes its job with
 * domain_job_acquire_unlisted. */
bool domain_job_acquire(struct vsnap_domain *dom, const char *what, GError **error);
bool domain_job_acquire_unlisted(struct vsnap_domain *dom, const char *what);
void domain_job_release(struct vsnap_domain *dom);

bool vsnap_domain_is_active(struct vsnap_domain *dom);   /* takes lock */
void vsnap_domain_set_state_locked(struct vsnap_domain *dom, int state, int reason);

struct domain_list;

struct domain_list *domain_list_new(void);
void domain_list_free(struct domain_list *list);
/* Returns new references; NULL when absent. */
struct vsnap_domain *domain_list_find_uuid(struct domain_list *list, const unsigned char *uuid);
struct vsnap_domain *domain_list_find_name(struct domain_list *list, const char *name);
struct vsnap_domain *domain_list_find_id(struct domain_list *list, int id);
/* Add dom unless its name or uuid is taken by another domain (error
 * VIR_ERR_OPERATION_FAILED naming the clash). */
bool domain_list_add(struct domain_list *list, struct vsnap_domain *dom, GError **error);
void domain_list_remove(struct domain_list *list, struct vsnap_domain *dom);
/* A snapshot of the members (new references), sorted by name. */
GPtrArray *domain_list_snapshot(struct domain_list *list);
/* Next free runtime id (ids count up from 1 and are not reused while the
 * daemon runs). */
int domain_list_next_id(struct domain_list *list);
void domain_list_note_id(struct domain_list *list, int id);

/* Canonical text form of a uuid. */
void uuid_format(const unsigned char uuid[16], char out[37]);
