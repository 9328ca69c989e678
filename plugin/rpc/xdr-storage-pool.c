/* Storage pool calls on the vsnap connection, forwarded to the host's
 * storage driver (host-storage.h): the listings, look-ups, definitions and
 * lifecycle of pools, as virt-install and virt-manager use them to find a
 * disk image's pool (or define a dir pool for its directory). Without a
 * storage driver every one of them, the listings included, answers
 * VIR_ERR_NO_SUPPORT. A pool handle is {name, uuid}. */
#include <libvirt/libvirt.h>
#include <string.h>

#include "rpc/procedure.h"
#include "storage-call.h"
#include "util/virt-error.h"

#define POOL_LIST_MAX 4096u   /* REMOTE_STORAGE_POOL_LIST_MAX */
#define VOL_LIST_MAX 16384u   /* REMOTE_STORAGE_VOL_LIST_MAX */

/* ---- argument and return types with their XDR filters ---- */

struct pool_list_ret {
    unsigned len;
    struct wire_pool *pools;
    uint32_t count;
};
static bool_t xdr_pool_list_ret(XDR *x, struct pool_list_ret *r)
{
    return xdr_array(x, (char **)&r->pools, &r->len, POOL_LIST_MAX, sizeof(struct wire_pool),
                     XDR_PROC(xdr_wire_pool)) &&
           xdr_u_int(x, &r->count);
}

struct find_sources_args {
    char *type;
    char *spec;
    uint32_t flags;
};
static bool_t xdr_find_sources_args(XDR *x, struct find_sources_args *a)
{
    return xdr_wire_string(x, &a->type) && xdr_wire_opt_string(x, &a->spec) && xdr_u_int(x, &a->flags);
}

/* remote_storage_pool_get_info_ret: state travels as an XDR unsigned char. */
struct pool_info_ret {
    unsigned char state;
    uint64_t capacity, allocation, available;
};
static bool_t xdr_pool_info_ret(XDR *x, struct pool_info_ret *r)
{
    return xdr_u_char(x, &r->state) && xdr_uint64_t(x, &r->capacity) && xdr_uint64_t(x, &r->allocation) &&
           xdr_uint64_t(x, &r->available);
}

struct list_volumes_all_args {
    struct wire_pool pool;
    int32_t need_results;
    uint32_t flags;
};
static bool_t xdr_list_volumes_all_args(XDR *x, struct list_volumes_all_args *a)
{
    return xdr_wire_pool(x, &a->pool) && xdr_int(x, &a->need_results) && xdr_u_int(x, &a->flags);
}

struct vol_list_ret {
    unsigned len;
    struct wire_vol *vols;
    uint32_t count;
};
static bool_t xdr_vol_list_ret(XDR *x, struct vol_list_ret *r)
{
    return xdr_array(x, (char **)&r->vols, &r->len, VOL_LIST_MAX, sizeof(struct wire_vol),
                     XDR_PROC(xdr_wire_vol)) &&
           xdr_u_int(x, &r->count);
}

/* ---- helpers ---- */

static bool answer_pool(struct host_pool *pool, struct wire_pool *r)
{
    r->name = strdup(pool->name);
    memcpy(r->uuid, pool->uuid, 16);
    host_pool_clear(pool);
    return true;
}

/* ---- listings ---- */

static GArray *pools_in_state(struct rpc_call *call, bool active, GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    return s ? host_storage_pools(s, active ? VIR_CONNECT_LIST_STORAGE_POOLS_ACTIVE
                                            : VIR_CONNECT_LIST_STORAGE_POOLS_INACTIVE, error)
             : NULL;
}

static bool count_pools(struct rpc_call *call, bool active, struct wire_int_value *r, GError **error)
{
    g_autoptr(GArray) list = pools_in_state(call, active, error);
    if (!list)
        return false;
    r->value = (int32_t)list->len;
    return true;
}

static bool do_num_of_pools(struct rpc_call *call, struct rpc_void *a, struct wire_int_value *r, GError **error)
{
    (void)a;
    return count_pools(call, true, r, error);
}

static bool do_num_of_defined_pools(struct rpc_call *call, struct rpc_void *a, struct wire_int_value *r,
                                    GError **error)
{
    (void)a;
    return count_pools(call, false, r, error);
}

static bool name_pools(struct rpc_call *call, bool active, int32_t max, struct wire_string_list *r,
                       GError **error)
{
    if (!rpc_check_list_max(max, POOL_LIST_MAX, error))
        return false;
    g_autoptr(GArray) list = pools_in_state(call, active, error);
    if (!list)
        return false;
    rpc_names_reply(list, sizeof(struct host_pool), offsetof(struct host_pool, name), (unsigned)max, r);
    return true;
}

static bool do_list_pools(struct rpc_call *call, struct wire_int_value *a, struct wire_string_list *r,
                          GError **error)
{
    return name_pools(call, true, a->value, r, error);
}

static bool do_list_defined_pools(struct rpc_call *call, struct wire_int_value *a, struct wire_string_list *r,
                                  GError **error)
{
    return name_pools(call, false, a->value, r, error);
}

static bool do_list_all_pools(struct rpc_call *call, struct wire_list_all_args *a, struct pool_list_ret *r,
                              GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    g_autoptr(GArray) list = s ? host_storage_pools(s, a->flags, error) : NULL;
    if (!list)
        return false;
    if (list->len > POOL_LIST_MAX) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_RPC, "too many storage pools for one reply: %u, at most %u",
                    list->len, POOL_LIST_MAX);
        return false;
    }
    r->count = list->len;
    r->len = a->need_results ? list->len : 0;
    r->pools = calloc(MAX(r->len, 1), sizeof(struct wire_pool));
    for (unsigned i = 0; i < r->len; i++)
        answer_pool(&g_array_index(list, struct host_pool, i), &r->pools[i]);
    return true;
}

static bool do_find_sources(struct rpc_call *call, struct find_sources_args *a, struct wire_string_value *r,
                            GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    return s && rpc_text_reply(host_storage_find_sources(s, a->type, a->spec, a->flags, error), r);
}

static bool do_capabilities(struct rpc_call *call, struct wire_int_value *a, struct wire_string_value *r,
                            GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    return s && rpc_text_reply(host_storage_capabilities(s, (unsigned)a->value, error), r);
}

/* ---- look-ups and definitions ---- */

static bool do_lookup_by_name(struct rpc_call *call, struct wire_string_value *a, struct wire_pool *r,
                              GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool pool = {0};
    return s && host_storage_pool_by_name(s, a->value, &pool, error) && answer_pool(&pool, r);
}

static bool do_lookup_by_uuid(struct rpc_call *call, struct wire_uuid_value *a, struct wire_pool *r, GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool pool = {0};
    return s && host_storage_pool_by_uuid(s, a->uuid, &pool, error) && answer_pool(&pool, r);
}

static bool do_lookup_by_target_path(struct rpc_call *call, struct wire_string_value *a, struct wire_pool *r,
                                     GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool pool = {0};
    return s && host_storage_pool_by_target_path(s, a->value, &pool, error) && answer_pool(&pool, r);
}

static bool do_lookup_by_volume(struct rpc_call *call, struct wire_vol_only *a, struct wire_pool *r, GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_vol vol = {.pool = a->vol.pool, .name = a->vol.name, .key = a->vol.key};
    struct host_pool pool = {0};
    return s && host_storage_pool_by_volume(s, &vol, &pool, error) && answer_pool(&pool, r);
}

static bool define(struct rpc_call *call, struct wire_xml_flags *a, bool start, struct wire_pool *r,
                   GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool pool = {0};
    return s && host_storage_pool_define(s, a->xml, a->flags, start, &pool, error) && answer_pool(&pool, r);
}

static bool do_define_xml(struct rpc_call *call, struct wire_xml_flags *a, struct wire_pool *r, GError **error)
{
    return define(call, a, false, r, error);
}

static bool do_create_xml(struct rpc_call *call, struct wire_xml_flags *a, struct wire_pool *r, GError **error)
{
    return define(call, a, true, r, error);
}

/* ---- lifecycle ---- */

static bool act(struct rpc_call *call, const struct wire_pool *pool, enum host_pool_action action, uint32_t arg,
                GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool ref = rpc_pool_ref(pool);
    return s && host_storage_pool_act(s, &ref, action, arg, error);
}

static bool do_create(struct rpc_call *call, struct wire_pool_uint *a, struct rpc_void *r, GError **error)
{
    (void)r;
    return act(call, &a->pool, HOST_POOL_CREATE, a->arg, error);
}

static bool do_build(struct rpc_call *call, struct wire_pool_uint *a, struct rpc_void *r, GError **error)
{
    (void)r;
    return act(call, &a->pool, HOST_POOL_BUILD, a->arg, error);
}

static bool do_destroy(struct rpc_call *call, struct wire_pool_only *a, struct rpc_void *r, GError **error)
{
    (void)r;
    return act(call, &a->pool, HOST_POOL_DESTROY, 0, error);
}

static bool do_delete(struct rpc_call *call, struct wire_pool_uint *a, struct rpc_void *r, GError **error)
{
    (void)r;
    return act(call, &a->pool, HOST_POOL_DELETE, a->arg, error);
}

static bool do_undefine(struct rpc_call *call, struct wire_pool_only *a, struct rpc_void *r, GError **error)
{
    (void)r;
    return act(call, &a->pool, HOST_POOL_UNDEFINE, 0, error);
}

static bool do_refresh(struct rpc_call *call, struct wire_pool_uint *a, struct rpc_void *r, GError **error)
{
    (void)r;
    return act(call, &a->pool, HOST_POOL_REFRESH, a->arg, error);
}

static bool do_set_autostart(struct rpc_call *call, struct wire_pool_uint *a, struct rpc_void *r, GError **error)
{
    (void)r;
    return act(call, &a->pool, HOST_POOL_SET_AUTOSTART, a->arg != 0, error);
}

/* ---- what a pool is ---- */

static bool fact(struct rpc_call *call, const struct wire_pool *pool, enum host_pool_fact which,
                 struct wire_int_value *r, GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool ref = rpc_pool_ref(pool);
    r->value = s ? host_storage_pool_fact(s, &ref, which, error) : -1;
    return r->value >= 0;
}

static bool do_is_active(struct rpc_call *call, struct wire_pool_only *a, struct wire_int_value *r, GError **error)
{
    return fact(call, &a->pool, HOST_POOL_ACTIVE, r, error);
}

static bool do_is_persistent(struct rpc_call *call, struct wire_pool_only *a, struct wire_int_value *r,
                             GError **error)
{
    return fact(call, &a->pool, HOST_POOL_PERSISTENT, r, error);
}

static bool do_get_autostart(struct rpc_call *call, struct wire_pool_only *a, struct wire_int_value *r,
                             GError **error)
{
    return fact(call, &a->pool, HOST_POOL_AUTOSTART, r, error);
}

static bool do_num_of_volumes(struct rpc_call *call, struct wire_pool_only *a, struct wire_int_value *r,
                              GError **error)
{
    return fact(call, &a->pool, HOST_POOL_VOLUME_COUNT, r, error);
}

static bool do_get_info(struct rpc_call *call, struct wire_pool_only *a, struct pool_info_ret *r, GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool ref = rpc_pool_ref(&a->pool);
    virStoragePoolInfo info;
    if (!s || !host_storage_pool_info(s, &ref, &info, error))
        return false;
    *r = (struct pool_info_ret){.state = (unsigned char)info.state, .capacity = info.capacity,
                                .allocation = info.allocation, .available = info.available};
    return true;
}

static bool do_get_xml(struct rpc_call *call, struct wire_pool_uint *a, struct wire_string_value *r, GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool ref = rpc_pool_ref(&a->pool);
    return s && rpc_text_reply(host_storage_pool_xml(s, &ref, a->arg, error), r);
}

/* ---- its volumes ---- */

static GArray *volumes(struct rpc_call *call, const struct wire_pool *pool, unsigned flags, GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool ref = rpc_pool_ref(pool);
    GArray *list = s ? host_storage_pool_volumes(s, &ref, flags, error) : NULL;
    if (list && list->len > VOL_LIST_MAX) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_RPC, "too many volumes in pool '%s' for one reply: %u, at most %u",
                    pool->name, list->len, VOL_LIST_MAX);
        g_clear_pointer(&list, g_array_unref);
    }
    return list;
}

static bool do_list_volumes(struct rpc_call *call, struct wire_pool_uint *a, struct wire_string_list *r,
                            GError **error)
{
    if (!rpc_check_list_max((int32_t)a->arg, VOL_LIST_MAX, error))
        return false;
    g_autoptr(GArray) list = volumes(call, &a->pool, 0, error);
    if (!list)
        return false;
    rpc_names_reply(list, sizeof(struct host_vol), offsetof(struct host_vol, name), a->arg, r);
    return true;
}

static bool do_list_all_volumes(struct rpc_call *call, struct list_volumes_all_args *a, struct vol_list_ret *r,
                                GError **error)
{
    g_autoptr(GArray) list = volumes(call, &a->pool, a->flags, error);
    if (!list)
        return false;
    r->count = list->len;
    r->len = a->need_results ? list->len : 0;
    r->vols = calloc(MAX(r->len, 1), sizeof(struct wire_vol));
    for (unsigned i = 0; i < r->len; i++) {
        const struct host_vol *vol = &g_array_index(list, struct host_vol, i);
        r->vols[i] = (struct wire_vol){.pool = strdup(vol->pool), .name = strdup(vol->name),
                                       .key = strdup(vol->key)};
    }
    return true;
}

#define P RPC_PROC
#define W PROC_WRITE
const struct proc_entry rpc_storage_pool_procs[] = {
    P(PROC_CONNECT_NUM_OF_STORAGE_POOLS, struct rpc_void, xdr_rpc_void, struct wire_int_value, xdr_wire_int_value,
      do_num_of_pools, 0),
    P(PROC_CONNECT_NUM_OF_DEFINED_STORAGE_POOLS, struct rpc_void, xdr_rpc_void, struct wire_int_value,
      xdr_wire_int_value, do_num_of_defined_pools, 0),
    P(PROC_CONNECT_LIST_STORAGE_POOLS, struct wire_int_value, xdr_wire_int_value, struct wire_string_list,
      xdr_wire_string_list, do_list_pools, 0),
    P(PROC_CONNECT_LIST_DEFINED_STORAGE_POOLS, struct wire_int_value, xdr_wire_int_value, struct wire_string_list,
      xdr_wire_string_list, do_list_defined_pools, 0),
    P(PROC_CONNECT_LIST_ALL_STORAGE_POOLS, struct wire_list_all_args, xdr_wire_list_all_args, struct pool_list_ret,
      xdr_pool_list_ret, do_list_all_pools, 0),
    P(PROC_CONNECT_FIND_STORAGE_POOL_SOURCES, struct find_sources_args, xdr_find_sources_args,
      struct wire_string_value, xdr_wire_string_value, do_find_sources, W),
    P(PROC_CONNECT_GET_STORAGE_POOL_CAPABILITIES, struct wire_int_value, xdr_wire_int_value,
      struct wire_string_value, xdr_wire_string_value, do_capabilities, 0),
    P(PROC_STORAGE_POOL_LOOKUP_BY_NAME, struct wire_string_value, xdr_wire_string_value, struct wire_pool,
      xdr_wire_pool, do_lookup_by_name, 0),
    P(PROC_STORAGE_POOL_LOOKUP_BY_UUID, struct wire_uuid_value, xdr_wire_uuid_value, struct wire_pool, xdr_wire_pool,
      do_lookup_by_uuid, 0),
    P(PROC_STORAGE_POOL_LOOKUP_BY_TARGET_PATH, struct wire_string_value, xdr_wire_string_value, struct wire_pool,
      xdr_wire_pool, do_lookup_by_target_path, 0),
    P(PROC_STORAGE_POOL_LOOKUP_BY_VOLUME, struct wire_vol_only, xdr_wire_vol_only, struct wire_pool, xdr_wire_pool,
      do_lookup_by_volume, 0),
    P(PROC_STORAGE_POOL_DEFINE_XML, struct wire_xml_flags, xdr_wire_xml_flags, struct wire_pool, xdr_wire_pool,
      do_define_xml, W),
    P(PROC_STORAGE_POOL_CREATE_XML, struct wire_xml_flags, xdr_wire_xml_flags, struct wire_pool, xdr_wire_pool,
      do_create_xml, W),
    P(PROC_STORAGE_POOL_CREATE, struct wire_pool_uint, xdr_wire_pool_uint, struct rpc_void, xdr_rpc_void, do_create, W),
    P(PROC_STORAGE_POOL_BUILD, struct wire_pool_uint, xdr_wire_pool_uint, struct rpc_void, xdr_rpc_void, do_build, W),
    P(PROC_STORAGE_POOL_DESTROY, struct wire_pool_only, xdr_wire_pool_only, struct rpc_void, xdr_rpc_void, do_destroy, W),
    P(PROC_STORAGE_POOL_DELETE, struct wire_pool_uint, xdr_wire_pool_uint, struct rpc_void, xdr_rpc_void, do_delete, W),
    P(PROC_STORAGE_POOL_UNDEFINE, struct wire_pool_only, xdr_wire_pool_only, struct rpc_void, xdr_rpc_void, do_undefine,
      W),
    P(PROC_STORAGE_POOL_REFRESH, struct wire_pool_uint, xdr_wire_pool_uint, struct rpc_void, xdr_rpc_void, do_refresh, W),
    P(PROC_STORAGE_POOL_SET_AUTOSTART, struct wire_pool_uint, xdr_wire_pool_uint, struct rpc_void, xdr_rpc_void,
      do_set_autostart, W),
    P(PROC_STORAGE_POOL_IS_ACTIVE, struct wire_pool_only, xdr_wire_pool_only, struct wire_int_value, xdr_wire_int_value,
      do_is_active, 0),
    P(PROC_STORAGE_POOL_IS_PERSISTENT, struct wire_pool_only, xdr_wire_pool_only, struct wire_int_value, xdr_wire_int_value,
      do_is_persistent, 0),
    P(PROC_STORAGE_POOL_GET_AUTOSTART, struct wire_pool_only, xdr_wire_pool_only, struct wire_int_value, xdr_wire_int_value,
      do_get_autostart, 0),
    P(PROC_STORAGE_POOL_NUM_OF_VOLUMES, struct wire_pool_only, xdr_wire_pool_only, struct wire_int_value,
      xdr_wire_int_value, do_num_of_volumes, 0),
    P(PROC_STORAGE_POOL_GET_INFO, struct wire_pool_only, xdr_wire_pool_only, struct pool_info_ret, xdr_pool_info_ret,
      do_get_info, 0),
    P(PROC_STORAGE_POOL_GET_XML_DESC, struct wire_pool_uint, xdr_wire_pool_uint, struct wire_string_value,
      xdr_wire_string_value, do_get_xml, 0),
    P(PROC_STORAGE_POOL_LIST_VOLUMES, struct wire_pool_uint, xdr_wire_pool_uint, struct wire_string_list,
      xdr_wire_string_list, do_list_volumes, 0),
    P(PROC_STORAGE_POOL_LIST_ALL_VOLUMES, struct list_volumes_all_args, xdr_list_volumes_all_args,
      struct vol_list_ret, xdr_vol_list_ret, do_list_all_volumes, 0),
};
const size_t rpc_storage_pool_procs_count = G_N_ELEMENTS(rpc_storage_pool_procs);
