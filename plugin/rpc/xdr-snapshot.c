/* Snapshot, save/restore, managed save and job procedures: their XDR (struct
 * layouts from libvirt's public remote_protocol.x) and thin handlers calling
 * snapshot.c and save.c. */
#include <libvirt/libvirt.h>
#include <string.h>

#include "rpc/procedure.h"
#include "driver/driver.h"
#include "persist/save.h"
#include "persist/snapshot.h"
#include "util/virt-error.h"

#define SNAPSHOT_NAMES_MAX 1024   /* REMOTE_DOMAIN_SNAPSHOT_LIST_NAMES_MAX */
#define JOB_STATS_MAX 64          /* REMOTE_DOMAIN_JOB_STATS_MAX */

/* remote_nonnull_domain_snapshot */
struct wire_snapshot {
    char *name;
    struct wire_domain dom;
};
static bool_t xdr_wire_snapshot(XDR *x, struct wire_snapshot *s)
{
    return xdr_wire_string(x, &s->name) && xdr_wire_domain(x, &s->dom);
}

/* ---- argument and return types ---- */

struct snap_flags {
    struct wire_snapshot snap;
    uint32_t flags;
};
static bool_t xdr_snap_flags(XDR *x, struct snap_flags *a)
{
    return xdr_wire_snapshot(x, &a->snap) && xdr_u_int(x, &a->flags);
}

struct create_args {
    struct wire_domain dom;
    char *xml;
    uint32_t flags;
};
static bool_t xdr_create_args(XDR *x, struct create_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->xml) && xdr_u_int(x, &a->flags);
}

struct dom_names_args {
    struct wire_domain dom;
    int32_t maxnames;
    uint32_t flags;
};
static bool_t xdr_dom_names_args(XDR *x, struct dom_names_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_int(x, &a->maxnames) && xdr_u_int(x, &a->flags);
}

struct snap_names_args {
    struct wire_snapshot snap;
    int32_t maxnames;
    uint32_t flags;
};
static bool_t xdr_snap_names_args(XDR *x, struct snap_names_args *a)
{
    return xdr_wire_snapshot(x, &a->snap) && xdr_int(x, &a->maxnames) && xdr_u_int(x, &a->flags);
}

struct lookup_args {
    struct wire_domain dom;
    char *name;
    uint32_t flags;
};
static bool_t xdr_lookup_args(XDR *x, struct lookup_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->name) && xdr_u_int(x, &a->flags);
}

struct dom_list_args {
    struct wire_domain dom;
    int32_t need_results;
    uint32_t flags;
};
static bool_t xdr_dom_list_args(XDR *x, struct dom_list_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_int(x, &a->need_results) && xdr_u_int(x, &a->flags);
}

struct snap_list_args {
    struct wire_snapshot snap;
    int32_t need_results;
    uint32_t flags;
};
static bool_t xdr_snap_list_args(XDR *x, struct snap_list_args *a)
{
    return xdr_wire_snapshot(x, &a->snap) && xdr_int(x, &a->need_results) &&
           xdr_u_int(x, &a->flags);
}

struct snap_ret {
    struct wire_snapshot snap;
};
static bool_t xdr_snap_ret(XDR *x, struct snap_ret *r)
{
    return xdr_wire_snapshot(x, &r->snap);
}

struct names_ret {
    unsigned len;
    char **val;
};
static bool_t xdr_names_ret(XDR *x, struct names_ret *r)
{
    return xdr_array(x, (char **)&r->val, &r->len, SNAPSHOT_NAMES_MAX, sizeof(char *),
                     XDR_PROC(xdr_wire_string));
}

struct snaps_ret {
    unsigned len;
    struct wire_snapshot *val;
    int32_t ret;
};
static bool_t xdr_snaps_ret(XDR *x, struct snaps_ret *r)
{
    return xdr_array(x, (char **)&r->val, &r->len, RPC_LIST_MAX, sizeof(struct wire_snapshot),
                     XDR_PROC(xdr_wire_snapshot)) &&
           xdr_int(x, &r->ret);
}

struct save_args {
    struct wire_domain dom;
    char *to;
};
static bool_t xdr_save_args(XDR *x, struct save_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->to);
}

struct save_flags_args {
    struct wire_domain dom;
    char *to;
    char *dxml;
    uint32_t flags;
};
static bool_t xdr_save_flags_args(XDR *x, struct save_flags_args *a)
{
    return xdr_wire_domain(x, &a->dom) && xdr_wire_string(x, &a->to) &&
           xdr_wire_opt_string(x, &a->dxml) && xdr_u_int(x, &a->flags);
}

struct restore_args {
    char *from;
};
static bool_t xdr_restore_args(XDR *x, struct restore_args *a)
{
    return xdr_wire_string(x, &a->from);
}

struct restore_flags_args {
    char *from;
    char *dxml;
    uint32_t flags;
};
static bool_t xdr_restore_flags_args(XDR *x, struct restore_flags_args *a)
{
    return xdr_wire_string(x, &a->from) && xdr_wire_opt_string(x, &a->dxml) &&
           xdr_u_int(x, &a->flags);
}

struct file_flags_args {
    char *file;
    uint32_t flags;
};
static bool_t xdr_file_flags_args(XDR *x, struct file_flags_args *a)
{
    return xdr_wire_string(x, &a->file) && xdr_u_int(x, &a->flags);
}

struct file_xml_flags_args {
    char *file;
    char *dxml;
    uint32_t flags;
};
static bool_t xdr_file_xml_flags_args(XDR *x, struct file_xml_flags_args *a)
{
    return xdr_wire_string(x, &a->file) && xdr_wire_string(x, &a->dxml) &&
           xdr_u_int(x, &a->flags);
}

struct job_info_ret {
    int32_t type;
    uint64_t values[11];   /* time elapsed/remaining, data, mem, file: total/processed/remaining */
};
static bool_t xdr_job_info_ret(XDR *x, struct job_info_ret *r)
{
    if (!xdr_int(x, &r->type))
        return false;
    for (size_t i = 0; i < G_N_ELEMENTS(r->values); i++)
        if (!xdr_uint64_t(x, &r->values[i]))
            return false;
    return true;
}

struct job_stats_ret {
    int32_t type;
    struct wire_typed_param_list params;
};
static bool_t xdr_job_stats_ret(XDR *x, struct job_stats_ret *r)
{
    return xdr_int(x, &r->type) &&
           xdr_array(x, (char **)&r->params.val, &r->params.len, JOB_STATS_MAX,
                     sizeof(struct wire_typed_param), XDR_PROC(xdr_wire_typed_param));
}

/* ---- helpers ---- */

static struct vsnap_domain *lookup(struct rpc_call *call, const struct wire_domain *wd,
                                   GError **error)
{
    return driver_lookup_uuid(call->driver, wd->uuid, wd->name, error);
}

static void set_snapshot(struct wire_snapshot *out, struct vsnap_domain *dom, const char *name)
{
    out->name = strdup(name);
    g_mutex_lock(&dom->lock);
    wire_domain_set(&out->dom, dom->name, dom->uuid, dom->id);
    g_mutex_unlock(&dom->lock);
}

static void take_names(struct names_ret *r, GPtrArray *names, int maxnames)
{
    unsigned n = MIN(names->len, (unsigned)MAX(maxnames, 0));
    r->len = n;
    r->val = calloc(MAX(n, 1), sizeof(char *));
    for (unsigned i = 0; i < n; i++)
        r->val[i] = strdup(names->pdata[i]);
}

static bool check_maxnames(int maxnames, GError **error)
{
    if (maxnames >= 0 && maxnames <= SNAPSHOT_NAMES_MAX)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_RPC, "too many snapshot names requested: %d",
                maxnames);
    return false;
}

/* ---- snapshot procedures ---- */

static bool do_create(struct rpc_call *call, struct create_args *a, struct snap_ret *r,
                      GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    g_autofree char *name =
        dom ? snapshot_create(call->driver, dom, a->xml, a->flags, error) : NULL;
    if (name)
        set_snapshot(&r->snap, dom, name);
    return name != NULL;
}

static bool do_get_xml(struct rpc_call *call, struct snap_flags *a, struct wire_string_value *r,
                       GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->snap.dom, error);
    g_autofree char *xml =
        dom ? snapshot_get_xml(call->driver, dom, a->snap.name, a->flags, error) : NULL;
    if (xml)
        r->value = strdup(xml);
    return xml != NULL;
}

static bool do_num(struct rpc_call *call, struct wire_domain_flags *a, struct wire_int_value *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    g_autoptr(GPtrArray) names =
        dom ? snapshot_list(call->driver, dom, NULL, a->flags, error) : NULL;
    if (names)
        r->value = (int32_t)names->len;
    return names != NULL;
}

static bool do_list_names(struct rpc_call *call, struct dom_names_args *a, struct names_ret *r,
                          GError **error)
{
    if (!check_maxnames(a->maxnames, error))
        return false;
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    g_autoptr(GPtrArray) names =
        dom ? snapshot_list(call->driver, dom, NULL, a->flags, error) : NULL;
    if (names)
        take_names(r, names, a->maxnames);
    return names != NULL;
}

static bool do_lookup(struct rpc_call *call, struct lookup_args *a, struct snap_ret *r,
                      GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    if (!dom || !snapshot_exists(call->driver, dom, a->name, error))
        return false;
    set_snapshot(&r->snap, dom, a->name);
    return true;
}

static bool do_has_current(struct rpc_call *call, struct wire_domain_flags *a, struct wire_int_value *r,
                           GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    int has = dom ? snapshot_has_current(call->driver, dom, error) : -1;
    r->value = has;
    return has >= 0;
}

static bool do_current(struct rpc_call *call, struct wire_domain_flags *a, struct snap_ret *r,
                       GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    g_autofree char *name = dom ? snapshot_current(call->driver, dom, error) : NULL;
    if (name)
        set_snapshot(&r->snap, dom, name);
    return name != NULL;
}

static bool do_revert(struct rpc_call *call, struct snap_flags *a, struct rpc_void *r,
                      GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->snap.dom, error);
    return dom && snapshot_revert(call->driver, dom, a->snap.name, a->flags, error);
}

static bool do_delete(struct rpc_call *call, struct snap_flags *a, struct rpc_void *r,
                      GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->snap.dom, error);
    return dom && snapshot_delete(call->driver, dom, a->snap.name, a->flags, error);
}

static bool do_get_parent(struct rpc_call *call, struct snap_flags *a, struct snap_ret *r,
                          GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->snap.dom, error);
    g_autofree char *parent = dom ? snapshot_parent(call->driver, dom, a->snap.name, error) : NULL;
    if (parent)
        set_snapshot(&r->snap, dom, parent);
    return parent != NULL;
}

static bool do_num_children(struct rpc_call *call, struct snap_flags *a, struct wire_int_value *r,
                            GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->snap.dom, error);
    g_autoptr(GPtrArray) names =
        dom ? snapshot_list(call->driver, dom, a->snap.name, a->flags, error) : NULL;
    if (names)
        r->value = (int32_t)names->len;
    return names != NULL;
}

static bool do_list_children(struct rpc_call *call, struct snap_names_args *a,
                             struct names_ret *r, GError **error)
{
    if (!check_maxnames(a->maxnames, error))
        return false;
    g_autoptr(vsnap_domain) dom = lookup(call, &a->snap.dom, error);
    g_autoptr(GPtrArray) names =
        dom ? snapshot_list(call->driver, dom, a->snap.name, a->flags, error) : NULL;
    if (names)
        take_names(r, names, a->maxnames);
    return names != NULL;
}

static bool do_is_current(struct rpc_call *call, struct snap_flags *a, struct wire_int_value *r,
                          GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->snap.dom, error);
    int current = dom ? snapshot_is_current(call->driver, dom, a->snap.name, error) : -1;
    r->value = current;
    return current >= 0;
}

/* Every vsnap snapshot has metadata: it is all a snapshot is made of. */
static bool do_has_metadata(struct rpc_call *call, struct snap_flags *a, struct wire_int_value *r,
                            GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->snap.dom, error);
    r->value = 1;
    return dom && snapshot_exists(call->driver, dom, a->snap.name, error);
}

static void fill_snaps(struct snaps_ret *r, struct vsnap_domain *dom, GPtrArray *names,
                       bool need_results)
{
    r->ret = (int32_t)names->len;
    if (!need_results)
        return;
    r->len = names->len;
    r->val = calloc(MAX(names->len, 1), sizeof(struct wire_snapshot));
    for (guint i = 0; i < names->len; i++)
        set_snapshot(&r->val[i], dom, names->pdata[i]);
}

static bool do_list_all(struct rpc_call *call, struct dom_list_args *a, struct snaps_ret *r,
                        GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    g_autoptr(GPtrArray) names =
        dom ? snapshot_list(call->driver, dom, NULL, a->flags, error) : NULL;
    if (names)
        fill_snaps(r, dom, names, a->need_results != 0);
    return names != NULL;
}

static bool do_list_all_children(struct rpc_call *call, struct snap_list_args *a,
                                 struct snaps_ret *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->snap.dom, error);
    g_autoptr(GPtrArray) names =
        dom ? snapshot_list(call->driver, dom, a->snap.name, a->flags, error) : NULL;
    if (names)
        fill_snaps(r, dom, names, a->need_results != 0);
    return names != NULL;
}

/* ---- save, restore, managed save ---- */

static bool do_save(struct rpc_call *call, struct save_args *a, struct rpc_void *r,
                    GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && save_to_file(call->driver, dom, a->to, NULL, 0, error);
}

static bool do_save_flags(struct rpc_call *call, struct save_flags_args *a, struct rpc_void *r,
                          GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && save_to_file(call->driver, dom, a->to, a->dxml, a->flags, error);
}

static bool do_restore(struct rpc_call *call, struct restore_args *a, struct rpc_void *r,
                       GError **error)
{
    return save_restore_file(call->driver, a->from, NULL, 0, error);
}

static bool do_restore_flags(struct rpc_call *call, struct restore_flags_args *a,
                             struct rpc_void *r, GError **error)
{
    return save_restore_file(call->driver, a->from, a->dxml, a->flags, error);
}

static bool do_save_image_xml(struct rpc_call *call, struct file_flags_args *a,
                              struct wire_string_value *r, GError **error)
{
    g_autofree char *xml =
        save_image_xml(call->driver, rpc_client_caller(call->client), a->file, a->flags, error);
    if (xml)
        r->value = strdup(xml);
    return xml != NULL;
}

static bool do_save_image_define(struct rpc_call *call, struct file_xml_flags_args *a,
                                 struct rpc_void *r, GError **error)
{
    return save_image_define(call->driver, a->file, a->dxml, a->flags, error);
}

static bool do_managed_save(struct rpc_call *call, struct wire_domain_flags *a, struct rpc_void *r,
                            GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && save_managed(call->driver, dom, a->flags, error);
}

static bool do_has_managed(struct rpc_call *call, struct wire_domain_flags *a, struct wire_int_value *r,
                           GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    if (dom)
        r->value = save_has_managed(call->driver, dom);
    return dom != NULL;
}

static bool do_managed_remove(struct rpc_call *call, struct wire_domain_flags *a, struct rpc_void *r,
                              GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && save_managed_remove(call->driver, dom, error);
}

/* ---- job information ---- */

static bool do_job_info(struct rpc_call *call, struct wire_domain_only *a, struct job_info_ret *r,
                        GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    if (!dom)
        return false;
    struct save_job_info job;
    save_job_info(call->driver, dom, &job);
    g_free(job.error);
    r->type = job.type;
    r->values[0] = job.elapsed_ms;
    r->values[2] = job.total;                  /* data */
    r->values[3] = job.processed;
    r->values[4] = job.remaining;
    r->values[5] = job.total;                  /* memory */
    r->values[6] = job.processed;
    r->values[7] = job.remaining;
    return true;
}

static bool do_job_stats(struct rpc_call *call, struct wire_domain_flags *a, struct job_stats_ret *r,
                         GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    if (!dom)
        return false;
    if (a->flags & ~(unsigned)(VIR_DOMAIN_JOB_STATS_COMPLETED | VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)",
                    a->flags);
        return false;
    }
    struct save_job_info job;
    if (a->flags & VIR_DOMAIN_JOB_STATS_COMPLETED)
        save_job_completed(call->driver, dom, a->flags & VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED, &job);
    else
        save_job_info(call->driver, dom, &job);
    r->type = job.type;
    if (job.type == VIR_DOMAIN_JOB_NONE)
        return true;
    struct wire_typed_param *p = calloc(16, sizeof(*p)); /* at most 13 */
    unsigned n = 0;
    wire_param_int(&p[n++], VIR_DOMAIN_JOB_OPERATION, job.operation);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_TIME_ELAPSED, job.elapsed_ms);
    if (job.has_downtime)
        wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_DOWNTIME, job.downtime_ms);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_DATA_TOTAL, job.total);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_DATA_PROCESSED, job.processed);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_DATA_REMAINING, job.remaining);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_TOTAL, job.total);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_PROCESSED, job.processed);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_REMAINING, job.remaining);
    if (job.iteration) { /* a live snapshot: its pass and the guest's dirty rate */
        wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_ITERATION, job.iteration);
        wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_DIRTY_RATE, job.dirty_rate);
        wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_PAGE_SIZE, job.page_size);
    }
    if (job.error)
        wire_param_string(&p[n++], VIR_DOMAIN_JOB_ERRMSG, job.error);
    g_free(job.error);
    r->params.len = n;
    r->params.val = p;
    return true;
}

static bool do_abort_job(struct rpc_call *call, struct wire_domain_only *a, struct rpc_void *r,
                         GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_abort_job(call->driver, dom, 0, error);
}

static bool do_abort_job_flags(struct rpc_call *call, struct wire_domain_flags *a,
                               struct rpc_void *r, GError **error)
{
    g_autoptr(vsnap_domain) dom = lookup(call, &a->dom, error);
    return dom && driver_abort_job(call->driver, dom, a->flags, error);
}

#define P RPC_PROC
#define W PROC_WRITE
const struct proc_entry rpc_snapshot_procs[] = {
    P(PROC_DOMAIN_SNAPSHOT_CREATE_XML, struct create_args, xdr_create_args,
      struct snap_ret, xdr_snap_ret, do_create, W),
    P(PROC_DOMAIN_SNAPSHOT_GET_XML_DESC, struct snap_flags, xdr_snap_flags,
      struct wire_string_value, xdr_wire_string_value, do_get_xml, 0),
    P(PROC_DOMAIN_SNAPSHOT_NUM, struct wire_domain_flags, xdr_wire_domain_flags,
      struct wire_int_value, xdr_wire_int_value, do_num, 0),
    P(PROC_DOMAIN_SNAPSHOT_LIST_NAMES, struct dom_names_args, xdr_dom_names_args,
      struct names_ret, xdr_names_ret, do_list_names, 0),
    P(PROC_DOMAIN_SNAPSHOT_LOOKUP_BY_NAME, struct lookup_args, xdr_lookup_args,
      struct snap_ret, xdr_snap_ret, do_lookup, 0),
    P(PROC_DOMAIN_HAS_CURRENT_SNAPSHOT, struct wire_domain_flags, xdr_wire_domain_flags,
      struct wire_int_value, xdr_wire_int_value, do_has_current, 0),
    P(PROC_DOMAIN_SNAPSHOT_CURRENT, struct wire_domain_flags, xdr_wire_domain_flags,
      struct snap_ret, xdr_snap_ret, do_current, 0),
    P(PROC_DOMAIN_REVERT_TO_SNAPSHOT, struct snap_flags, xdr_snap_flags,
      struct rpc_void, xdr_rpc_void, do_revert, W),
    P(PROC_DOMAIN_SNAPSHOT_DELETE, struct snap_flags, xdr_snap_flags,
      struct rpc_void, xdr_rpc_void, do_delete, W),
    P(PROC_DOMAIN_SNAPSHOT_GET_PARENT, struct snap_flags, xdr_snap_flags,
      struct snap_ret, xdr_snap_ret, do_get_parent, 0),
    P(PROC_DOMAIN_SNAPSHOT_NUM_CHILDREN, struct snap_flags, xdr_snap_flags,
      struct wire_int_value, xdr_wire_int_value, do_num_children, 0),
    P(PROC_DOMAIN_SNAPSHOT_LIST_CHILDREN_NAMES, struct snap_names_args, xdr_snap_names_args,
      struct names_ret, xdr_names_ret, do_list_children, 0),
    P(PROC_DOMAIN_SNAPSHOT_IS_CURRENT, struct snap_flags, xdr_snap_flags,
      struct wire_int_value, xdr_wire_int_value, do_is_current, 0),
    P(PROC_DOMAIN_SNAPSHOT_HAS_METADATA, struct snap_flags, xdr_snap_flags,
      struct wire_int_value, xdr_wire_int_value, do_has_metadata, 0),
    P(PROC_DOMAIN_LIST_ALL_SNAPSHOTS, struct dom_list_args, xdr_dom_list_args,
      struct snaps_ret, xdr_snaps_ret, do_list_all, 0),
    P(PROC_DOMAIN_SNAPSHOT_LIST_ALL_CHILDREN, struct snap_list_args, xdr_snap_list_args,
      struct snaps_ret, xdr_snaps_ret, do_list_all_children, 0),
    P(PROC_DOMAIN_SAVE, struct save_args, xdr_save_args,
      struct rpc_void, xdr_rpc_void, do_save, W),
    P(PROC_DOMAIN_SAVE_FLAGS, struct save_flags_args, xdr_save_flags_args,
      struct rpc_void, xdr_rpc_void, do_save_flags, W),
    P(PROC_DOMAIN_RESTORE, struct restore_args, xdr_restore_args,
      struct rpc_void, xdr_rpc_void, do_restore, W),
    P(PROC_DOMAIN_RESTORE_FLAGS, struct restore_flags_args, xdr_restore_flags_args,
      struct rpc_void, xdr_rpc_void, do_restore_flags, W),
    P(PROC_DOMAIN_SAVE_IMAGE_GET_XML_DESC, struct file_flags_args, xdr_file_flags_args,
      struct wire_string_value, xdr_wire_string_value, do_save_image_xml, 0),
    P(PROC_DOMAIN_SAVE_IMAGE_DEFINE_XML, struct file_xml_flags_args,
      xdr_file_xml_flags_args, struct rpc_void, xdr_rpc_void, do_save_image_define, W),
    P(PROC_DOMAIN_MANAGED_SAVE, struct wire_domain_flags, xdr_wire_domain_flags,
      struct rpc_void, xdr_rpc_void, do_managed_save, W),
    P(PROC_DOMAIN_HAS_MANAGED_SAVE_IMAGE, struct wire_domain_flags, xdr_wire_domain_flags,
      struct wire_int_value, xdr_wire_int_value, do_has_managed, 0),
    P(PROC_DOMAIN_MANAGED_SAVE_REMOVE, struct wire_domain_flags, xdr_wire_domain_flags,
      struct rpc_void, xdr_rpc_void, do_managed_remove, W),
    P(PROC_DOMAIN_GET_JOB_INFO, struct wire_domain_only, xdr_wire_domain_only,
      struct job_info_ret, xdr_job_info_ret, do_job_info, 0),
    P(PROC_DOMAIN_GET_JOB_STATS, struct wire_domain_flags, xdr_wire_domain_flags,
      struct job_stats_ret, xdr_job_stats_ret, do_job_stats, 0),
    /* An abort never waits for the job it stops (server.c's priority workers). */
    P(PROC_DOMAIN_ABORT_JOB, struct wire_domain_only, xdr_wire_domain_only,
      struct rpc_void, xdr_rpc_void, do_abort_job, W | PROC_NO_JOB),
    P(PROC_DOMAIN_ABORT_JOB_FLAGS, struct wire_domain_flags, xdr_wire_domain_flags,
      struct rpc_void, xdr_rpc_void, do_abort_job_flags, W | PROC_NO_JOB),
};
const size_t rpc_snapshot_procs_count = G_N_ELEMENTS(rpc_snapshot_procs);
