/* Connection-level procedures: handshake, identity of the driver and host,
 * domain listings. */
#include <libvirt/libvirt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rpc/procedure.h"
#include "driver/driver.h"
#include "driver/node.h"
#include "limits/vsnap-limits.h"
#include "vsnap-config.h"
#include "util/virt-error.h"

/* ---- argument and return types with their XDR filters ---- */

struct open_args {
    char *name;
    uint32_t flags;
};
static bool_t xdr_open_args(XDR *x, struct open_args *a)
{
    return xdr_wire_opt_string(x, &a->name) && xdr_u_int(x, &a->flags);
}

struct auth_list_ret {
    unsigned len;
    int32_t *types;
};
static bool_t xdr_auth_list_ret(XDR *x, struct auth_list_ret *r)
{
    return xdr_array(x, (char **)&r->types, &r->len, 20, sizeof(int32_t), XDR_PROC(xdr_int));
}

struct node_info_ret {
    char model[32];
    uint64_t memory;
    int32_t cpus, mhz, nodes, sockets, cores, threads;
};
/* char model[32] travels as 32 XDR chars of 4 bytes each. */
static bool_t xdr_node_info_ret(XDR *x, struct node_info_ret *r)
{
    return xdr_vector(x, r->model, 32, sizeof(char), XDR_PROC(xdr_char)) &&
           xdr_uint64_t(x, &r->memory) && xdr_int(x, &r->cpus) && xdr_int(x, &r->mhz) &&
           xdr_int(x, &r->nodes) && xdr_int(x, &r->sockets) && xdr_int(x, &r->cores) &&
           xdr_int(x, &r->threads);
}

struct list_all_ret {
    struct wire_domain_list domains;
    uint32_t ret;
};
static bool_t xdr_list_all_ret(XDR *x, struct list_all_ret *r)
{
    return xdr_wire_domain_list(x, &r->domains) && xdr_u_int(x, &r->ret);
}

struct id_list_ret {
    unsigned len;
    int32_t *ids;
};
static bool_t xdr_id_list_ret(XDR *x, struct id_list_ret *r)
{
    return xdr_array(x, (char **)&r->ids, &r->len, RPC_LIST_MAX, sizeof(int32_t),
                     XDR_PROC(xdr_int));
}

struct security_model_ret {
    unsigned model_len;
    char *model;
    unsigned doi_len;
    char *doi;
};
static bool_t xdr_security_model_ret(XDR *x, struct security_model_ret *r)
{
    return xdr_array(x, &r->model, &r->model_len, 256, sizeof(char), XDR_PROC(xdr_char)) &&
           xdr_array(x, &r->doi, &r->doi_len, 256, sizeof(char), XDR_PROC(xdr_char));
}

struct cpu_map_args {
    int32_t need_map, need_online;
    uint32_t flags;
};
static bool_t xdr_cpu_map_args(XDR *x, struct cpu_map_args *a)
{
    return xdr_int(x, &a->need_map) && xdr_int(x, &a->need_online) && xdr_u_int(x, &a->flags);
}

struct cpu_map_ret {
    unsigned map_len;
    char *map;
    uint32_t online;
    int32_t ret;
};
static bool_t xdr_cpu_map_ret(XDR *x, struct cpu_map_ret *r)
{
    return xdr_bytes(x, &r->map, &r->map_len, 2048) && xdr_u_int(x, &r->online) &&
           xdr_int(x, &r->ret);
}

struct domcaps_args {
    char *emulatorbin, *arch, *machine, *virttype;
    uint32_t flags;
};
static bool_t xdr_domcaps_args(XDR *x, struct domcaps_args *a)
{
    return xdr_wire_opt_string(x, &a->emulatorbin) && xdr_wire_opt_string(x, &a->arch) &&
           xdr_wire_opt_string(x, &a->machine) && xdr_wire_opt_string(x, &a->virttype) &&
           xdr_u_int(x, &a->flags);
}

/* ---- handlers ---- */

static bool do_auth_list(struct rpc_call *call, struct rpc_void *args, struct auth_list_ret *ret,
                         GError **error)
{
    ret->len = 1;
    ret->types = calloc(1, sizeof(int32_t));
    ret->types[0] = REMOTE_AUTH_NONE;
    return true;
}

static bool do_supports_feature(struct rpc_call *call, struct wire_int_value *args,
                                struct wire_int_value *ret, GError **error)
{
    switch (args->value) {
    case FEATURE_REMOTE:
    case FEATURE_TYPED_PARAM_STRING:
    case FEATURE_PROGRAM_KEEPALIVE:
    case FEATURE_REMOTE_EVENT_CALLBACK:
    case FEATURE_REMOTE_CLOSE_CALLBACK:
        ret->value = 1;
        break;
    default:
        ret->value = 0;
    }
    return true;
}

static bool do_open(struct rpc_call *call, struct open_args *args, struct rpc_void *ret,
                    GError **error)
{
    /* Any vsnap URI (vsnap:///system, vsnap:///session, or none) reaches us
     * only because the client chose this socket. */
    if (args->name && *args->name && !g_str_has_prefix(args->name, "vsnap:")) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_CONNECT,
                    "virtvsnapd serves vsnap:/// URIs, not '%s'", args->name);
        return false;
    }
    rpc_client_set_opened(call->client, args->flags & VIR_CONNECT_RO);
    return true;
}

static bool do_nothing(struct rpc_call *call, struct rpc_void *args, struct rpc_void *ret,
                       GError **error)
{
    return true;
}

static bool do_get_type(struct rpc_call *call, struct rpc_void *args, struct wire_string_value *ret,
                        GError **error)
{
    ret->value = strdup("vsnap");
    return true;
}

/* major * 1,000,000 + minor * 1,000 + micro, as libvirt encodes versions. */
static uint64_t encoded_version(const char *text)
{
    unsigned major = 0, minor = 0, micro = 0;
    sscanf(text, "%u.%u.%u", &major, &minor, &micro);
    return major * 1000000ULL + minor * 1000ULL + micro;
}

static bool do_get_version(struct rpc_call *call, struct rpc_void *args, struct wire_u64_value *ret,
                           GError **error)
{
    ret->value = encoded_version(VSNAP_VERSION);
    return true;
}

static bool do_get_lib_version(struct rpc_call *call, struct rpc_void *args,
                               struct wire_u64_value *ret, GError **error)
{
    /* The protocol level we speak is the one of the headers we build with. */
    ret->value = LIBVIR_VERSION_NUMBER;
    return true;
}

static bool do_get_hostname(struct rpc_call *call, struct rpc_void *args,
                            struct wire_string_value *ret, GError **error)
{
    ret->value = strdup(call->driver->hostname);
    return true;
}

static bool do_get_uri(struct rpc_call *call, struct rpc_void *args, struct wire_string_value *ret,
                       GError **error)
{
    ret->value = strdup(call->driver->paths.privileged ? "vsnap:///system" : "vsnap:///session");
    return true;
}

static bool do_get_capabilities(struct rpc_call *call, struct rpc_void *args,
                                struct wire_string_value *ret, GError **error)
{
    g_autofree char *xml = driver_capabilities(call->driver, error);
    if (!xml)
        return false;
    ret->value = strdup(xml);
    return true;
}

static bool do_domain_capabilities(struct rpc_call *call, struct domcaps_args *args,
                                   struct wire_string_value *ret, GError **error)
{
    if (args->flags) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)",
                    args->flags);
        return false;
    }
    g_autofree char *xml = driver_domain_capabilities(call->driver, args->emulatorbin, args->arch,
                                                      args->machine, args->virttype, error);
    if (!xml)
        return false;
    ret->value = strdup(xml);
    return true;
}

static bool do_node_get_info(struct rpc_call *call, struct rpc_void *args,
                             struct node_info_ret *ret, GError **error)
{
    struct node_info info;
    if (!node_get_info(&info, error))
        return false;
    memcpy(ret->model, info.model, sizeof(ret->model));
    ret->memory = info.memory_kib;
    ret->cpus = info.cpus;
    ret->mhz = info.mhz;
    ret->nodes = info.nodes;
    ret->sockets = info.sockets;
    ret->cores = info.cores;
    ret->threads = info.threads;
    return true;
}

static bool do_one(struct rpc_call *call, struct rpc_void *args, struct wire_int_value *ret,
                   GError **error)
{
    /* IS_SECURE: a local UNIX socket is as secure as a connection gets. */
    ret->value = 1;
    return true;
}

static bool do_get_max_vcpus(struct rpc_call *call, struct wire_string_value *args,
                             struct wire_int_value *ret, GError **error)
{
    if (args->value && g_ascii_strcasecmp(args->value, "kvm") != 0 &&
        g_ascii_strcasecmp(args->value, "vsnap") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                    "unknown virtualization type '%s'", args->value);
        return false;
    }
    ret->value = VSNAP_MAX_VCPUS;   /* the shim's limit */
    return true;
}

static bool do_list_all(struct rpc_call *call, struct wire_list_all_args *args,
                        struct list_all_ret *ret, GError **error)
{
    g_autoptr(GPtrArray) doms = driver_list(call->driver, args->flags);
    ret->ret = doms->len;
    if (!args->need_results)
        return true;
    ret->domains.len = doms->len;
    ret->domains.val = calloc(doms->len ? doms->len : 1, sizeof(struct wire_domain));
    for (guint i = 0; i < doms->len; i++) {
        struct vsnap_domain *dom = doms->pdata[i];
        g_mutex_lock(&dom->lock);
        wire_domain_set(&ret->domains.val[i], dom->name, dom->uuid, dom->id);
        g_mutex_unlock(&dom->lock);
    }
    return true;
}

static bool do_num_of_domains(struct rpc_call *call, struct rpc_void *args,
                              struct wire_int_value *ret, GError **error)
{
    g_autoptr(GPtrArray) doms = driver_list(call->driver, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
    ret->value = doms->len;
    return true;
}

static bool do_num_of_defined(struct rpc_call *call, struct rpc_void *args,
                              struct wire_int_value *ret, GError **error)
{
    g_autoptr(GPtrArray) doms = driver_list(call->driver, VIR_CONNECT_LIST_DOMAINS_INACTIVE);
    ret->value = doms->len;
    return true;
}

static bool do_list_domains(struct rpc_call *call, struct wire_int_value *args,
                            struct id_list_ret *ret, GError **error)
{
    if (!rpc_check_list_max(args->value, RPC_LIST_MAX, error))
        return false;
    g_autoptr(GPtrArray) doms = driver_list(call->driver, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
    ret->len = MIN((guint)args->value, doms->len);
    ret->ids = calloc(ret->len ? ret->len : 1, sizeof(int32_t));
    for (unsigned i = 0; i < ret->len; i++) {
        struct vsnap_domain *dom = doms->pdata[i];
        g_mutex_lock(&dom->lock);
        ret->ids[i] = dom->id;
        g_mutex_unlock(&dom->lock);
    }
    return true;
}

static bool do_list_defined(struct rpc_call *call, struct wire_int_value *args,
                            struct wire_string_list *ret, GError **error)
{
    if (!rpc_check_list_max(args->value, RPC_LIST_MAX, error))
        return false;
    g_autoptr(GPtrArray) doms = driver_list(call->driver, VIR_CONNECT_LIST_DOMAINS_INACTIVE);
    ret->len = MIN((guint)args->value, doms->len);
    ret->val = calloc(ret->len ? ret->len : 1, sizeof(char *));
    for (unsigned i = 0; i < ret->len; i++)
        ret->val[i] = strdup(((struct vsnap_domain *)doms->pdata[i])->name);
    return true;
}

/* Free memory in bytes: MemAvailable (what a new VM can get) as libvirt's
 * virNodeGetFreeMemory reports it for a one-node host. */
static bool do_free_memory(struct rpc_call *call, struct rpc_void *args, struct wire_u64_value *ret,
                           GError **error)
{
    g_autofree char *text = NULL;
    const char *line;
    if (!g_file_get_contents("/proc/meminfo", &text, NULL, NULL) ||
        !(line = strstr(text, "MemAvailable:"))) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "cannot read MemAvailable from /proc/meminfo");
        return false;
    }
    ret->value = g_ascii_strtoull(line + strlen("MemAvailable:"), NULL, 10) * 1024;
    return true;
}

static bool do_security_model(struct rpc_call *call, struct rpc_void *args,
                              struct security_model_ret *ret, GError **error)
{
    /* No security driver: empty model and DOI, each just the terminator. */
    ret->model_len = ret->doi_len = 1;
    ret->model = calloc(1, 1);
    ret->doi = calloc(1, 1);
    return true;
}

/* Host CPUs: count, and a bitmap of the online ones (python's vcpus() asks). */
static bool do_node_cpu_map(struct rpc_call *call, struct cpu_map_args *args,
                            struct cpu_map_ret *ret, GError **error)
{
    int configured = (int)sysconf(_SC_NPROCESSORS_CONF);
    g_autofree char *online_text = NULL;
    ret->ret = configured;
    ret->map_len = args->need_map ? (unsigned)(configured + 7) / 8 : 0;
    ret->map = calloc(MAX(ret->map_len, 1), 1);
    /* /sys/devices/system/cpu/online is a list like "0-3,6". */
    if (g_file_get_contents("/sys/devices/system/cpu/online", &online_text, NULL, NULL)) {
        g_auto(GStrv) ranges = g_strsplit(g_strstrip(online_text), ",", -1);
        for (char **r = ranges; *r; r++) {
            unsigned lo = 0, hi = 0;
            int n = sscanf(*r, "%u-%u", &lo, &hi);
            if (n < 1)
                continue;
            if (n == 1)
                hi = lo;
            for (unsigned c = lo; c <= hi && c < (unsigned)configured; c++) {
                ret->online++;
                if (args->need_map)
                    ret->map[c / 8] |= (char)(1 << (c % 8));
            }
        }
    }
    return true;
}

const struct proc_entry rpc_connect_procs[] = {
    RPC_PROC(PROC_CONNECT_GET_DOMAIN_CAPABILITIES, struct domcaps_args, xdr_domcaps_args,
             struct wire_string_value, xdr_wire_string_value, do_domain_capabilities, 0),
    RPC_PROC(PROC_NODE_GET_CPU_MAP, struct cpu_map_args, xdr_cpu_map_args, struct cpu_map_ret,
             xdr_cpu_map_ret, do_node_cpu_map, 0),
    RPC_PROC(PROC_AUTH_LIST, struct rpc_void, xdr_rpc_void, struct auth_list_ret,
             xdr_auth_list_ret, do_auth_list, PROC_BEFORE_OPEN),
    RPC_PROC(PROC_CONNECT_SUPPORTS_FEATURE, struct wire_int_value, xdr_wire_int_value, struct wire_int_value,
             xdr_wire_int_value, do_supports_feature, PROC_BEFORE_OPEN),
    RPC_PROC(PROC_CONNECT_OPEN, struct open_args, xdr_open_args, struct rpc_void, xdr_rpc_void,
             do_open, PROC_BEFORE_OPEN),
    RPC_PROC(PROC_CONNECT_CLOSE, struct rpc_void, xdr_rpc_void, struct rpc_void, xdr_rpc_void,
             do_nothing, PROC_BEFORE_OPEN),
    /* Close callbacks: the client learns of a closed connection by itself
     * (the socket closes); nothing to keep here. */
    RPC_PROC(PROC_CONNECT_REGISTER_CLOSE_CALLBACK, struct rpc_void, xdr_rpc_void,
             struct rpc_void, xdr_rpc_void, do_nothing, 0),
    RPC_PROC(PROC_CONNECT_UNREGISTER_CLOSE_CALLBACK, struct rpc_void, xdr_rpc_void,
             struct rpc_void, xdr_rpc_void, do_nothing, 0),
    RPC_PROC(PROC_CONNECT_GET_TYPE, struct rpc_void, xdr_rpc_void, struct wire_string_value,
             xdr_wire_string_value, do_get_type, 0),
    RPC_PROC(PROC_CONNECT_GET_VERSION, struct rpc_void, xdr_rpc_void, struct wire_u64_value,
             xdr_wire_u64_value, do_get_version, 0),
    RPC_PROC(PROC_CONNECT_GET_LIB_VERSION, struct rpc_void, xdr_rpc_void, struct wire_u64_value,
             xdr_wire_u64_value, do_get_lib_version, 0),
    RPC_PROC(PROC_CONNECT_GET_HOSTNAME, struct rpc_void, xdr_rpc_void, struct wire_string_value,
             xdr_wire_string_value, do_get_hostname, 0),
    RPC_PROC(PROC_CONNECT_GET_URI, struct rpc_void, xdr_rpc_void, struct wire_string_value,
             xdr_wire_string_value, do_get_uri, 0),
    RPC_PROC(PROC_CONNECT_GET_CAPABILITIES, struct rpc_void, xdr_rpc_void, struct wire_string_value,
             xdr_wire_string_value, do_get_capabilities, 0),
    RPC_PROC(PROC_NODE_GET_INFO, struct rpc_void, xdr_rpc_void, struct node_info_ret,
             xdr_node_info_ret, do_node_get_info, 0),
    RPC_PROC(PROC_CONNECT_IS_SECURE, struct rpc_void, xdr_rpc_void, struct wire_int_value,
             xdr_wire_int_value, do_one, 0),
    RPC_PROC(PROC_CONNECT_GET_MAX_VCPUS, struct wire_string_value, xdr_wire_opt_string_value,
             struct wire_int_value, xdr_wire_int_value, do_get_max_vcpus, 0),
    RPC_PROC(PROC_CONNECT_LIST_ALL_DOMAINS, struct wire_list_all_args, xdr_wire_list_all_args,
             struct list_all_ret, xdr_list_all_ret, do_list_all, 0),
    RPC_PROC(PROC_CONNECT_NUM_OF_DOMAINS, struct rpc_void, xdr_rpc_void, struct wire_int_value,
             xdr_wire_int_value, do_num_of_domains, 0),
    RPC_PROC(PROC_CONNECT_LIST_DOMAINS, struct wire_int_value, xdr_wire_int_value, struct id_list_ret,
             xdr_id_list_ret, do_list_domains, 0),
    RPC_PROC(PROC_CONNECT_NUM_OF_DEFINED_DOMAINS, struct rpc_void, xdr_rpc_void,
             struct wire_int_value, xdr_wire_int_value, do_num_of_defined, 0),
    RPC_PROC(PROC_CONNECT_LIST_DEFINED_DOMAINS, struct wire_int_value, xdr_wire_int_value,
             struct wire_string_list, xdr_wire_string_list, do_list_defined, 0),
    RPC_PROC(PROC_NODE_GET_FREE_MEMORY, struct rpc_void, xdr_rpc_void, struct wire_u64_value,
             xdr_wire_u64_value, do_free_memory, 0),
    RPC_PROC(PROC_NODE_GET_SECURITY_MODEL, struct rpc_void, xdr_rpc_void,
             struct security_model_ret, xdr_security_model_ret, do_security_model, 0),
};
const size_t rpc_connect_procs_count = G_N_ELEMENTS(rpc_connect_procs);
