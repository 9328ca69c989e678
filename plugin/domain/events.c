#include "domain/events.h"

#include <libvirt/libvirt.h>
#include <string.h>

#include "domain/domain.h"

struct event_queue {
    GAsyncQueue *queue;
    GThread *thread;
    GMutex lock;               /* protects sink */
    domain_event_sink sink;
    void *sink_data;
};

/* A zero-filled event with event_id -1 tells the thread to stop. */
static void event_free(struct domain_event *ev)
{
    g_free(ev->name);
    g_free(ev->text);
    g_free(ev->disk);
    g_free(ev);
}

static gpointer deliver(gpointer data)
{
    struct event_queue *q = data;
    for (;;) {
        struct domain_event *ev = g_async_queue_pop(q->queue);
        if (ev->event_id < 0) {
            event_free(ev);
            return NULL;
        }
        g_mutex_lock(&q->lock);
        domain_event_sink sink = q->sink;
        void *sink_data = q->sink_data;
        g_mutex_unlock(&q->lock);
        if (sink)
            sink(sink_data, ev);
        event_free(ev);
    }
}

struct event_queue *event_queue_new(void)
{
    struct event_queue *q = g_new0(struct event_queue, 1);
    g_mutex_init(&q->lock);
    q->queue = g_async_queue_new();
    q->thread = g_thread_new("domain-events", deliver, q);
    return q;
}

void event_queue_free(struct event_queue *q)
{
    if (!q)
        return;
    struct domain_event *stop = g_new0(struct domain_event, 1);
    stop->event_id = -1;
    g_async_queue_push(q->queue, stop);
    g_thread_join(q->thread);
    g_async_queue_unref(q->queue);
    g_mutex_clear(&q->lock);
    g_free(q);
}

void event_queue_set_sink(struct event_queue *q, domain_event_sink sink, void *data)
{
    g_mutex_lock(&q->lock);
    q->sink = sink;
    q->sink_data = data;
    g_mutex_unlock(&q->lock);
}

static struct domain_event *event_new(struct vsnap_domain *dom, int event_id)
{
    struct domain_event *ev = g_new0(struct domain_event, 1);
    ev->event_id = event_id;
    ev->name = g_strdup(dom->name);
    memcpy(ev->uuid, dom->uuid, 16);
    ev->id = dom->id;
    return ev;
}

static void push_text(struct event_queue *q, struct vsnap_domain *dom, int event_id, int a, int b,
                      const char *text)
{
    struct domain_event *ev = event_new(dom, event_id);
    ev->a = a;
    ev->b = b;
    ev->text = g_strdup(text);
    g_async_queue_push(q->queue, ev);
}

static void push(struct event_queue *q, struct vsnap_domain *dom, int event_id, int a, int b)
{
    push_text(q, dom, event_id, a, b, NULL);
}

void event_queue_lifecycle(struct event_queue *q, struct vsnap_domain *dom, int event,
                           int detail)
{
    push(q, dom, VIR_DOMAIN_EVENT_ID_LIFECYCLE, event, detail);
}

void event_queue_reboot(struct event_queue *q, struct vsnap_domain *dom)
{
    push(q, dom, VIR_DOMAIN_EVENT_ID_REBOOT, 0, 0);
}

void event_queue_agent(struct event_queue *q, struct vsnap_domain *dom, int state, int reason)
{
    push(q, dom, VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE, state, reason);
}

void event_queue_metadata(struct event_queue *q, struct vsnap_domain *dom, int type, const char *uri)
{
    push_text(q, dom, VIR_DOMAIN_EVENT_ID_METADATA_CHANGE, type, 0, uri);
}

void event_queue_block_job(struct event_queue *q, struct vsnap_domain *dom, const char *path, const char *disk,
                           int type, int status)
{
    int ids[] = { VIR_DOMAIN_EVENT_ID_BLOCK_JOB, VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2 };
    for (unsigned i = 0; i < G_N_ELEMENTS(ids); i++) {
        struct domain_event *ev = event_new(dom, ids[i]);
        ev->a = type;
        ev->b = status;
        ev->text = g_strdup(path);
        ev->disk = g_strdup(disk);
        g_async_queue_push(q->queue, ev);
    }
}

void event_queue_job_completed(struct event_queue *q, struct vsnap_domain *dom,
                               const struct domain_job_stats *job)
{
    struct domain_event *ev = event_new(dom, VIR_DOMAIN_EVENT_ID_JOB_COMPLETED);
    ev->job = *job;
    g_async_queue_push(q->queue, ev);
}
