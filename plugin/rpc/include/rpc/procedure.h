/* What a procedure family implements, and all it knows of dispatch: each
 * family (xdr-connect.c, xdr-domain.c, xdr-block.c, xdr-events.c,
 * xdr-snapshot.c, xdr-network.c, xdr-control.c, xdr-config.c, xdr-node.c) exports
 * a table of entries: argument and return types with their XDR filters, the
 * handler, and whether the call changes state (refused on read-only
 * connections). dispatch.c looks calls up in these tables and runs them. */
#pragma once

#include <glib.h>
#include <libvirt/virterror.h>
#include <rpc/xdr.h>
#include <stdbool.h>
#include <stddef.h>

#include "rpc/client.h"
#include "rpc/wire.h"

struct event_registry;
struct stream_registry;
struct vsnap_driver;

struct rpc_call {
    struct rpc_client *client;
    struct vsnap_driver *driver;
    struct event_registry *events;
    struct stream_registry *streams;
    const struct wire_header *hdr;
    /* Set by a handler to act once its reply is on the wire (a stream must
     * not send data before the reply to the call that opened it). */
    void (*after_reply)(struct rpc_call *call, bool sent, void *data);
    void *after_data;
};

typedef bool (*rpc_handler)(struct rpc_call *call, void *args, void *ret, GError **error);

enum proc_flags {
    PROC_WRITE = 1 << 0,         /* changes state: refused on read-only connections */
    PROC_BEFORE_OPEN = 1 << 1,   /* allowed before CONNECT_OPEN */
    PROC_NO_JOB = 1 << 2,        /* a change that never waits for a domain's job (an
                                  * abort of one): may run on the priority workers,
                                  * like calls that change nothing (server.c) */
};

struct proc_entry {
    int proc;
    const char *name;
    size_t args_size;
    xdrproc_t args_filter;
    size_t ret_size;
    xdrproc_t ret_filter;
    rpc_handler handler;
    unsigned flags;
};

#define RPC_PROC(num, argtype, argfilter, rettype, retfilter, fn, fl)                           \
    {                                                                                           \
        .proc = (num), .name = #num, .args_size = sizeof(argtype),                              \
        .args_filter = XDR_PROC(argfilter), .ret_size = sizeof(rettype),                     \
        .ret_filter = XDR_PROC(retfilter), .handler = (rpc_handler)(void (*)(void))(fn), .flags = (fl)       \
    }

extern const struct proc_entry rpc_connect_procs[];
extern const size_t rpc_connect_procs_count;
extern const struct proc_entry rpc_domain_procs[];
extern const size_t rpc_domain_procs_count;
extern const struct proc_entry rpc_config_procs[];
extern const size_t rpc_config_procs_count;
extern const struct proc_entry rpc_node_procs[];
extern const size_t rpc_node_procs_count;
extern const struct proc_entry rpc_control_procs[];
extern const size_t rpc_control_procs_count;
extern const struct proc_entry rpc_block_procs[];
extern const size_t rpc_block_procs_count;
extern const struct proc_entry rpc_block_job_procs[];
extern const size_t rpc_block_job_procs_count;
extern const struct proc_entry rpc_event_procs[];
extern const size_t rpc_event_procs_count;
extern const struct proc_entry rpc_network_procs[];
extern const size_t rpc_network_procs_count;
extern const struct proc_entry rpc_snapshot_procs[];
extern const size_t rpc_snapshot_procs_count;
extern const struct proc_entry rpc_storage_pool_procs[];
extern const size_t rpc_storage_pool_procs_count;
extern const struct proc_entry rpc_storage_vol_procs[];
extern const size_t rpc_storage_vol_procs_count;

/* ---- what handlers of several families share (reply.c) ---- */

/* A list length a client asked for: within [0, limit], else VIR_ERR_RPC. */
bool rpc_check_list_max(int32_t max, uint32_t limit, GError **error);
/* text (g_malloc'd; NULL after a failure) as a string reply; frees it. */
bool rpc_text_reply(char *text, struct wire_string_value *r);
/* The names of the first max items of list (elements of elem_size bytes
 * with a const char * at name_offset) as a string list reply. */
void rpc_names_reply(const GArray *list, size_t elem_size, size_t name_offset, unsigned max,
                     struct wire_string_list *r);
