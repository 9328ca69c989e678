/* Disk procedures: virDomainGetBlockInfo (domblkinfo), virDomainBlockStats
 * and virDomainBlockStatsFlags (domblkstat). The driver answers from the
 * shim's per-disk counters and the disk's files (driver-block.h). */
#include <libvirt/libvirt.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/procedure.h"
#include "driver/driver.h"
#include "driver/driver-block.h"
#include "util/virt-error.h"

struct block_info_args {
    struct wire_domain dom;
    char *path;
    uint32_t flags;
};
static bool_t xdr_block_info_args(XDR *x, struct block_info_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->path) && xdr_u_int(x, &a->flags);
}

struct block_info_ret {
    uint64_t allocation, capacity, physical;
};
static bool_t xdr_block_info_ret(XDR *x, struct block_info_ret *r)
{
    return xdr_uint64_t(x, &r->allocation) && xdr_uint64_t(x, &r->capacity) &&
           xdr_uint64_t(x, &r->physical);
}

struct block_stats_args {
    struct wire_domain dom;
    char *path;
};
static bool_t xdr_block_stats_args(XDR *x, struct block_stats_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->path);
}

struct block_stats_ret {
    int64_t rd_req, rd_bytes, wr_req, wr_bytes, errs;
};
static bool_t xdr_block_stats_ret(XDR *x, struct block_stats_ret *r)
{
    return xdr_int64_t(x, &r->rd_req) && xdr_int64_t(x, &r->rd_bytes) && xdr_int64_t(x, &r->wr_req) &&
           xdr_int64_t(x, &r->wr_bytes) && xdr_int64_t(x, &r->errs);
}

struct block_stats_flags_args {
    struct wire_domain dom;
    char *path;
    int32_t nparams;
    uint32_t flags;
};
static bool_t xdr_block_stats_flags_args(XDR *x, struct block_stats_flags_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->path) && xdr_int(x, &a->nparams) &&
           xdr_u_int(x, &a->flags);
}

struct block_stats_flags_ret {
    struct wire_typed_param_list params;
    int32_t nparams;
};
static bool_t xdr_block_stats_flags_ret(XDR *x, struct block_stats_flags_ret *r)
{
    return xdr_wire_typed_param_list(x, &r->params) && xdr_int(x, &r->nparams);
}

static struct vsnap_domain *lookup(struct rpc_call *call, const struct wire_domain *wd, GError **error)
{
    return driver_lookup_uuid(call->driver, wd->uuid, wd->name, error);
}

static bool no_flags(uint32_t flags, GError **error)
{
    if (flags == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)", flags);
    return false;
}

static bool do_block_info(struct rpc_call *call, struct block_info_args *a, struct block_info_ret *r,
                          GError **error)
{
    if (!no_flags(a->flags, error))
        return false;
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    struct block_info info;
    if (!dom || !driver_block_info(call->driver, dom, a->path, &info, error))
        return false;
    *r = (struct block_info_ret){info.allocation, info.capacity, info.physical};
    return true;
}

static bool block_stats(struct rpc_call *call, const struct wire_domain *wd, const char *path,
                        struct block_stats *s, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, wd, error);
    return dom && driver_block_stats(call->driver, dom, path, s, error);
}

static bool do_block_stats(struct rpc_call *call, struct block_stats_args *a, struct block_stats_ret *r,
                           GError **error)
{
    struct block_stats s = {0};
    if (!block_stats(call, &a->dom, a->path, &s, error))
        return false;
    *r = (struct block_stats_ret){(int64_t)s.rd_reqs, (int64_t)s.rd_bytes, (int64_t)s.wr_reqs,
                                  (int64_t)s.wr_bytes, (int64_t)s.errors};
    block_stats_clear(&s);
    return true;
}

/* The fields libvirt's QEMU driver gives without timing: the shim counts
 * requests and bytes, not the time they took. */
#define BLOCK_STATS_FIELDS 6

static bool do_block_stats_flags(struct rpc_call *call, struct block_stats_flags_args *a,
                                 struct block_stats_flags_ret *r, GError **error)
{
    /* VIR_TYPED_PARAM_STRING_OKAY is set by every client: nothing here is a string. */
    if (!no_flags(a->flags & ~(uint32_t)VIR_TYPED_PARAM_STRING_OKAY, error))
        return false;
    if (a->nparams < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "nparams must not be negative");
        return false;
    }
    struct block_stats s = {0};
    if (!block_stats(call, &a->dom, a->path, &s, error))
        return false;
    block_stats_clear(&s);
    /* nparams 0 asks how many there are (libvirt's two-call protocol). */
    unsigned n = MIN((unsigned)a->nparams, BLOCK_STATS_FIELDS);
    r->nparams = a->nparams == 0 ? BLOCK_STATS_FIELDS : (int32_t)n;
    r->params.len = n;
    r->params.val = calloc(MAX(n, 1), sizeof(struct wire_typed_param));
    const struct {
        const char *field;
        uint64_t value;
    } all[BLOCK_STATS_FIELDS] = {
        {VIR_DOMAIN_BLOCK_STATS_READ_REQ, s.rd_reqs},     {VIR_DOMAIN_BLOCK_STATS_READ_BYTES, s.rd_bytes},
        {VIR_DOMAIN_BLOCK_STATS_WRITE_REQ, s.wr_reqs},    {VIR_DOMAIN_BLOCK_STATS_WRITE_BYTES, s.wr_bytes},
        {VIR_DOMAIN_BLOCK_STATS_FLUSH_REQ, s.fl_reqs},    {VIR_DOMAIN_BLOCK_STATS_ERRS, s.errors},
    };
    for (unsigned i = 0; i < n; i++)
        wire_param_llong(&r->params.val[i], all[i].field, (int64_t)all[i].value);
    return true;
}

struct block_resize_args {
    struct wire_domain dom;
    char *disk;
    uint64_t size;
    uint32_t flags;
};
static bool_t xdr_block_resize_args(XDR *x, struct block_resize_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->disk) && xdr_uint64_t(x, &a->size) &&
           xdr_u_int(x, &a->flags);
}

static bool do_block_resize(struct rpc_call *call, struct block_resize_args *a, struct rpc_void *r, GError **error)
{
    (void)r;
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_block_resize(call->driver, dom, a->disk, a->size, a->flags, error);
}

/* remote_domain_get_disk_errors_args {dom, maxerrors, flags} -> {errors<256>: {disk, error}, nerrors}. */
#define DISK_ERRORS_MAX 256
struct disk_errors_args {
    struct wire_domain dom;
    uint32_t maxerrors, flags;
};
static bool_t xdr_disk_errors_args(XDR *x, struct disk_errors_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_u_int(x, &a->maxerrors) && xdr_u_int(x, &a->flags);
}

struct disk_error {
    char *disk;
    int32_t error;
};
static bool_t xdr_disk_error(XDR *x, struct disk_error *e)
{
    return xdr_wire_string(x, &e->disk) && xdr_int(x, &e->error);
}

struct disk_errors_ret {
    struct disk_error *val;
    u_int len;
    int32_t nerrors;
};
static bool_t xdr_disk_errors_ret(XDR *x, struct disk_errors_ret *r)
{
    return xdr_array(x, (char **)&r->val, &r->len, DISK_ERRORS_MAX, sizeof(struct disk_error),
                     XDR_PROC(xdr_disk_error)) &&
           xdr_int(x, &r->nerrors);
}

/* maxerrors 0 asks how many (libvirt's two-call protocol). */
static bool do_disk_errors(struct rpc_call *call, struct disk_errors_args *a, struct disk_errors_ret *r,
                           GError **error)
{
    if (!no_flags(a->flags, error))
        return false;
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    g_auto(GStrv) targets = NULL;
    g_autofree int *codes = NULL;
    size_t n = dom ? driver_disk_errors(call->driver, dom, &targets, &codes, error) : (size_t)-1;
    if (n == (size_t)-1)
        return false;
    unsigned give = a->maxerrors == 0 ? 0 : (unsigned)MIN(n, MIN(a->maxerrors, DISK_ERRORS_MAX));
    r->len = give;
    r->val = calloc(MAX(give, 1), sizeof(struct disk_error));
    for (unsigned i = 0; i < give; i++)
        r->val[i] = (struct disk_error){ .disk = strdup(targets[i]), .error = codes[i] };
    r->nerrors = a->maxerrors == 0 ? (int32_t)n : (int32_t)give;
    return true;
}

#define P RPC_PROC
const struct proc_entry rpc_block_procs[] = {
    P(PROC_DOMAIN_GET_BLOCK_INFO, struct block_info_args, xdr_block_info_args, struct block_info_ret,
      xdr_block_info_ret, do_block_info, 0),
    P(PROC_DOMAIN_BLOCK_STATS, struct block_stats_args, xdr_block_stats_args, struct block_stats_ret,
      xdr_block_stats_ret, do_block_stats, 0),
    P(PROC_DOMAIN_BLOCK_RESIZE, struct block_resize_args, xdr_block_resize_args, struct rpc_void, xdr_rpc_void,
      do_block_resize, PROC_WRITE),
    P(PROC_DOMAIN_GET_DISK_ERRORS, struct disk_errors_args, xdr_disk_errors_args, struct disk_errors_ret,
      xdr_disk_errors_ret, do_disk_errors, 0),
    P(PROC_DOMAIN_BLOCK_STATS_FLAGS, struct block_stats_flags_args, xdr_block_stats_flags_args,
      struct block_stats_flags_ret, xdr_block_stats_flags_ret, do_block_stats_flags, 0),
};
const size_t rpc_block_procs_count = G_N_ELEMENTS(rpc_block_procs);
