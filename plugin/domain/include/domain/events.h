/* Domain events leave the driver through one queue drained by one thread,
 * so every listener sees them in the order the state changes happened
 * (they are queued under the domain's lock, at the change itself) and a
 * slow listener never holds a domain lock. */
#pragma once

#include <glib.h>

/* A job's figures when it completed, as libvirt's QEMU driver gives them in
 * its job-completed event and domjobinfo --completed (bytes, ms). */
struct domain_job_stats {
    int operation;             /* VIR_DOMAIN_JOB_OPERATION_* */
    guint64 elapsed_ms;
    guint64 downtime_ms;       /* the guest's stop */
    guint64 total, processed, remaining;
    /* A live snapshot's: its passes, the guest's dirty rate (pages a
     * second) and the page size; 0 for other jobs. */
    guint64 iteration, dirty_rate, page_size;
    char forced_stop[16];      /* a live snapshot's forced stop: "passes", "time", or "" */
    gint64 ended_us;           /* monotonic */
};

struct domain_event {
    int event_id;              /* VIR_DOMAIN_EVENT_ID_* */
    char *name;
    unsigned char uuid[16];
    int id;
    int a, b;                  /* lifecycle: event, detail; agent: state, reason; metadata: type */
    char *text;                /* metadata: the element's namespace URI, or NULL; block job: the disk's path */
    char *disk;                /* block job: the disk's target (BLOCK_JOB_2's dst) */
    struct domain_job_stats job; /* job completed */
};

typedef void (*domain_event_sink)(void *data, const struct domain_event *ev);

struct event_queue;
struct vsnap_domain;

struct event_queue *event_queue_new(void);
/* Stops the thread after delivering what is queued. */
void event_queue_free(struct event_queue *queue);
void event_queue_set_sink(struct event_queue *queue, domain_event_sink sink, void *data);

/* Call with dom->lock held. */
void event_queue_lifecycle(struct event_queue *queue, struct vsnap_domain *dom, int event,
                           int detail);
void event_queue_reboot(struct event_queue *queue, struct vsnap_domain *dom);
void event_queue_agent(struct event_queue *queue, struct vsnap_domain *dom, int state,
                       int reason);
/* virsh desc / metadata changed it (type: VIR_DOMAIN_METADATA_*; uri for an element). */
void event_queue_metadata(struct event_queue *queue, struct vsnap_domain *dom, int type, const char *uri);
/* A block job's state changed (type VIR_DOMAIN_BLOCK_JOB_TYPE_*, status
 * VIR_DOMAIN_BLOCK_JOB_COMPLETED, _FAILED, _CANCELED, _READY): both
 * BLOCK_JOB (naming path, the file) and BLOCK_JOB_2 (naming disk, the target). */
void event_queue_block_job(struct event_queue *queue, struct vsnap_domain *dom, const char *path, const char *disk,
                           int type, int status);
void event_queue_job_completed(struct event_queue *queue, struct vsnap_domain *dom,
                               const struct domain_job_stats *job);
