/* Network and host interface listings on the vsnap connection. Clients
 * such as virt-manager list them on every connection they open; vsnap has
 * no interface driver, so that list is empty, and networks are the host's
 * libvirt networks (host-networks.h), read-only, or none when no network
 * driver runs. (Storage pools are the host storage driver's:
 * xdr-storage-pool.c.) A network handle is {name, uuid}. */
#include <libvirt/libvirt.h>
#include <string.h>

#include "rpc/procedure.h"
#include "host/host-networks.h"
#include "domain/state.h"
#include "util/virt-error.h"

#define NETWORK_LIST_MAX 16384u   /* REMOTE_NETWORK_LIST_MAX */

struct wire_network {
    char *name;
    unsigned char uuid[16];
};
static bool_t xdr_wire_network(XDR *x, struct wire_network *n)
{
    return xdr_wire_string(x, &n->name) && xdr_wire_uuid(x, n->uuid);
}

/* remote_connect_list_all_{networks,interfaces}_ret: handles (networks are
 * {name, uuid}; no interface is ever sent) and the count. */
struct list_all_ret {
    unsigned len;
    struct wire_network *items;
    uint32_t count;
};
static bool_t xdr_list_all_ret(XDR *x, struct list_all_ret *r)
{
    return xdr_array(x, (char **)&r->items, &r->len, NETWORK_LIST_MAX, sizeof(struct wire_network),
                     XDR_PROC(xdr_wire_network)) &&
           xdr_u_int(x, &r->count);
}

struct network_flags_args {
    struct wire_network net;
    uint32_t flags;
};
static bool_t xdr_network_flags_args(XDR *x, struct network_flags_args *a)
{
    return xdr_wire_network(x, &a->net) && xdr_u_int(x, &a->flags);
}

static const char *uri(struct rpc_call *call)
{
    return call->driver->paths.network_uri;
}

static GArray *networks(struct rpc_call *call, bool active)
{
    return host_networks_list(uri(call), active ? VIR_CONNECT_LIST_NETWORKS_ACTIVE
                                                : VIR_CONNECT_LIST_NETWORKS_INACTIVE);
}

/* ---- networks ---- */

static bool num_of(struct rpc_call *call, bool active, struct wire_int_value *r)
{
    g_autoptr(GArray) list = networks(call, active);
    r->value = (int32_t)list->len;
    return true;
}

static bool do_num_of_networks(struct rpc_call *call, struct rpc_void *a, struct wire_int_value *r, GError **error)
{
    (void)a, (void)error;
    return num_of(call, true, r);
}

static bool do_num_of_defined_networks(struct rpc_call *call, struct rpc_void *a, struct wire_int_value *r,
                                       GError **error)
{
    (void)a, (void)error;
    return num_of(call, false, r);
}

static bool names_of(struct rpc_call *call, bool active, int32_t max, struct wire_string_list *r, GError **error)
{
    if (!rpc_check_list_max(max, NETWORK_LIST_MAX, error))
        return false;
    g_autoptr(GArray) list = networks(call, active);
    rpc_names_reply(list, sizeof(struct host_network), offsetof(struct host_network, name), (unsigned)max, r);
    return true;
}

static bool do_list_networks(struct rpc_call *call, struct wire_int_value *a, struct wire_string_list *r,
                             GError **error)
{
    return names_of(call, true, a->value, r, error);
}

static bool do_list_defined_networks(struct rpc_call *call, struct wire_int_value *a, struct wire_string_list *r,
                                     GError **error)
{
    return names_of(call, false, a->value, r, error);
}

static bool do_list_all_networks(struct rpc_call *call, struct wire_list_all_args *a, struct list_all_ret *r,
                                 GError **error)
{
    (void)error;
    g_autoptr(GArray) list = host_networks_list(uri(call), a->flags);
    r->count = list->len;
    r->len = a->need_results ? list->len : 0;
    r->items = calloc(MAX(r->len, 1), sizeof(struct wire_network));
    for (unsigned i = 0; i < r->len; i++) {
        const struct host_network *net = &g_array_index(list, struct host_network, i);
        r->items[i].name = strdup(net->name);
        memcpy(r->items[i].uuid, net->uuid, 16);
    }
    return true;
}

static bool answer_network(struct host_network *net, struct wire_network *r)
{
    r->name = strdup(net->name);
    memcpy(r->uuid, net->uuid, 16);
    host_network_clear(net);
    return true;
}

static bool do_lookup_name(struct rpc_call *call, struct wire_string_value *a, struct wire_network *r,
                           GError **error)
{
    struct host_network net = {0};
    return host_network_lookup(uri(call), a->value, NULL, &net, error) && answer_network(&net, r);
}

static bool do_lookup_uuid(struct rpc_call *call, struct wire_uuid_value *a, struct wire_network *r, GError **error)
{
    struct host_network net = {0};
    return host_network_lookup(uri(call), NULL, a->uuid, &net, error) && answer_network(&net, r);
}

static bool fact(struct rpc_call *call, struct wire_network *net, enum host_network_fact which,
                 struct wire_int_value *r, GError **error)
{
    int value = host_network_fact(uri(call), net->name, which, error);
    r->value = value;
    return value >= 0;
}

static bool do_is_active(struct rpc_call *call, struct wire_network *a, struct wire_int_value *r, GError **error)
{
    return fact(call, a, HOST_NETWORK_ACTIVE, r, error);
}

static bool do_is_persistent(struct rpc_call *call, struct wire_network *a, struct wire_int_value *r,
                             GError **error)
{
    return fact(call, a, HOST_NETWORK_PERSISTENT, r, error);
}

static bool do_get_autostart(struct rpc_call *call, struct wire_network *a, struct wire_int_value *r,
                             GError **error)
{
    return fact(call, a, HOST_NETWORK_AUTOSTART, r, error);
}

static bool do_get_xml(struct rpc_call *call, struct network_flags_args *a, struct wire_string_value *r,
                       GError **error)
{
    if (a->flags & ~VIR_NETWORK_XML_INACTIVE) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)", a->flags);
        return false;
    }
    return rpc_text_reply(host_network_xml(uri(call), a->net.name, a->flags, error), r);
}

static bool do_get_bridge(struct rpc_call *call, struct wire_network *a, struct wire_string_value *r,
                          GError **error)
{
    return rpc_text_reply(host_network_bridge(uri(call), a->name, error), r);
}

/* ---- host interfaces: vsnap has none ---- */

static bool do_zero(struct rpc_call *call, struct rpc_void *a, struct wire_int_value *r, GError **error)
{
    (void)call, (void)a, (void)error;
    r->value = 0;
    return true;
}

static bool do_no_names(struct rpc_call *call, struct wire_int_value *a, struct wire_string_list *r,
                        GError **error)
{
    (void)call;
    if (!rpc_check_list_max(a->value, NETWORK_LIST_MAX, error))
        return false;
    r->len = 0;
    r->val = calloc(1, sizeof(char *));
    return true;
}

static bool do_list_all_none(struct rpc_call *call, struct wire_list_all_args *a, struct list_all_ret *r,
                             GError **error)
{
    (void)call, (void)a, (void)error;
    r->len = r->count = 0;
    r->items = calloc(1, sizeof(struct wire_network));
    return true;
}

#define P RPC_PROC
const struct proc_entry rpc_network_procs[] = {
    P(PROC_CONNECT_NUM_OF_NETWORKS, struct rpc_void, xdr_rpc_void, struct wire_int_value, xdr_wire_int_value,
      do_num_of_networks, 0),
    P(PROC_CONNECT_NUM_OF_DEFINED_NETWORKS, struct rpc_void, xdr_rpc_void, struct wire_int_value,
      xdr_wire_int_value, do_num_of_defined_networks, 0),
    P(PROC_CONNECT_LIST_NETWORKS, struct wire_int_value, xdr_wire_int_value, struct wire_string_list,
      xdr_wire_string_list, do_list_networks, 0),
    P(PROC_CONNECT_LIST_DEFINED_NETWORKS, struct wire_int_value, xdr_wire_int_value, struct wire_string_list,
      xdr_wire_string_list, do_list_defined_networks, 0),
    P(PROC_CONNECT_LIST_ALL_NETWORKS, struct wire_list_all_args, xdr_wire_list_all_args, struct list_all_ret,
      xdr_list_all_ret, do_list_all_networks, 0),
    P(PROC_NETWORK_LOOKUP_BY_NAME, struct wire_string_value, xdr_wire_string_value, struct wire_network,
      xdr_wire_network, do_lookup_name, 0),
    P(PROC_NETWORK_LOOKUP_BY_UUID, struct wire_uuid_value, xdr_wire_uuid_value, struct wire_network, xdr_wire_network,
      do_lookup_uuid, 0),
    P(PROC_NETWORK_IS_ACTIVE, struct wire_network, xdr_wire_network, struct wire_int_value, xdr_wire_int_value,
      do_is_active, 0),
    P(PROC_NETWORK_IS_PERSISTENT, struct wire_network, xdr_wire_network, struct wire_int_value,
      xdr_wire_int_value, do_is_persistent, 0),
    P(PROC_NETWORK_GET_AUTOSTART, struct wire_network, xdr_wire_network, struct wire_int_value,
      xdr_wire_int_value, do_get_autostart, 0),
    P(PROC_NETWORK_GET_XML_DESC, struct network_flags_args, xdr_network_flags_args, struct wire_string_value,
      xdr_wire_string_value, do_get_xml, 0),
    P(PROC_NETWORK_GET_BRIDGE_NAME, struct wire_network, xdr_wire_network, struct wire_string_value,
      xdr_wire_string_value, do_get_bridge, 0),
    P(PROC_CONNECT_NUM_OF_INTERFACES, struct rpc_void, xdr_rpc_void, struct wire_int_value, xdr_wire_int_value,
      do_zero, 0),
    P(PROC_CONNECT_NUM_OF_DEFINED_INTERFACES, struct rpc_void, xdr_rpc_void, struct wire_int_value,
      xdr_wire_int_value, do_zero, 0),
    P(PROC_CONNECT_LIST_INTERFACES, struct wire_int_value, xdr_wire_int_value, struct wire_string_list,
      xdr_wire_string_list, do_no_names, 0),
    P(PROC_CONNECT_LIST_DEFINED_INTERFACES, struct wire_int_value, xdr_wire_int_value, struct wire_string_list,
      xdr_wire_string_list, do_no_names, 0),
    P(PROC_CONNECT_LIST_ALL_INTERFACES, struct wire_list_all_args, xdr_wire_list_all_args, struct list_all_ret,
      xdr_list_all_ret, do_list_all_none, 0),
};
const size_t rpc_network_procs_count = G_N_ELEMENTS(rpc_network_procs);
