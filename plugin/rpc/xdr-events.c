/* Domain event registration procedures (316/317). The registry they fill
 * delivers the events (event-registry.c). */
#include <libvirt/libvirt.h>

#include "rpc/procedure.h"
#include "event-registry.h"
#include "util/virt-error.h"

/* Event ids a client may register. Only lifecycle, reboot, agent
 * lifecycle, metadata change, job completed and the block job events ever fire; accepting the others lets `virsh event --all` and
 * virt-manager register them all as they do with any driver. */
#define EVENT_ID_LIMIT 64

struct register_args {
    int32_t event_id;
    struct wire_domain *dom;
};
static bool_t xdr_register_args(XDR *x, struct register_args *a)
{
    return xdr_int(x, &a->event_id) && xdr_wire_opt_domain(x, &a->dom);
}

static bool do_register(struct rpc_call *call, struct register_args *a,
                        struct wire_int_value *r, GError **error)
{
    if (a->event_id < 0 || a->event_id >= EVENT_ID_LIMIT) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported event ID %d",
                    a->event_id);
        return false;
    }
    r->value = event_registry_add(call->events, call->client, a->event_id,
                                  a->dom ? a->dom->uuid : NULL);
    return true;
}

static bool do_deregister(struct rpc_call *call, struct wire_int_value *a, struct rpc_void *r,
                          GError **error)
{
    if (event_registry_remove(call->events, call->client, a->value))
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                "could not find event callback %d for deregistration", a->value);
    return false;
}

const struct proc_entry rpc_event_procs[] = {
    RPC_PROC(PROC_CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY, struct register_args,
             xdr_register_args, struct wire_int_value, xdr_wire_int_value, do_register, 0),
    RPC_PROC(PROC_CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY, struct wire_int_value,
             xdr_wire_int_value, struct rpc_void, xdr_rpc_void, do_deregister, 0),
};
const size_t rpc_event_procs_count = G_N_ELEMENTS(rpc_event_procs);
