/* Definition procedures that are not devices: virDomainGetMetadata,
 * virDomainSetMetadata (virsh desc, metadata), virDomainSetVcpus and
 * virDomainSetVcpusFlags (setvcpus) (driver-config.h). */
#include <libvirt/libvirt.h>

#include "rpc/procedure.h"
#include "driver/driver.h"
#include "driver/driver-config.h"
#include "util/virt-error.h"

struct get_metadata_args {
    struct wire_domain dom;
    int32_t type;
    char *uri;
    uint32_t flags;
};
static bool_t xdr_get_metadata_args(XDR *x, struct get_metadata_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_int(x, &a->type) && xdr_wire_opt_string(x, &a->uri) &&
           xdr_u_int(x, &a->flags);
}

struct set_metadata_args {
    struct wire_domain dom;
    int32_t type;
    char *metadata, *key, *uri;
    uint32_t flags;
};
static bool_t xdr_set_metadata_args(XDR *x, struct set_metadata_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_int(x, &a->type) && xdr_wire_opt_string(x, &a->metadata) &&
           xdr_wire_opt_string(x, &a->key) && xdr_wire_opt_string(x, &a->uri) && xdr_u_int(x, &a->flags);
}

struct set_vcpus_args {
    struct wire_domain dom;
    uint32_t nvcpus;
};
static bool_t xdr_set_vcpus_args(XDR *x, struct set_vcpus_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_u_int(x, &a->nvcpus);
}

struct set_vcpus_flags_args {
    struct wire_domain dom;
    uint32_t nvcpus, flags;
};
static bool_t xdr_set_vcpus_flags_args(XDR *x, struct set_vcpus_flags_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_u_int(x, &a->nvcpus) && xdr_u_int(x, &a->flags);
}

static struct vsnap_domain *lookup(struct rpc_call *call, const struct wire_domain *wd, GError **error)
{
    return driver_lookup_uuid(call->driver, wd->uuid, wd->name, error);
}

static bool do_get_metadata(struct rpc_call *call, struct get_metadata_args *a, struct wire_string_value *r,
                            GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && rpc_text_reply(driver_get_metadata(call->driver, dom, a->type, a->uri, a->flags, error), r);
}

static bool do_set_metadata(struct rpc_call *call, struct set_metadata_args *a, struct rpc_void *r,
                            GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_set_metadata(call->driver, dom, a->type, a->metadata, a->key, a->uri, a->flags, error);
}

/* virDomainSetVcpus is the live change. */
static bool do_set_vcpus(struct rpc_call *call, struct set_vcpus_args *a, struct rpc_void *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_set_vcpus(call->driver, dom, a->nvcpus, VIR_DOMAIN_AFFECT_LIVE, error);
}

static bool do_set_vcpus_flags(struct rpc_call *call, struct set_vcpus_flags_args *a, struct rpc_void *r,
                               GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_set_vcpus(call->driver, dom, a->nvcpus, a->flags, error);
}

#define P RPC_PROC
const struct proc_entry rpc_config_procs[] = {
    P(PROC_DOMAIN_GET_METADATA, struct get_metadata_args, xdr_get_metadata_args, struct wire_string_value,
      xdr_wire_string_value, do_get_metadata, 0),
    P(PROC_DOMAIN_SET_METADATA, struct set_metadata_args, xdr_set_metadata_args, struct rpc_void, xdr_rpc_void,
      do_set_metadata, PROC_WRITE),
    P(PROC_DOMAIN_SET_VCPUS, struct set_vcpus_args, xdr_set_vcpus_args, struct rpc_void, xdr_rpc_void,
      do_set_vcpus, PROC_WRITE),
    P(PROC_DOMAIN_SET_VCPUS_FLAGS, struct set_vcpus_flags_args, xdr_set_vcpus_flags_args, struct rpc_void,
      xdr_rpc_void, do_set_vcpus_flags, PROC_WRITE),
};
const size_t rpc_config_procs_count = G_N_ELEMENTS(rpc_config_procs);
