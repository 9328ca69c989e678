/* Control procedures: virDomainReset, virDomainInjectNMI, virDomainSendKey
 * (driver-control.h), virDomainCoreDump and virDomainCoreDumpWithFormat
 * (persist/dump.h), and virDomainScreenshot, refused naming why. */
#include <libvirt/libvirt.h>
#include <stdlib.h>

#include "rpc/procedure.h"
#include "driver/driver.h"
#include "driver/driver-control.h"
#include "persist/dump.h"
#include "util/virt-error.h"

struct send_key_args {
    struct wire_domain dom;
    uint32_t codeset, holdtime;
    struct {
        unsigned len;
        uint32_t *val;
    } keycodes;
    uint32_t flags;
};
static bool_t xdr_send_key_args(XDR *x, struct send_key_args *a)
{
    char **codes = (char **)&a->keycodes.val;
    /* remote_protocol.x bounds the list at REMOTE_DOMAIN_SEND_KEY_MAX (16). */
    return xdr_wire_domain(x, &a->dom) && xdr_u_int(x, &a->codeset) && xdr_u_int(x, &a->holdtime) &&
           xdr_array(x, codes, &a->keycodes.len, VIR_DOMAIN_SEND_KEY_MAX_KEYS, sizeof(uint32_t),
                     (xdrproc_t)xdr_u_int) &&
           xdr_u_int(x, &a->flags);
}

static struct vsnap_domain *lookup(struct rpc_call *call, const struct wire_domain *wd, GError **error)
{
    return driver_lookup_uuid(call->driver, wd->uuid, wd->name, error);
}

static bool do_reset(struct rpc_call *call, struct wire_domain_flags *a, struct rpc_void *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_reset(call->driver, dom, a->flags, error);
}

static bool do_inject_nmi(struct rpc_call *call, struct wire_domain_flags *a, struct rpc_void *r,
                          GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_inject_nmi(call->driver, dom, a->flags, error);
}

static bool do_send_key(struct rpc_call *call, struct send_key_args *a, struct rpc_void *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_send_key(call->driver, dom, (int)a->codeset, a->holdtime, a->keycodes.val,
                                  a->keycodes.len, a->flags, error);
}

struct core_dump_args {
    struct wire_domain dom;
    char *to;
    uint32_t flags;
};
static bool_t xdr_core_dump_args(XDR *x, struct core_dump_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->to) && xdr_u_int(x, &a->flags);
}

struct core_dump_format_args {
    struct wire_domain dom;
    char *to;
    uint32_t format, flags;
};
static bool_t xdr_core_dump_format_args(XDR *x, struct core_dump_format_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->to) && xdr_u_int(x, &a->format) &&
           xdr_u_int(x, &a->flags);
}

static bool do_core_dump(struct rpc_call *call, struct core_dump_args *a, struct rpc_void *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && dump_memory(call->driver, dom, a->to, VIR_DOMAIN_CORE_DUMP_FORMAT_RAW, a->flags, error);
}

static bool do_core_dump_format(struct rpc_call *call, struct core_dump_format_args *a, struct rpc_void *r,
                                GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && dump_memory(call->driver, dom, a->to, a->format, a->flags, error);
}

struct screenshot_args {
    struct wire_domain dom;
    uint32_t screen, flags;
};
static bool_t xdr_screenshot_args(XDR *x, struct screenshot_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_u_int(x, &a->screen) && xdr_u_int(x, &a->flags);
}

/* Refused before any stream data: the client's stream ends with the error. */
static bool do_screenshot(struct rpc_call *call, struct screenshot_args *a, struct wire_string_value *r,
                          GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    if (dom)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_UNSUPPORTED,
                    "domain '%s' has no display device to take a screenshot of: vsnap microVMs have no "
                    "graphics (their console is the serial port: virsh console)", dom->name);
    return false;
}

#define P RPC_PROC
const struct proc_entry rpc_control_procs[] = {
    P(PROC_DOMAIN_RESET, struct wire_domain_flags, xdr_wire_domain_flags, struct rpc_void, xdr_rpc_void,
      do_reset, PROC_WRITE),
    P(PROC_DOMAIN_INJECT_NMI, struct wire_domain_flags, xdr_wire_domain_flags, struct rpc_void, xdr_rpc_void,
      do_inject_nmi, PROC_WRITE),
    P(PROC_DOMAIN_SEND_KEY, struct send_key_args, xdr_send_key_args, struct rpc_void, xdr_rpc_void,
      do_send_key, PROC_WRITE),
    P(PROC_DOMAIN_CORE_DUMP, struct core_dump_args, xdr_core_dump_args, struct rpc_void, xdr_rpc_void,
      do_core_dump, PROC_WRITE),
    P(PROC_DOMAIN_CORE_DUMP_WITH_FORMAT, struct core_dump_format_args, xdr_core_dump_format_args,
      struct rpc_void, xdr_rpc_void, do_core_dump_format, PROC_WRITE),
    P(PROC_DOMAIN_SCREENSHOT, struct screenshot_args, xdr_screenshot_args, struct wire_string_value,
      xdr_wire_opt_string_value, do_screenshot, 0),
};
const size_t rpc_control_procs_count = G_N_ELEMENTS(rpc_control_procs);
