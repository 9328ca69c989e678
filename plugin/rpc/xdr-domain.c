/* Domain procedures: look-ups, definitions, lifecycle, information. Each
 * handler decodes nothing itself (the table's filters do), looks the
 * domain up by uuid, calls the driver and fills the reply. */
#include <libvirt/libvirt.h>
#include <string.h>
#include <unistd.h>

#include "rpc/procedure.h"
#include "driver/driver.h"
#include "driver/driver-block.h"
#include "driver/driver-net.h"
#include "run/process.h"
#include "stream.h"
#include "util/virt-error.h"

/* ---- types ---- */

struct dom_int_args {
    struct wire_domain dom;
    int32_t value;
};
static bool_t xdr_dom_int_args(XDR *x, struct dom_int_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_int(x, &a->value);
}

struct info_ret {
    unsigned char state;
    uint64_t max_mem;
    uint64_t memory;
    unsigned short nr_virt_cpu;
    uint64_t cpu_time;
};
static bool_t xdr_info_ret(XDR *x, struct info_ret *r)
{
    return xdr_u_char(x, &r->state) && xdr_uint64_t(x, &r->max_mem) &&
           xdr_uint64_t(x, &r->memory) && xdr_u_short(x, &r->nr_virt_cpu) &&
           xdr_uint64_t(x, &r->cpu_time);
}

struct state_ret {
    int32_t state, reason;
};
static bool_t xdr_state_ret(XDR *x, struct state_ret *r)
{
    return xdr_int(x, &r->state) && xdr_int(x, &r->reason);
}

struct vcpus_args {
    struct wire_domain dom;
    int32_t maxinfo, maplen;
};
static bool_t xdr_vcpus_args(XDR *x, struct vcpus_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_int(x, &a->maxinfo) && xdr_int(x, &a->maplen);
}

struct vcpu_info {
    uint32_t number;
    int32_t state;
    uint64_t cpu_time;
    int32_t cpu;
};
static bool_t xdr_vcpu_info(XDR *x, struct vcpu_info *v)
{
    return xdr_u_int(x, &v->number) && xdr_int(x, &v->state) && xdr_uint64_t(x, &v->cpu_time) &&
           xdr_int(x, &v->cpu);
}

#define VCPUINFO_MAX 16384
#define CPUMAPS_MAX (16 * 1024 * 1024)

struct vcpus_ret {
    unsigned info_len;
    struct vcpu_info *info;
    unsigned maps_len;
    char *maps;
};
static bool_t xdr_vcpus_ret(XDR *x, struct vcpus_ret *r)
{
    return xdr_array(x, (char **)&r->info, &r->info_len, VCPUINFO_MAX, sizeof(struct vcpu_info),
                     XDR_PROC(xdr_vcpu_info)) &&
           xdr_bytes(x, &r->maps, &r->maps_len, CPUMAPS_MAX);
}

struct stats_args {
    struct wire_domain_list doms;
    uint32_t stats;
    uint32_t flags;
};
static bool_t xdr_stats_args(XDR *x, struct stats_args *a)
{
    return xdr_wire_domain_list(x, &a->doms) && xdr_u_int(x, &a->stats) &&
           xdr_u_int(x, &a->flags);
}

struct stats_record {
    struct wire_domain dom;
    struct wire_typed_param_list params;
};
static bool_t xdr_stats_record(XDR *x, struct stats_record *r)
{
    return xdr_wire_domain(x, &r->dom) && xdr_wire_typed_param_list(x, &r->params);
}

struct stats_ret {
    unsigned len;
    struct stats_record *records;
};
static bool_t xdr_stats_ret(XDR *x, struct stats_ret *r)
{
    return xdr_array(x, (char **)&r->records, &r->len, RPC_LIST_MAX, sizeof(struct stats_record),
                     XDR_PROC(xdr_stats_record));
}

/* ---- helpers ---- */

static struct vsnap_domain *lookup(struct rpc_call *call, const struct wire_domain *wd,
                                   GError **error)
{
    return driver_lookup_uuid(call->driver, wd->uuid, wd->name, error);
}

static void set_handle(struct wire_domain *out, struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    wire_domain_set(out, dom->name, dom->uuid, dom->id);
    g_mutex_unlock(&dom->lock);
}

/* ---- look-ups ---- */

static bool do_lookup_name(struct rpc_call *call, struct wire_string_value *a, struct wire_domain_only *r,
                           GError **error)
{
    g_autoptr(vsnap_domain) dom = driver_lookup_name(call->driver, a->value, error);
    if (dom)
        set_handle(&r->dom, dom);
    return dom != NULL;
}

static bool do_lookup_uuid(struct rpc_call *call, struct wire_uuid_value *a, struct wire_domain_only *r,
                           GError **error)
{
    g_autoptr(vsnap_domain) dom = driver_lookup_uuid(call->driver, a->uuid, NULL, error);
    if (dom)
        set_handle(&r->dom, dom);
    return dom != NULL;
}

static bool do_lookup_id(struct rpc_call *call, struct wire_int_value *a, struct wire_domain_only *r,
                         GError **error)
{
    g_autoptr(vsnap_domain) dom = driver_lookup_id(call->driver, a->value, error);
    if (dom)
        set_handle(&r->dom, dom);
    return dom != NULL;
}

/* ---- definitions ---- */

static bool do_define(struct rpc_call *call, struct wire_string_value *a, struct wire_domain_only *r,
                      GError **error)
{
    g_autoptr(vsnap_domain) dom = driver_define_xml(call->driver, a->value, 0, error);
    if (dom)
        set_handle(&r->dom, dom);
    return dom != NULL;
}

static bool do_define_flags(struct rpc_call *call, struct wire_xml_flags *a, struct wire_domain_only *r,
                            GError **error)
{
    g_autoptr(vsnap_domain) dom = driver_define_xml(call->driver, a->xml, a->flags, error);
    if (dom)
        set_handle(&r->dom, dom);
    return dom != NULL;
}

static bool do_create_xml(struct rpc_call *call, struct wire_xml_flags *a, struct wire_domain_only *r,
                          GError **error)
{
    g_autoptr(vsnap_domain) dom = driver_create_xml(call->driver, a->xml, a->flags, error);
    if (dom)
        set_handle(&r->dom, dom);
    return dom != NULL;
}

static bool do_undefine(struct rpc_call *call, struct wire_domain_only *a, struct rpc_void *r,
                        GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_undefine(call->driver, dom, 0, error);
}

static bool do_undefine_flags(struct rpc_call *call, struct wire_domain_flags *a,
                              struct rpc_void *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_undefine(call->driver, dom, a->flags, error);
}

static bool do_get_xml(struct rpc_call *call, struct wire_domain_flags *a, struct wire_string_value *r,
                       GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    if (!dom)
        return false;
    if ((a->flags & VIR_DOMAIN_XML_SECURE) && rpc_client_is_readonly(call->client)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_DENIED,
                    "virDomainGetXMLDesc with secure flag is not allowed on a read-only "
                    "connection");
        return false;
    }
    g_autofree char *xml = driver_get_xml(call->driver, dom, a->flags, error);
    if (xml)
        r->value = strdup(xml);
    return xml != NULL;
}

/* ---- lifecycle ---- */

static bool do_create(struct rpc_call *call, struct wire_domain_only *a, struct rpc_void *r,
                      GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_start(call->driver, dom, 0, error);
}

static bool do_create_with_flags(struct rpc_call *call, struct wire_domain_flags *a,
                                 struct wire_domain_only *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    if (!dom || !driver_start(call->driver, dom, a->flags, error))
        return false;
    set_handle(&r->dom, dom);
    return true;
}

static bool do_destroy(struct rpc_call *call, struct wire_domain_only *a, struct rpc_void *r,
                       GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_destroy(call->driver, dom, 0, error);
}

static bool do_destroy_flags(struct rpc_call *call, struct wire_domain_flags *a, struct rpc_void *r,
                             GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_destroy(call->driver, dom, a->flags, error);
}

static bool do_shutdown(struct rpc_call *call, struct wire_domain_only *a, struct rpc_void *r,
                        GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_shutdown(call->driver, dom, 0, error);
}

static bool do_shutdown_flags(struct rpc_call *call, struct wire_domain_flags *a,
                              struct rpc_void *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_shutdown(call->driver, dom, a->flags, error);
}

static bool do_reboot(struct rpc_call *call, struct wire_domain_flags *a, struct rpc_void *r,
                      GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_reboot(call->driver, dom, a->flags, error);
}

static bool do_suspend(struct rpc_call *call, struct wire_domain_only *a, struct rpc_void *r,
                       GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_suspend(call->driver, dom, error);
}

static bool do_resume(struct rpc_call *call, struct wire_domain_only *a, struct rpc_void *r,
                      GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_resume(call->driver, dom, error);
}

static bool do_set_autostart(struct rpc_call *call, struct dom_int_args *a, struct rpc_void *r,
                             GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_set_autostart(call->driver, dom, a->value != 0, error);
}

/* ---- memory statistics ---- */

struct memstats_args {
    struct wire_domain dom;
    uint32_t max_stats;
    uint32_t flags;
};
static bool_t xdr_memstats_args(XDR *x, struct memstats_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_u_int(x, &a->max_stats) && xdr_u_int(x, &a->flags);
}

struct memstat {
    int32_t tag;
    uint64_t val;
};
static bool_t xdr_memstat(XDR *x, struct memstat *m)
{
    return xdr_int(x, &m->tag) && xdr_uint64_t(x, &m->val);
}

struct memstats_ret {
    unsigned len;
    struct memstat *stats;
};
static bool_t xdr_memstats_ret(XDR *x, struct memstats_ret *r)
{
    return xdr_array(x, (char **)&r->stats, &r->len, 1024, sizeof(struct memstat),
                     XDR_PROC(xdr_memstat));
}

/* What the host knows without a balloon driver: the guest's RAM size
 * (actual) and how much of it the shim has touched (rss, KiB). */
static bool do_memory_stats(struct rpc_call *call, struct memstats_args *a,
                            struct memstats_ret *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    if (!dom)
        return false;
    g_mutex_lock(&dom->lock);
    pid_t pid = dom->run ? dom->run->pid : -1;
    uint64_t actual = dom->def->current_memory_kib;
    g_mutex_unlock(&dom->lock);
    if (pid < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return false;
    }
    struct memstat all[] = {
        {VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON, actual},
        {VIR_DOMAIN_MEMORY_STAT_RSS, process_rss_kib(pid)},
    };
    r->len = MIN((unsigned)G_N_ELEMENTS(all), a->max_stats);
    r->stats = calloc(MAX(r->len, 1), sizeof(struct memstat));
    memcpy(r->stats, all, r->len * sizeof(struct memstat));
    return true;
}

/* ---- interfaces ---- */

struct ifstats_args {
    struct wire_domain dom;
    char *path;
};
static bool_t xdr_ifstats_args(XDR *x, struct ifstats_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->path);
}

struct ifstats_ret {
    int64_t rx_bytes, rx_packets, rx_errs, rx_drop, tx_bytes, tx_packets, tx_errs, tx_drop;
};
static bool_t xdr_ifstats_ret(XDR *x, struct ifstats_ret *r)
{
    return xdr_int64_t(x, &r->rx_bytes) && xdr_int64_t(x, &r->rx_packets) && xdr_int64_t(x, &r->rx_errs) &&
           xdr_int64_t(x, &r->rx_drop) && xdr_int64_t(x, &r->tx_bytes) && xdr_int64_t(x, &r->tx_packets) &&
           xdr_int64_t(x, &r->tx_errs) && xdr_int64_t(x, &r->tx_drop);
}

static bool do_interface_stats(struct rpc_call *call, struct ifstats_args *a, struct ifstats_ret *r,
                               GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    struct netdev_stats s;
    if (!dom || !driver_interface_stats(call->driver, dom, a->path, &s, error))
        return false;
    *r = (struct ifstats_ret){
        (int64_t)s.rx_bytes, (int64_t)s.rx_packets, (int64_t)s.rx_errs, (int64_t)s.rx_drop,
        (int64_t)s.tx_bytes, (int64_t)s.tx_packets, (int64_t)s.tx_errs, (int64_t)s.tx_drop,
    };
    return true;
}

struct dom_xml_flags_args {
    struct wire_domain dom;
    char *xml;
    uint32_t flags;
};
static bool_t xdr_dom_xml_flags_args(XDR *x, struct dom_xml_flags_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->xml) && xdr_u_int(x, &a->flags);
}

static bool do_update_device(struct rpc_call *call, struct dom_xml_flags_args *a, struct rpc_void *r,
                             GError **error)
{
    (void)r;
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_update_device(call->driver, dom, a->xml, a->flags, error);
}

struct ifaddr_args {
    struct wire_domain dom;
    uint32_t source, flags;
};
static bool_t xdr_ifaddr_args(XDR *x, struct ifaddr_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_u_int(x, &a->source) && xdr_u_int(x, &a->flags);
}

struct ip_addr {
    int32_t type;
    char *addr;
    uint32_t prefix;
};
static bool_t xdr_ip_addr(XDR *x, struct ip_addr *a)
{
    return xdr_int(x, &a->type) && xdr_wire_string(x, &a->addr) && xdr_u_int(x, &a->prefix);
}

#define IFACES_MAX 2048u   /* REMOTE_DOMAIN_INTERFACE_MAX */
#define IP_ADDR_MAX 2048u  /* REMOTE_DOMAIN_IP_ADDR_MAX */

struct iface {
    char *name;
    char *hwaddr;   /* optional */
    unsigned n_addrs;
    struct ip_addr *addrs;
};
static bool_t xdr_iface(XDR *x, struct iface *i)
{
    return xdr_wire_string(x, &i->name) && xdr_wire_opt_string(x, &i->hwaddr) &&
           xdr_array(x, (char **)&i->addrs, &i->n_addrs, IP_ADDR_MAX, sizeof(struct ip_addr), XDR_PROC(xdr_ip_addr));
}

struct ifaddr_ret {
    unsigned len;
    struct iface *ifaces;
};
static bool_t xdr_ifaddr_ret(XDR *x, struct ifaddr_ret *r)
{
    return xdr_array(x, (char **)&r->ifaces, &r->len, IFACES_MAX, sizeof(struct iface), XDR_PROC(xdr_iface));
}

static bool do_interface_addresses(struct rpc_call *call, struct ifaddr_args *a, struct ifaddr_ret *r,
                                   GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    g_autoptr(GArray) found = dom ? driver_interface_addresses(call->driver, dom, a->source, error) : NULL;
    if (!found)
        return false;
    r->len = found->len;
    r->ifaces = calloc(MAX(found->len, 1), sizeof(struct iface));
    for (guint i = 0; i < found->len; i++) {
        const struct driver_net_addrs *src = &g_array_index(found, struct driver_net_addrs, i);
        struct iface *dst = &r->ifaces[i];
        dst->name = strdup(src->name ? src->name : "");
        dst->hwaddr = strdup(src->mac);
        dst->n_addrs = g_strv_length(src->ipv4);
        dst->addrs = calloc(MAX(dst->n_addrs, 1), sizeof(struct ip_addr));
        for (unsigned k = 0; k < dst->n_addrs; k++)
            dst->addrs[k] = (struct ip_addr){VIR_IP_ADDR_TYPE_IPV4, strdup(src->ipv4[k]), 0};
    }
    return true;
}

/* ---- console ---- */

struct console_args {
    struct wire_domain dom;
    char *dev_name;
    uint32_t flags;
};
static bool_t xdr_console_args(XDR *x, struct console_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_opt_string(x, &a->dev_name) &&
           xdr_u_int(x, &a->flags);
}

struct console_start {
    int fd;
    unsigned char uuid[16];
};

static void start_console(struct rpc_call *call, bool sent, void *data)
{
    struct console_start *cs = data;
    if (sent)
        stream_start(call->streams, call->client, call->hdr, cs->fd, cs->uuid);
    else
        close(cs->fd);
    g_free(cs);
}

static bool do_open_console(struct rpc_call *call, struct console_args *a, struct rpc_void *r,
                            GError **error)
{
    unsigned allowed = VIR_DOMAIN_CONSOLE_FORCE | VIR_DOMAIN_CONSOLE_SAFE;
    if (a->flags & ~allowed) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)",
                    a->flags & ~allowed);
        return false;
    }
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    if (!dom)
        return false;
    /* One console stream per domain, as libvirt's console lock allows. */
    if (stream_registry_console_busy(call->streams, dom->uuid,
                                     a->flags & VIR_DOMAIN_CONSOLE_FORCE)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "Active console session exists for this domain");
        return false;
    }
    int fd = driver_console_connect(call->driver, dom, a->dev_name, error);
    if (fd < 0)
        return false;
    struct console_start *cs = g_new0(struct console_start, 1);
    cs->fd = fd;
    memcpy(cs->uuid, dom->uuid, 16);
    call->after_reply = start_console;
    call->after_data = cs;
    return true;
}

/* ---- information ---- */

/* Run fn on the summary of the domain named in the call. */
#define WITH_SUMMARY(call, wd, s, error)                                                         \
    g_autoptr(vsnap_domain) dom_ = lookup(call, wd, error);                                    \
    if (!dom_)                                                                                   \
        return false;                                                                            \
    struct domain_summary s = {0};                                                               \
    driver_summary((call)->driver, dom_, &s)

static bool do_get_info(struct rpc_call *call, struct wire_domain_only *a, struct info_ret *r,
                        GError **error)
{
    WITH_SUMMARY(call, &a->dom, s, error);
    r->state = (unsigned char)s.state;
    r->max_mem = s.max_mem_kib;
    r->memory = s.cur_mem_kib;
    r->nr_virt_cpu = (unsigned short)s.vcpus;
    r->cpu_time = s.cpu_time_ns;
    domain_summary_clear(&s);
    return true;
}

static bool do_get_state(struct rpc_call *call, struct wire_domain_flags *a, struct state_ret *r,
                         GError **error)
{
    WITH_SUMMARY(call, &a->dom, s, error);
    r->state = s.state;
    r->reason = s.reason;
    domain_summary_clear(&s);
    return true;
}

static bool do_get_os_type(struct rpc_call *call, struct wire_domain_only *a, struct wire_string_value *r,
                           GError **error)
{
    WITH_SUMMARY(call, &a->dom, s, error);
    r->value = strdup(s.os_type);
    domain_summary_clear(&s);
    return true;
}

static bool do_is_active(struct rpc_call *call, struct wire_domain_only *a, struct wire_int_value *r,
                         GError **error)
{
    WITH_SUMMARY(call, &a->dom, s, error);
    r->value = s.id >= 0;
    domain_summary_clear(&s);
    return true;
}

static bool do_is_persistent(struct rpc_call *call, struct wire_domain_only *a, struct wire_int_value *r,
                             GError **error)
{
    WITH_SUMMARY(call, &a->dom, s, error);
    r->value = s.persistent;
    domain_summary_clear(&s);
    return true;
}

static bool do_get_autostart(struct rpc_call *call, struct wire_domain_only *a, struct wire_int_value *r,
                             GError **error)
{
    WITH_SUMMARY(call, &a->dom, s, error);
    r->value = s.autostart;
    domain_summary_clear(&s);
    return true;
}

static bool do_get_max_memory(struct rpc_call *call, struct wire_domain_only *a, struct wire_u64_value *r,
                              GError **error)
{
    WITH_SUMMARY(call, &a->dom, s, error);
    r->value = s.max_mem_kib;
    domain_summary_clear(&s);
    return true;
}

static bool do_get_max_vcpus(struct rpc_call *call, struct wire_domain_only *a, struct wire_int_value *r,
                             GError **error)
{
    WITH_SUMMARY(call, &a->dom, s, error);
    r->value = s.vcpus;   /* no vCPU hotplug: the maximum is the count */
    domain_summary_clear(&s);
    return true;
}

static bool do_get_vcpus_flags(struct rpc_call *call, struct wire_domain_flags *a,
                               struct wire_int_value *r, GError **error)
{
    unsigned allowed = VIR_DOMAIN_AFFECT_LIVE | VIR_DOMAIN_AFFECT_CONFIG | VIR_DOMAIN_VCPU_MAXIMUM;
    if (a->flags & ~allowed) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)",
                    a->flags & ~allowed);
        return false;
    }
    WITH_SUMMARY(call, &a->dom, s, error);
    r->value = s.vcpus;
    domain_summary_clear(&s);
    return true;
}

static bool do_get_messages(struct rpc_call *call, struct wire_domain_flags *a,
                            struct wire_string_list *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom != NULL;   /* no tainting or deprecation messages to report */
}

static bool do_get_vcpus(struct rpc_call *call, struct vcpus_args *a, struct vcpus_ret *r,
                         GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    if (!dom)
        return false;
    if (a->maxinfo < 0 || a->maxinfo > VCPUINFO_MAX || a->maplen < 0 ||
        (int64_t)a->maxinfo * a->maplen > CPUMAPS_MAX) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_RPC, "vCPU info request too large");
        return false;
    }
    g_mutex_lock(&dom->lock);
    pid_t pid = dom->run ? dom->run->pid : -1;
    unsigned vcpus = dom->def->vcpus;
    g_mutex_unlock(&dom->lock);
    if (pid < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "cannot list vcpu pinning for an inactive domain");
        return false;
    }
    unsigned n = MIN(vcpus, (unsigned)a->maxinfo);
    g_autofree struct vcpu_stat *stats = g_new0(struct vcpu_stat, MAX(n, 1));
    process_vcpu_stats(pid, stats, n);
    r->info_len = n;
    r->info = calloc(MAX(n, 1), sizeof(struct vcpu_info));
    for (unsigned i = 0; i < n; i++) {
        r->info[i].number = i;
        r->info[i].state = VIR_VCPU_RUNNING;
        r->info[i].cpu_time = stats[i].cpu_time_ns;
        r->info[i].cpu = stats[i].found ? stats[i].cpu : -1;
    }
    /* No pinning: every vCPU may run on every host CPU. */
    r->maps_len = (unsigned)(n * a->maplen);
    r->maps = calloc(MAX(r->maps_len, 1), 1);
    long host_cpus = sysconf(_SC_NPROCESSORS_CONF);
    for (unsigned i = 0; i < n; i++)
        for (long c = 0; c < host_cpus && c / 8 < a->maplen; c++)
            r->maps[i * a->maplen + c / 8] |= (char)(1 << (c % 8));
    return true;
}

/* block.* as libvirt names them: per disk its name, the file the guest
 * writes, the shim's request and byte counts, the file sizes. */
#define BLOCK_PARAMS_PER_DISK 11
static unsigned fill_block_stats(struct wire_typed_param *p, const struct block_stats *b, size_t n_disks)
{
    unsigned n = 0;
    wire_param_uint(&p[n++], "block.count", (uint32_t)n_disks);
    for (size_t i = 0; i < n_disks; i++) {
        char field[64];
#define BLOCK_FIELD(name) (g_snprintf(field, sizeof(field), "block.%zu." name, i), field)
        wire_param_string(&p[n++], BLOCK_FIELD("name"), b[i].name);
        if (b[i].path)
            wire_param_string(&p[n++], BLOCK_FIELD("path"), b[i].path);
        wire_param_ullong(&p[n++], BLOCK_FIELD("rd.reqs"), b[i].rd_reqs);
        wire_param_ullong(&p[n++], BLOCK_FIELD("rd.bytes"), b[i].rd_bytes);
        wire_param_ullong(&p[n++], BLOCK_FIELD("wr.reqs"), b[i].wr_reqs);
        wire_param_ullong(&p[n++], BLOCK_FIELD("wr.bytes"), b[i].wr_bytes);
        wire_param_ullong(&p[n++], BLOCK_FIELD("fl.reqs"), b[i].fl_reqs);
        wire_param_ullong(&p[n++], BLOCK_FIELD("errors"), b[i].errors);
        wire_param_ullong(&p[n++], BLOCK_FIELD("allocation"), b[i].info.allocation);
        wire_param_ullong(&p[n++], BLOCK_FIELD("capacity"), b[i].info.capacity);
        wire_param_ullong(&p[n++], BLOCK_FIELD("physical"), b[i].info.physical);
#undef BLOCK_FIELD
    }
    return n;
}

/* net.count and net.<i>.name, rx.*, tx.* as libvirt names them. */
static unsigned fill_net_stats(struct wire_typed_param *p, GArray *nets)
{
    unsigned n = 0;
    wire_param_uint(&p[n++], "net.count", nets->len);
    for (guint i = 0; i < nets->len; i++) {
        const struct driver_net_stat *net = &g_array_index(nets, struct driver_net_stat, i);
        const struct {
            const char *name;
            uint64_t value;
        } counters[] = {
            {"rx.bytes", net->stats.rx_bytes}, {"rx.pkts", net->stats.rx_packets},
            {"rx.errs", net->stats.rx_errs},   {"rx.drop", net->stats.rx_drop},
            {"tx.bytes", net->stats.tx_bytes}, {"tx.pkts", net->stats.tx_packets},
            {"tx.errs", net->stats.tx_errs},   {"tx.drop", net->stats.tx_drop},
        };
        g_autofree char *name = g_strdup_printf("net.%u.name", i);
        wire_param_string(&p[n++], name, net->name);
        for (size_t c = 0; c < G_N_ELEMENTS(counters); c++) {
            g_autofree char *field = g_strdup_printf("net.%u.%s", i, counters[c].name);
            wire_param_ullong(&p[n++], field, counters[c].value);
        }
    }
    return n;
}

#define ONDEMAND_PARAMS 8

/* vsnap.ondemand.*: the on-demand server of a domain restored that way. */
static unsigned fill_ondemand_stats(struct wire_typed_param *p, const struct monitor_ondemand *od)
{
    unsigned n = 0;
    wire_param_ullong(&p[n++], "vsnap.ondemand.faults", od->faults);
    wire_param_ullong(&p[n++], "vsnap.ondemand.pages_copied", od->pages_copied);
    wire_param_ullong(&p[n++], "vsnap.ondemand.blocks_read_ahead", od->blocks_read_ahead);
    wire_param_ullong(&p[n++], "vsnap.ondemand.prefetch_hits", od->prefetch_hits);
    wire_param_ullong(&p[n++], "vsnap.ondemand.prefetch_misses", od->prefetch_misses);
    wire_param_ullong(&p[n++], "vsnap.ondemand.workset_blocks", od->workset_blocks);
    if (od->workset_ms >= 0)
        wire_param_ullong(&p[n++], "vsnap.ondemand.workset_ms", (uint64_t)od->workset_ms);
    wire_param_string(&p[n++], "vsnap.ondemand.record", od->record);
    return n;
}

/* state.*, cpu.time, balloon.*, vcpu.*, block.* as libvirt names them, plus vsnap.ready and
 * vsnap.generation (readiness pushed by the guest; VM starts so far) and, restored on
 * demand, vsnap.ondemand.* (the server's faults, prefetch and working-set record). */
static void fill_stats(struct stats_record *rec, const struct domain_summary *s, unsigned stats,
                       const struct block_stats *blocks, size_t n_disks, GArray *nets,
                       const struct monitor_ondemand *od)
{
    bool all = stats == 0;
    struct wire_typed_param *p = calloc(12 + 1 + ONDEMAND_PARAMS + n_disks * BLOCK_PARAMS_PER_DISK +
                                            (nets ? 1 + 9 * nets->len : 0),
                                        sizeof(*p));
    unsigned n = 0;
    if (all || (stats & VIR_DOMAIN_STATS_STATE)) {
        wire_param_int(&p[n++], "state.state", s->state);
        wire_param_int(&p[n++], "state.reason", s->reason);
        wire_param_bool(&p[n++], "vsnap.ready", s->ready);
        wire_param_ullong(&p[n++], "vsnap.generation", s->generation);
        if (od)
            n += fill_ondemand_stats(&p[n], od);
    }
    if (all || (stats & VIR_DOMAIN_STATS_CPU_TOTAL))
        wire_param_ullong(&p[n++], "cpu.time", s->cpu_time_ns);
    if (all || (stats & VIR_DOMAIN_STATS_BALLOON)) {
        wire_param_ullong(&p[n++], "balloon.current", s->cur_mem_kib);
        wire_param_ullong(&p[n++], "balloon.maximum", s->max_mem_kib);
    }
    if (all || (stats & VIR_DOMAIN_STATS_VCPU)) {
        wire_param_uint(&p[n++], "vcpu.current", s->vcpus);
        wire_param_uint(&p[n++], "vcpu.maximum", s->vcpus);
    }
    if (all || (stats & VIR_DOMAIN_STATS_BLOCK))
        n += fill_block_stats(p + n, blocks, n_disks);
    if (nets)
        n += fill_net_stats(&p[n], nets);
    rec->params.len = n;
    rec->params.val = p;
}

static bool do_all_domain_stats(struct rpc_call *call, struct stats_args *a, struct stats_ret *r,
                                GError **error)
{
    unsigned list_flags = a->flags & 0xffff;   /* the VIR_CONNECT_LIST_DOMAINS_* part */
    g_autoptr(GPtrArray) doms = NULL;
    if (a->doms.len > 0) {
        doms = g_ptr_array_new_with_free_func((GDestroyNotify)vsnap_domain_unref);
        for (unsigned i = 0; i < a->doms.len; i++) {
            struct vsnap_domain *dom = lookup(call, &a->doms.val[i], error);
            if (!dom)
                return false;
            g_ptr_array_add(doms, dom);
        }
    } else {
        doms = driver_list(call->driver, list_flags);
    }
    r->len = doms->len;
    r->records = calloc(MAX(doms->len, 1), sizeof(struct stats_record));
    for (guint i = 0; i < doms->len; i++) {
        struct domain_summary s = {0};
        driver_summary(call->driver, doms->pdata[i], &s);
        wire_domain_set(&r->records[i].dom, s.name, s.uuid, s.id);
        struct block_stats *blocks = NULL;
        size_t n_disks = 0;
        if (a->stats == 0 || (a->stats & VIR_DOMAIN_STATS_BLOCK))
            n_disks = driver_all_block_stats(call->driver, doms->pdata[i], &blocks);
        g_autoptr(GArray) nets = a->stats == 0 || (a->stats & VIR_DOMAIN_STATS_INTERFACE)
                                     ? driver_interfaces_stats(call->driver, doms->pdata[i])
                                     : NULL;
        struct monitor_ondemand od;
        bool has_od = (a->stats == 0 || (a->stats & VIR_DOMAIN_STATS_STATE)) &&
                      driver_ondemand_stats(call->driver, doms->pdata[i], &od);
        fill_stats(&r->records[i], &s, a->stats, blocks, n_disks, nets, has_od ? &od : NULL);
        for (size_t d = 0; d < n_disks; d++)
            block_stats_clear(&blocks[d]);
        g_free(blocks);
        domain_summary_clear(&s);
    }
    return true;
}

#define P RPC_PROC
const struct proc_entry rpc_domain_procs[] = {
    P(PROC_DOMAIN_LOOKUP_BY_NAME, struct wire_string_value, xdr_wire_string_value, struct wire_domain_only, xdr_wire_domain_only,
      do_lookup_name, 0),
    P(PROC_DOMAIN_LOOKUP_BY_UUID, struct wire_uuid_value, xdr_wire_uuid_value, struct wire_domain_only, xdr_wire_domain_only,
      do_lookup_uuid, 0),
    P(PROC_DOMAIN_LOOKUP_BY_ID, struct wire_int_value, xdr_wire_int_value, struct wire_domain_only, xdr_wire_domain_only,
      do_lookup_id, 0),
    P(PROC_DOMAIN_DEFINE_XML, struct wire_string_value, xdr_wire_string_value, struct wire_domain_only, xdr_wire_domain_only,
      do_define, PROC_WRITE),
    P(PROC_DOMAIN_DEFINE_XML_FLAGS, struct wire_xml_flags, xdr_wire_xml_flags, struct wire_domain_only,
      xdr_wire_domain_only, do_define_flags, PROC_WRITE),
    P(PROC_DOMAIN_CREATE_XML, struct wire_xml_flags, xdr_wire_xml_flags, struct wire_domain_only,
      xdr_wire_domain_only, do_create_xml, PROC_WRITE),
    P(PROC_DOMAIN_UNDEFINE, struct wire_domain_only, xdr_wire_domain_only, struct rpc_void, xdr_rpc_void,
      do_undefine, PROC_WRITE),
    P(PROC_DOMAIN_UNDEFINE_FLAGS, struct wire_domain_flags, xdr_wire_domain_flags, struct rpc_void,
      xdr_rpc_void, do_undefine_flags, PROC_WRITE),
    P(PROC_DOMAIN_GET_XML_DESC, struct wire_domain_flags, xdr_wire_domain_flags, struct wire_string_value,
      xdr_wire_string_value, do_get_xml, 0),
    P(PROC_DOMAIN_CREATE, struct wire_domain_only, xdr_wire_domain_only, struct rpc_void, xdr_rpc_void,
      do_create, PROC_WRITE),
    P(PROC_DOMAIN_CREATE_WITH_FLAGS, struct wire_domain_flags, xdr_wire_domain_flags, struct wire_domain_only,
      xdr_wire_domain_only, do_create_with_flags, PROC_WRITE),
    P(PROC_DOMAIN_DESTROY, struct wire_domain_only, xdr_wire_domain_only, struct rpc_void, xdr_rpc_void,
      do_destroy, PROC_WRITE),
    P(PROC_DOMAIN_DESTROY_FLAGS, struct wire_domain_flags, xdr_wire_domain_flags, struct rpc_void,
      xdr_rpc_void, do_destroy_flags, PROC_WRITE),
    P(PROC_DOMAIN_SHUTDOWN, struct wire_domain_only, xdr_wire_domain_only, struct rpc_void, xdr_rpc_void,
      do_shutdown, PROC_WRITE),
    P(PROC_DOMAIN_SHUTDOWN_FLAGS, struct wire_domain_flags, xdr_wire_domain_flags, struct rpc_void,
      xdr_rpc_void, do_shutdown_flags, PROC_WRITE),
    P(PROC_DOMAIN_REBOOT, struct wire_domain_flags, xdr_wire_domain_flags, struct rpc_void,
      xdr_rpc_void, do_reboot, PROC_WRITE),
    P(PROC_DOMAIN_SUSPEND, struct wire_domain_only, xdr_wire_domain_only, struct rpc_void, xdr_rpc_void,
      do_suspend, PROC_WRITE),
    P(PROC_DOMAIN_RESUME, struct wire_domain_only, xdr_wire_domain_only, struct rpc_void, xdr_rpc_void,
      do_resume, PROC_WRITE),
    P(PROC_DOMAIN_SET_AUTOSTART, struct dom_int_args, xdr_dom_int_args, struct rpc_void,
      xdr_rpc_void, do_set_autostart, PROC_WRITE),
    P(PROC_DOMAIN_GET_INFO, struct wire_domain_only, xdr_wire_domain_only, struct info_ret, xdr_info_ret,
      do_get_info, 0),
    P(PROC_DOMAIN_GET_STATE, struct wire_domain_flags, xdr_wire_domain_flags, struct state_ret,
      xdr_state_ret, do_get_state, 0),
    P(PROC_DOMAIN_GET_OS_TYPE, struct wire_domain_only, xdr_wire_domain_only, struct wire_string_value, xdr_wire_string_value,
      do_get_os_type, 0),
    P(PROC_DOMAIN_IS_ACTIVE, struct wire_domain_only, xdr_wire_domain_only, struct wire_int_value, xdr_wire_int_value,
      do_is_active, 0),
    P(PROC_DOMAIN_IS_PERSISTENT, struct wire_domain_only, xdr_wire_domain_only, struct wire_int_value, xdr_wire_int_value,
      do_is_persistent, 0),
    P(PROC_DOMAIN_GET_AUTOSTART, struct wire_domain_only, xdr_wire_domain_only, struct wire_int_value, xdr_wire_int_value,
      do_get_autostart, 0),
    P(PROC_DOMAIN_GET_MAX_MEMORY, struct wire_domain_only, xdr_wire_domain_only, struct wire_u64_value, xdr_wire_u64_value,
      do_get_max_memory, 0),
    P(PROC_DOMAIN_GET_MAX_VCPUS, struct wire_domain_only, xdr_wire_domain_only, struct wire_int_value, xdr_wire_int_value,
      do_get_max_vcpus, 0),
    P(PROC_DOMAIN_GET_VCPUS_FLAGS, struct wire_domain_flags, xdr_wire_domain_flags, struct wire_int_value,
      xdr_wire_int_value, do_get_vcpus_flags, 0),
    P(PROC_DOMAIN_GET_VCPUS, struct vcpus_args, xdr_vcpus_args, struct vcpus_ret, xdr_vcpus_ret,
      do_get_vcpus, 0),
    P(PROC_DOMAIN_GET_MESSAGES, struct wire_domain_flags, xdr_wire_domain_flags,
      struct wire_string_list, xdr_wire_string_list, do_get_messages, 0),
    P(PROC_DOMAIN_MEMORY_STATS, struct memstats_args, xdr_memstats_args, struct memstats_ret,
      xdr_memstats_ret, do_memory_stats, 0),
    P(PROC_DOMAIN_OPEN_CONSOLE, struct console_args, xdr_console_args, struct rpc_void,
      xdr_rpc_void, do_open_console, PROC_WRITE),
    P(PROC_DOMAIN_INTERFACE_STATS, struct ifstats_args, xdr_ifstats_args, struct ifstats_ret, xdr_ifstats_ret,
      do_interface_stats, 0),
    P(PROC_DOMAIN_INTERFACE_ADDRESSES, struct ifaddr_args, xdr_ifaddr_args, struct ifaddr_ret, xdr_ifaddr_ret,
      do_interface_addresses, 0),
    P(PROC_DOMAIN_UPDATE_DEVICE_FLAGS, struct dom_xml_flags_args, xdr_dom_xml_flags_args, struct rpc_void,
      xdr_rpc_void, do_update_device, PROC_WRITE),
    P(PROC_CONNECT_GET_ALL_DOMAIN_STATS, struct stats_args, xdr_stats_args, struct stats_ret,
      xdr_stats_ret, do_all_domain_stats, 0),
};
const size_t rpc_domain_procs_count = G_N_ELEMENTS(rpc_domain_procs);
