/* Host procedures: virNodeGetMemoryStats (nodememstats), virNodeGetCPUStats
 * (nodecpustats), virConnectGetSysinfo (sysinfo) and
 * virNodeGetCellsFreeMemory (freecell --cellno, --all), answered from the
 * host's files (driver/node-stats.h). */
#include <libvirt/libvirt.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/procedure.h"
#include "driver/node-stats.h"
#include "util/virt-error.h"

/* remote_protocol.x's REMOTE_NODE_CPU_STATS_MAX, REMOTE_NODE_MEMORY_STATS_MAX
 * and REMOTE_NODE_MAX_CELLS. */
#define NODE_STATS_WIRE_MAX 16
#define NODE_CELLS_WIRE_MAX 1024

/* { remote_nonnull_string field; unsigned hyper value; } */
struct node_stat_wire {
    char *field;
    uint64_t value;
};
static bool_t xdr_node_stat_wire(XDR *x, struct node_stat_wire *s)
{
    return xdr_wire_string(x, &s->field) && xdr_uint64_t(x, &s->value);
}

struct node_stats_ret {
    struct {
        unsigned len;
        struct node_stat_wire *val;
    } params;
    int32_t nparams;
};
static bool_t xdr_node_stats_ret(XDR *x, struct node_stats_ret *r)
{
    char **list = (char **)&r->params.val;
    return xdr_array(x, list, &r->params.len, NODE_STATS_WIRE_MAX, sizeof(struct node_stat_wire),
                     (xdrproc_t)xdr_node_stat_wire) &&
           xdr_int(x, &r->nparams);
}

struct cpu_stats_args {
    int32_t cpu, nparams;
    uint32_t flags;
};
static bool_t xdr_cpu_stats_args(XDR *x, struct cpu_stats_args *a)
{
    return xdr_int(x, &a->cpu) && xdr_int(x, &a->nparams) && xdr_u_int(x, &a->flags);
}

struct memory_stats_args {
    int32_t nparams, cell;
    uint32_t flags;
};
static bool_t xdr_memory_stats_args(XDR *x, struct memory_stats_args *a)
{
    return xdr_int(x, &a->nparams) && xdr_int(x, &a->cell) && xdr_u_int(x, &a->flags);
}

struct cells_free_args {
    int32_t start, max;
};
static bool_t xdr_cells_free_args(XDR *x, struct cells_free_args *a)
{
    return xdr_int(x, &a->start) && xdr_int(x, &a->max);
}

struct cells_free_ret {
    struct {
        unsigned len;
        uint64_t *val;
    } cells;
};
static bool_t xdr_cells_free_ret(XDR *x, struct cells_free_ret *r)
{
    char **list = (char **)&r->cells.val;
    return xdr_array(x, list, &r->cells.len, NODE_CELLS_WIRE_MAX, sizeof(uint64_t), (xdrproc_t)xdr_uint64_t);
}

static bool check_call(int32_t nparams, uint32_t flags, GError **error)
{
    if (flags) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)", flags);
        return false;
    }
    if (nparams < 0 || nparams > NODE_STATS_WIRE_MAX) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_RPC, "nparams too large");
        return false;
    }
    return true;
}

/* libvirt's two-call protocol: nparams 0 asks how many there are. */
static void stats_reply(const struct node_stat *stats, unsigned n, int32_t nparams, struct node_stats_ret *r)
{
    unsigned k = nparams == 0 ? 0 : MIN(n, (unsigned)nparams);
    r->nparams = nparams == 0 ? (int32_t)n : (int32_t)k;
    r->params.len = k;
    r->params.val = calloc(MAX(k, 1), sizeof(struct node_stat_wire));
    for (unsigned i = 0; i < k; i++)
        r->params.val[i] = (struct node_stat_wire){strdup(stats[i].field), stats[i].value};
}

static bool do_cpu_stats(struct rpc_call *call, struct cpu_stats_args *a, struct node_stats_ret *r,
                         GError **error)
{
    struct node_stat stats[NODE_STATS_MAX];
    unsigned n;
    if (!check_call(a->nparams, a->flags, error) || !node_cpu_stats("/proc", a->cpu, stats, &n, error))
        return false;
    stats_reply(stats, n, a->nparams, r);
    return true;
}

static bool do_memory_stats(struct rpc_call *call, struct memory_stats_args *a, struct node_stats_ret *r,
                            GError **error)
{
    struct node_stat stats[NODE_STATS_MAX];
    unsigned n;
    if (!check_call(a->nparams, a->flags, error) ||
        !node_memory_stats("/proc", "/sys", a->cell, stats, &n, error))
        return false;
    stats_reply(stats, n, a->nparams, r);
    return true;
}

/* Its one argument is the flags (an unsigned int: the same four bytes). */
static bool do_sysinfo(struct rpc_call *call, struct wire_int_value *a, struct wire_string_value *r,
                       GError **error)
{
    if (a->value) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)", (unsigned)a->value);
        return false;
    }
    return rpc_text_reply(node_sysinfo_xml("/sys/class/dmi/id", error), r);
}

static bool do_cells_free(struct rpc_call *call, struct cells_free_args *a, struct cells_free_ret *r,
                          GError **error)
{
    if (a->max <= 0 || a->max > NODE_CELLS_WIRE_MAX) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_RPC, "maxCells out of range (1-%d)", NODE_CELLS_WIRE_MAX);
        return false;
    }
    uint64_t *cells = calloc((size_t)a->max, sizeof(uint64_t));
    unsigned n = 0;
    if (!node_cells_free_memory("/proc", "/sys", a->start, (unsigned)a->max, cells, &n, error)) {
        free(cells);
        return false;
    }
    r->cells.val = cells;
    r->cells.len = n;
    return true;
}

#define P RPC_PROC
const struct proc_entry rpc_node_procs[] = {
    P(PROC_NODE_GET_CPU_STATS, struct cpu_stats_args, xdr_cpu_stats_args, struct node_stats_ret,
      xdr_node_stats_ret, do_cpu_stats, 0),
    P(PROC_NODE_GET_MEMORY_STATS, struct memory_stats_args, xdr_memory_stats_args, struct node_stats_ret,
      xdr_node_stats_ret, do_memory_stats, 0),
    P(PROC_CONNECT_GET_SYSINFO, struct wire_int_value, xdr_wire_int_value, struct wire_string_value,
      xdr_wire_string_value, do_sysinfo, 0),
    P(PROC_NODE_GET_CELLS_FREE_MEMORY, struct cells_free_args, xdr_cells_free_args, struct cells_free_ret,
      xdr_cells_free_ret, do_cells_free, 0),
};
const size_t rpc_node_procs_count = G_N_ELEMENTS(rpc_node_procs);
