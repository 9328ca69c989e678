#include "event-registry.h"

#include <libvirt/libvirt.h>
#include <string.h>

#include "job-params.h"
#include "rpc/client.h"
#include "domain/state.h"

struct registration {
    struct rpc_client *client;
    int callback_id;
    int event_id;
    bool has_dom;
    unsigned char uuid[16];
};

struct event_registry {
    struct vsnap_driver *driver;
    GMutex lock;
    GPtrArray *regs;    /* struct registration * */
    int last_id;
};

static void registration_free(struct registration *r)
{
    rpc_client_unref(r->client);
    g_free(r);
}

/* ---- event messages (remote_domain_event_callback_*_msg) ---- */

struct lifecycle_msg {
    int32_t callback_id;
    struct wire_domain dom;
    int32_t event, detail;
};
static bool_t xdr_lifecycle_msg(XDR *x, struct lifecycle_msg *m)
{
    return xdr_int(x, &m->callback_id) && xdr_wire_domain(x, &m->dom) && xdr_int(x, &m->event) &&
           xdr_int(x, &m->detail);
}

struct reboot_msg {
    int32_t callback_id;
    struct wire_domain dom;
};
static bool_t xdr_reboot_msg(XDR *x, struct reboot_msg *m)
{
    return xdr_int(x, &m->callback_id) && xdr_wire_domain(x, &m->dom);
}

struct metadata_msg {
    int32_t callback_id;
    struct wire_domain dom;
    int32_t type;
    char *nsuri;
};
static bool_t xdr_metadata_msg(XDR *x, struct metadata_msg *m)
{
    return xdr_int(x, &m->callback_id) && xdr_wire_domain(x, &m->dom) && xdr_int(x, &m->type) &&
           xdr_wire_opt_string(x, &m->nsuri);
}

/* Agent lifecycle has the same shape as lifecycle: id, dom, state, reason. */
#define xdr_agent_msg xdr_lifecycle_msg

/* remote_domain_event_callback_job_completed_msg: id, dom, the job's typed
 * parameters. */
struct job_completed_msg {
    int32_t callback_id;
    struct wire_domain dom;
    struct wire_typed_param_list params;
};
static bool_t xdr_job_completed_msg(XDR *x, struct job_completed_msg *m)
{
    return xdr_int(x, &m->callback_id) && xdr_wire_domain(x, &m->dom) &&
           xdr_array(x, (char **)&m->params.val, &m->params.len, JOB_PARAMS_MAX,
                     sizeof(struct wire_typed_param), XDR_PROC(xdr_wire_typed_param));
}

static void send_job_completed(struct registration *r, struct wire_header *hdr, const struct domain_event *ev,
                               const struct wire_domain *dom)
{
    struct wire_typed_param params[JOB_PARAMS_MAX] = {0};
    struct job_completed_msg msg = {.callback_id = r->callback_id, .dom = *dom};
    msg.params.val = params;
    msg.params.len = job_params_fill(&ev->job, params);
    hdr->proc = PROC_DOMAIN_EVENT_CALLBACK_JOB_COMPLETED;
    rpc_client_send(r->client, hdr, XDR_PROC(xdr_job_completed_msg), &msg);
    job_params_free(params, msg.params.len);
}

/* remote_domain_event_callback_block_job_msg (id, then dom, path, type,
 * status) and remote_domain_event_block_job_2_msg (id, dom, dst, type,
 * status): the same shape, the file or the target. */
struct block_job_msg {
    int32_t callback_id;
    struct wire_domain dom;
    char *path;
    int32_t type, status;
};
static bool_t xdr_block_job_msg(XDR *x, struct block_job_msg *m)
{
    return xdr_int(x, &m->callback_id) && xdr_wire_domain(x, &m->dom) && xdr_wire_string(x, &m->path) &&
           xdr_int(x, &m->type) && xdr_int(x, &m->status);
}

static void send_block_job(struct registration *r, struct wire_header *hdr, const struct domain_event *ev,
                           const struct wire_domain *dom)
{
    bool second = ev->event_id == VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2;
    struct block_job_msg msg = {.callback_id = r->callback_id, .dom = *dom, .path = second ? ev->disk : ev->text,
                                .type = ev->a, .status = ev->b};
    hdr->proc = second ? PROC_DOMAIN_EVENT_BLOCK_JOB_2 : PROC_DOMAIN_EVENT_CALLBACK_BLOCK_JOB;
    rpc_client_send(r->client, hdr, XDR_PROC(xdr_block_job_msg), &msg);
}

/* ---- delivery ---- */

static void send_event(struct registration *r, const struct domain_event *ev)
{
    struct wire_header hdr = {
        .prog = REMOTE_PROGRAM, .vers = REMOTE_PROTOCOL_VERSION, .type = RPC_MESSAGE,
        .serial = 0, .status = RPC_STATUS_OK,
    };
    struct lifecycle_msg msg = {
        .callback_id = r->callback_id,
        .dom = {.name = ev->name, .id = ev->id},
        .event = ev->a, .detail = ev->b,
    };
    memcpy(msg.dom.uuid, ev->uuid, 16);
    switch (ev->event_id) {
    case VIR_DOMAIN_EVENT_ID_LIFECYCLE:
        hdr.proc = PROC_DOMAIN_EVENT_CALLBACK_LIFECYCLE;
        rpc_client_send(r->client, &hdr, XDR_PROC(xdr_lifecycle_msg), &msg);
        break;
    case VIR_DOMAIN_EVENT_ID_REBOOT: {
        struct reboot_msg reboot = {.callback_id = r->callback_id, .dom = msg.dom};
        hdr.proc = PROC_DOMAIN_EVENT_CALLBACK_REBOOT;
        rpc_client_send(r->client, &hdr, XDR_PROC(xdr_reboot_msg), &reboot);
        break;
    }
    case VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE:
        hdr.proc = PROC_DOMAIN_EVENT_CALLBACK_AGENT_LIFECYCLE;
        rpc_client_send(r->client, &hdr, XDR_PROC(xdr_agent_msg), &msg);
        break;
    case VIR_DOMAIN_EVENT_ID_METADATA_CHANGE: {
        struct metadata_msg metadata = {.callback_id = r->callback_id, .dom = msg.dom, .type = ev->a,
                                        .nsuri = ev->text};
        hdr.proc = PROC_DOMAIN_EVENT_CALLBACK_METADATA_CHANGE;
        rpc_client_send(r->client, &hdr, XDR_PROC(xdr_metadata_msg), &metadata);
        break;
    }
    case VIR_DOMAIN_EVENT_ID_JOB_COMPLETED:
        send_job_completed(r, &hdr, ev, &msg.dom);
        break;
    case VIR_DOMAIN_EVENT_ID_BLOCK_JOB:
    case VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2:
        send_block_job(r, &hdr, ev, &msg.dom);
        break;
    }
}

static void deliver(void *data, const struct domain_event *ev)
{
    struct event_registry *reg = data;
    g_autoptr(GPtrArray) targets = g_ptr_array_new_with_free_func(g_free);
    g_mutex_lock(&reg->lock);
    for (guint i = 0; i < reg->regs->len; i++) {
        struct registration *r = reg->regs->pdata[i];
        if (r->event_id != ev->event_id || (r->has_dom && memcmp(r->uuid, ev->uuid, 16) != 0))
            continue;
        struct registration *copy = g_memdup2(r, sizeof(*r));
        rpc_client_ref(copy->client);
        g_ptr_array_add(targets, copy);
    }
    g_mutex_unlock(&reg->lock);
    /* Send outside the lock: a slow client must not block registrations. */
    for (guint i = 0; i < targets->len; i++) {
        struct registration *r = targets->pdata[i];
        send_event(r, ev);
        rpc_client_unref(r->client);
    }
}

struct event_registry *event_registry_new(struct vsnap_driver *driver)
{
    struct event_registry *reg = g_new0(struct event_registry, 1);
    reg->driver = driver;
    g_mutex_init(&reg->lock);
    reg->regs = g_ptr_array_new_with_free_func((GDestroyNotify)registration_free);
    event_queue_set_sink(driver->events, deliver, reg);
    return reg;
}

void event_registry_free(struct event_registry *reg)
{
    if (!reg)
        return;
    event_queue_set_sink(reg->driver->events, NULL, NULL);
    g_ptr_array_free(reg->regs, TRUE);
    g_mutex_clear(&reg->lock);
    g_free(reg);
}

void event_registry_remove_client(struct event_registry *reg, struct rpc_client *client)
{
    g_mutex_lock(&reg->lock);
    for (guint i = reg->regs->len; i-- > 0;) {
        struct registration *r = reg->regs->pdata[i];
        if (r->client == client)
            g_ptr_array_remove_index(reg->regs, i);
    }
    g_mutex_unlock(&reg->lock);
}

/* ---- registrations ---- */

int event_registry_add(struct event_registry *reg, struct rpc_client *client, int event_id,
                       const unsigned char *dom_uuid)
{
    struct registration *entry = g_new0(struct registration, 1);
    entry->client = rpc_client_ref(client);
    entry->event_id = event_id;
    if (dom_uuid) {
        entry->has_dom = true;
        memcpy(entry->uuid, dom_uuid, 16);
    }
    g_mutex_lock(&reg->lock);
    int id = entry->callback_id = ++reg->last_id;
    g_ptr_array_add(reg->regs, entry);
    g_mutex_unlock(&reg->lock);
    return id;
}

bool event_registry_remove(struct event_registry *reg, struct rpc_client *client,
                           int callback_id)
{
    bool found = false;
    g_mutex_lock(&reg->lock);
    for (guint i = 0; i < reg->regs->len && !found; i++) {
        struct registration *entry = reg->regs->pdata[i];
        if (entry->client == client && entry->callback_id == callback_id) {
            g_ptr_array_remove_index(reg->regs, i);
            found = true;
        }
    }
    g_mutex_unlock(&reg->lock);
    return found;
}
