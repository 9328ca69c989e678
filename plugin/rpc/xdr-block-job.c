/* Block job procedures: virDomainBlockPull, virDomainBlockRebase, virDomainBlockCommit,
 * virDomainGetBlockJobInfo, virDomainBlockJobSetSpeed and
 * virDomainBlockJobAbort (virsh blockpull, blockjob). The driver runs them
 * (driver-block-job.h); the events are event-registry.c's. */
#include <libvirt/libvirt.h>

#include "rpc/procedure.h"
#include "driver/driver.h"
#include "driver/driver-block-job.h"
#include "util/virt-error.h"

/* remote_domain_block_pull_args and _block_job_set_speed_args: dom, path, bandwidth, flags. */
struct path_bandwidth_args {
    struct wire_domain dom;
    char *path;
    uint64_t bandwidth;
    uint32_t flags;
};
static bool_t xdr_path_bandwidth_args(XDR *x, struct path_bandwidth_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->path) && xdr_uint64_t(x, &a->bandwidth) &&
           xdr_u_int(x, &a->flags);
}

struct rebase_args {
    struct wire_domain dom;
    char *path;
    char *base;   /* optional */
    uint64_t bandwidth;
    uint32_t flags;
};
static bool_t xdr_rebase_args(XDR *x, struct rebase_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->path) && xdr_wire_opt_string(x, &a->base) &&
           xdr_uint64_t(x, &a->bandwidth) && xdr_u_int(x, &a->flags);
}

struct commit_args {
    struct wire_domain dom;
    char *disk;
    char *base, *top;   /* optional */
    uint64_t bandwidth;
    uint32_t flags;
};
static bool_t xdr_commit_args(XDR *x, struct commit_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->disk) && xdr_wire_opt_string(x, &a->base) &&
           xdr_wire_opt_string(x, &a->top) && xdr_uint64_t(x, &a->bandwidth) && xdr_u_int(x, &a->flags);
}

/* remote_domain_block_job_abort_args and _get_block_job_info_args: dom, path, flags. */
struct path_flags_args {
    struct wire_domain dom;
    char *path;
    uint32_t flags;
};
static bool_t xdr_path_flags_args(XDR *x, struct path_flags_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->path) && xdr_u_int(x, &a->flags);
}

struct job_info_ret {
    int32_t found, type;
    uint64_t bandwidth, cur, end;
};
static bool_t xdr_job_info_ret(XDR *x, struct job_info_ret *r)
{
    return xdr_int(x, &r->found) && xdr_int(x, &r->type) && xdr_uint64_t(x, &r->bandwidth) &&
           xdr_uint64_t(x, &r->cur) && xdr_uint64_t(x, &r->end);
}

static struct vsnap_domain *lookup(struct rpc_call *call, const struct wire_domain *wd, GError **error)
{
    return driver_lookup_uuid(call->driver, wd->uuid, wd->name, error);
}

static bool do_pull(struct rpc_call *call, struct path_bandwidth_args *a, struct rpc_void *r, GError **error)
{
    (void)r;
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_block_pull(call->driver, dom, a->path, a->bandwidth, a->flags, error);
}

static bool do_rebase(struct rpc_call *call, struct rebase_args *a, struct rpc_void *r, GError **error)
{
    (void)r;
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_block_rebase(call->driver, dom, a->path, a->base, a->bandwidth, a->flags, error);
}

static bool do_commit(struct rpc_call *call, struct commit_args *a, struct rpc_void *r, GError **error)
{
    (void)r;
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_block_commit(call->driver, dom, a->disk, a->base, a->top, a->bandwidth, a->flags, error);
}

static bool do_set_speed(struct rpc_call *call, struct path_bandwidth_args *a, struct rpc_void *r, GError **error)
{
    (void)r;
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_block_job_set_speed(call->driver, dom, a->path, a->bandwidth, a->flags, error);
}

static bool do_abort(struct rpc_call *call, struct path_flags_args *a, struct rpc_void *r, GError **error)
{
    (void)r;
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_block_job_abort(call->driver, dom, a->path, a->flags, error);
}

static bool do_job_info(struct rpc_call *call, struct path_flags_args *a, struct job_info_ret *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    struct block_job_info info = {0};
    bool found = false;
    if (!dom || !driver_block_job_info(call->driver, dom, a->path, a->flags, &info, &found, error))
        return false;
    *r = (struct job_info_ret){ .found = found, .type = info.type, .bandwidth = info.bandwidth,
                                .cur = info.cur, .end = info.end };
    return true;
}

#define P RPC_PROC
const struct proc_entry rpc_block_job_procs[] = {
    P(PROC_DOMAIN_BLOCK_PULL, struct path_bandwidth_args, xdr_path_bandwidth_args, struct rpc_void, xdr_rpc_void,
      do_pull, PROC_WRITE),
    P(PROC_DOMAIN_BLOCK_REBASE, struct rebase_args, xdr_rebase_args, struct rpc_void, xdr_rpc_void, do_rebase,
      PROC_WRITE),
    P(PROC_DOMAIN_BLOCK_COMMIT, struct commit_args, xdr_commit_args, struct rpc_void, xdr_rpc_void, do_commit,
      PROC_WRITE),
    P(PROC_DOMAIN_BLOCK_JOB_SET_SPEED, struct path_bandwidth_args, xdr_path_bandwidth_args, struct rpc_void,
      xdr_rpc_void, do_set_speed, PROC_WRITE | PROC_NO_JOB),
    P(PROC_DOMAIN_BLOCK_JOB_ABORT, struct path_flags_args, xdr_path_flags_args, struct rpc_void, xdr_rpc_void,
      do_abort, PROC_WRITE | PROC_NO_JOB),
    P(PROC_DOMAIN_GET_BLOCK_JOB_INFO, struct path_flags_args, xdr_path_flags_args, struct job_info_ret,
      xdr_job_info_ret, do_job_info, 0),
};
const size_t rpc_block_job_procs_count = G_N_ELEMENTS(rpc_block_job_procs);
