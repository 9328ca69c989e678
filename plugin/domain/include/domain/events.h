/* Domain events leave the driver through one queue drained by one thread,
 * so every listener sees them in the order the state changes happened
 * (they are queued under the domain's lock, at the change itself) and a
 * slow listener never holds a domain lock. */
#pragma once

#include <glib.h>

struct domain_event {
    int event_id;              /* VIR_DOMAIN_EVENT_ID_* */
    char *name;
    unsigned char uuid[16];
    int id;
    int a, b;                  /* lifecycle: event, detail; agent: state, reason; metadata: type */
    char *text;                /* metadata: the element's namespace URI, or NULL */
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
