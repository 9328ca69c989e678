/* Snapshots pushed to a snapshot store in the background (common/store).
 *
 * A snapshot taken with a store (the domain's <vsnap:store url>, else the
 * daemon's [store] url) is marked "push pending" in its directory before
 * snapshot-create returns:
 *
 *   <snapshot dir>/.push-pending   the store URL; removed when the push is
 *                                  done (a hidden file: it never travels)
 *
 * and queued here. Each domain with pushes to do has one thread, which
 * pushes its snapshots one after the other (oldest first) and ends when its
 * queue is empty; no domain lock is held while it transfers, so a push never
 * blocks another operation on the domain, and it goes on when the domain is
 * destroyed (the snapshot's files stay). The store library writes the
 * manifest last, so the store lists the snapshot only once it is complete. A
 * push that fails (store down) is logged and keeps its mark; it is queued
 * again at the daemon's next start and at the domain's next snapshot. A
 * daemon killed during a push finds the mark at its next start and pushes
 * again; objects the store has already are skipped. A push canceled by
 * virsh domjobabort (push_cancel) keeps its mark the same way.
 *
 * The one thing a push must not overlap is a change to the directories it
 * reads: a snapshot delete folds layers into children. A delete holds the
 * domain's pushes (push_hold: waits for the push under way, keeps queued ones
 * from starting) and drops the queued pushes of the snapshots it removes. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/state.h"

struct push_request {
    char *domain_uuid;   /* canonical text */
    char *domain_name;   /* for messages */
    char *snapshot;      /* the snapshot's name, for messages */
    char *dir;           /* its directory */
    char *url;           /* the store */
    char *domain_xml;    /* stored in the manifest */
    char *snapshot_xml;
};

void push_request_free(struct push_request *r);

struct push_queue *push_queue_new(const struct driver_store *store);

/* The durable mark, written before the snapshot is reported taken. */
bool push_mark_pending(const char *dir, const char *url, GError **error);
/* The URL of the pending push of dir, NULL when none. */
char *push_pending_url(const char *dir);

/* Queue r (taken); a request for a directory queued or being pushed
 * already is dropped. */
void push_enqueue(struct push_queue *q, struct push_request *r);

/* Until push_release: the domain's push under way has ended and no other
 * starts. Holds nest. */
void push_hold(struct push_queue *q, const char *domain_uuid);
void push_release(struct push_queue *q, const char *domain_uuid);
/* Forget the queued pushes of dir (NULL: every one of the domain's). */
void push_drop(struct push_queue *q, const char *domain_uuid, const char *dir);

/* virsh domjobabort: the domain's push under way stops (its transfers end
 * within about 100 ms; the store gets no manifest for it) and the queued
 * ones are dropped. Each keeps its mark: like a push that failed, it is
 * pushed again at the domain's next snapshot or the daemon's next start
 * (the objects the store got are then skipped). domjobinfo --completed
 * shows it Cancelled. Waits until the push has ended (at most
 * PUSH_CANCEL_WAIT_S), holding no lock. False when no push runs. */
#define PUSH_CANCEL_WAIT_S 5
bool push_cancel(struct push_queue *q, const char *domain_uuid);

/* For domjobinfo: the push under way (type VIR_DOMAIN_JOB_BOUNDED), or the
 * last one that ended (VIR_DOMAIN_JOB_COMPLETED or _FAILED, with its error);
 * false when there is none. */
struct push_info {
    int type;
    guint64 elapsed_ms, total, processed;
    char *error;
    gint64 ended_us;     /* monotonic, of a job that ended (which of two ended last) */
};
bool push_current(struct push_queue *q, const char *domain_uuid, struct push_info *out);
bool push_last(struct push_queue *q, const char *domain_uuid, struct push_info *out);
void push_info_clear(struct push_info *info);
