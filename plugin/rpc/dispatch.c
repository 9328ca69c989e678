#include "rpc/dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "rpc/api-names.h"
#include "util/virt-error.h"

/* A linear scan of about a hundred entries costs nothing next to a socket
 * round trip, and keeps the tables const with no lookup state to build. */
static const struct proc_entry *find_in(const struct proc_entry *entries, size_t n, int proc)
{
    for (size_t i = 0; i < n; i++)
        if (entries[i].proc == proc)
            return &entries[i];
    return NULL;
}

const struct proc_table rpc_proc_tables[] = {
    {"connect", rpc_connect_procs, &rpc_connect_procs_count},
    {"domain", rpc_domain_procs, &rpc_domain_procs_count},
    {"block", rpc_block_procs, &rpc_block_procs_count},
    {"block job", rpc_block_job_procs, &rpc_block_job_procs_count},
    {"control", rpc_control_procs, &rpc_control_procs_count},
    {"node", rpc_node_procs, &rpc_node_procs_count},
    {"config", rpc_config_procs, &rpc_config_procs_count},
    {"network", rpc_network_procs, &rpc_network_procs_count},
    {"events", rpc_event_procs, &rpc_event_procs_count},
    {"snapshot", rpc_snapshot_procs, &rpc_snapshot_procs_count},
    {"storage pool", rpc_storage_pool_procs, &rpc_storage_pool_procs_count},
    {"storage volume", rpc_storage_vol_procs, &rpc_storage_vol_procs_count},
};
const size_t rpc_proc_tables_count = G_N_ELEMENTS(rpc_proc_tables);

const struct proc_entry *rpc_find_proc(int proc)
{
    for (size_t i = 0; i < rpc_proc_tables_count; i++) {
        const struct proc_table *t = &rpc_proc_tables[i];
        const struct proc_entry *e = find_in(t->entries, *t->count, proc);
        if (e)
            return e;
    }
    return NULL;
}

const char *rpc_unserved_name(int proc)
{
    return rpc_find_proc(proc) ? NULL : rpc_api_name(proc);
}

/* Which VIR_FROM_* a code travels with: configuration problems come from
 * the domain config layer, protocol problems from RPC, the storage
 * driver's own from storage, the rest from the domain driver. */
static int domain_for_code(int code)
{
    switch (code) {
    case VIR_ERR_XML_ERROR:
    case VIR_ERR_XML_DETAIL:
    case VIR_ERR_CONFIG_UNSUPPORTED:
        return VIR_FROM_DOMAIN;
    case VIR_ERR_RPC:
        return VIR_FROM_RPC;
    case VIR_ERR_NO_STORAGE_POOL:
    case VIR_ERR_NO_STORAGE_VOL:
    case VIR_ERR_STORAGE_PROBE_FAILED:
    case VIR_ERR_STORAGE_POOL_BUILT:
    case VIR_ERR_STORAGE_VOL_EXIST:
        return VIR_FROM_STORAGE;
    default:
        return VIR_FROM_DOMAIN;
    }
}

static void send_gerror(struct rpc_client *client, const struct wire_header *hdr,
                        const GError *error)
{
    int code = VIR_ERR_INTERNAL_ERROR;
    if (error->domain == VSNAP_VIR_ERROR)
        code = error->code;
    rpc_send_error_reply(client, hdr, code, domain_for_code(code), error->message);
}

static void reply_unsupported(struct rpc_client *client, const struct wire_header *hdr)
{
    const char *name = rpc_unserved_name(hdr->proc);
    g_autofree char *text =
        name ? g_strdup_printf("%s is not supported by vsnap (procedure %d)", name, hdr->proc)
             : g_strdup_printf("procedure %d is not supported by vsnap", hdr->proc);
    rpc_send_error_reply(client, hdr, VIR_ERR_NO_SUPPORT, VIR_FROM_RPC, text);
}

/* What a served call is called in errors: the API its caller used. */
static const char *call_name(const struct proc_entry *entry)
{
    const char *api = rpc_api_name(entry->proc);
    return api ? api : entry->name;
}

static bool check_access(struct rpc_client *client, const struct proc_entry *entry,
                         const struct wire_header *hdr)
{
    if (!(entry->flags & PROC_BEFORE_OPEN) && !rpc_client_is_opened(client)) {
        rpc_send_error_reply(client, hdr, VIR_ERR_RPC, VIR_FROM_RPC,
                             "connection not open: call CONNECT_OPEN first");
        return false;
    }
    if ((entry->flags & PROC_WRITE) && rpc_client_is_readonly(client)) {
        g_autofree char *text =
            g_strdup_printf("%s is not allowed on a read-only connection", call_name(entry));
        rpc_send_error_reply(client, hdr, VIR_ERR_OPERATION_DENIED, VIR_FROM_RPC, text);
        return false;
    }
    return true;
}

void rpc_dispatch_call(const struct rpc_context *ctx, struct rpc_client *client,
                       const struct wire_header *hdr, const uint8_t *body, size_t len)
{
    const struct proc_entry *entry = rpc_find_proc(hdr->proc);
    if (!entry) {
        reply_unsupported(client, hdr);
        return;
    }
    if (!check_access(client, entry, hdr))
        return;

    void *args = g_malloc0(entry->args_size);
    void *ret = g_malloc0(entry->ret_size);
    XDR xdrs;
    xdrmem_create(&xdrs, (char *)body, len, XDR_DECODE);
    bool decoded = entry->args_filter(&xdrs, args, 0) && xdr_getpos(&xdrs) == len;
    xdr_destroy(&xdrs);
    if (!decoded) {
        g_autofree char *text =
            g_strdup_printf("cannot decode the arguments of %s", call_name(entry));
        rpc_send_error_reply(client, hdr, VIR_ERR_RPC, VIR_FROM_RPC, text);
    } else {
        struct rpc_call call = {
            .client = client, .driver = ctx->driver, .events = ctx->events,
            .streams = ctx->streams, .hdr = hdr,
        };
        g_autoptr(GError) error = NULL;
        if (entry->handler(&call, args, ret, &error)) {
            struct wire_header reply = *hdr;
            reply.type = RPC_REPLY;
            reply.status = RPC_STATUS_OK;
            bool sent = rpc_client_send(client, &reply, entry->ret_filter, ret);
            if (call.after_reply)
                call.after_reply(&call, sent, call.after_data);
        } else {
            g_assert(error);
            send_gerror(client, hdr, error);
        }
    }
    xdr_free(entry->args_filter, args);
    xdr_free(entry->ret_filter, ret);
    g_free(args);
    g_free(ret);
}
