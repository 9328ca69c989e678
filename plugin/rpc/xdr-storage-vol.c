/* Storage volume calls on the vsnap connection, forwarded to the host's
 * storage driver (host-storage.h): look-ups (virt-install's first question
 * about a disk path is virStorageVolLookupByPath), creation, information,
 * resizing, wiping and deletion. Uploads and downloads (streams) are not
 * forwarded. Without a storage driver every call answers VIR_ERR_NO_SUPPORT.
 * A volume handle is {pool, name, key}. */
#include <libvirt/libvirt.h>
#include <string.h>

#include "rpc/procedure.h"
#include "storage-call.h"
#include "util/virt-error.h"

/* ---- argument and return types with their XDR filters ---- */

struct pool_name_args {
    struct wire_pool pool;
    char *name;
};
static bool_t xdr_pool_name_args(XDR *x, struct pool_name_args *a)
{
    return xdr_wire_pool(x, &a->pool) && xdr_wire_string(x, &a->name);
}

struct create_args {
    struct wire_pool pool;
    char *xml;
    uint32_t flags;
};
static bool_t xdr_create_args(XDR *x, struct create_args *a)
{
    return xdr_wire_pool(x, &a->pool) && xdr_wire_string(x, &a->xml) && xdr_u_int(x, &a->flags);
}

struct create_from_args {
    struct wire_pool pool;
    char *xml;
    struct wire_vol clone;
    uint32_t flags;
};
static bool_t xdr_create_from_args(XDR *x, struct create_from_args *a)
{
    return xdr_wire_pool(x, &a->pool) && xdr_wire_string(x, &a->xml) && xdr_wire_vol(x, &a->clone) &&
           xdr_u_int(x, &a->flags);
}

struct vol_flags {
    struct wire_vol vol;
    uint32_t flags;
};
static bool_t xdr_vol_flags(XDR *x, struct vol_flags *a)
{
    return xdr_wire_vol(x, &a->vol) && xdr_u_int(x, &a->flags);
}

struct wipe_pattern_args {
    struct wire_vol vol;
    uint32_t algorithm;
    uint32_t flags;
};
static bool_t xdr_wipe_pattern_args(XDR *x, struct wipe_pattern_args *a)
{
    return xdr_wire_vol(x, &a->vol) && xdr_u_int(x, &a->algorithm) && xdr_u_int(x, &a->flags);
}

struct resize_args {
    struct wire_vol vol;
    uint64_t capacity;
    uint32_t flags;
};
static bool_t xdr_resize_args(XDR *x, struct resize_args *a)
{
    return xdr_wire_vol(x, &a->vol) && xdr_uint64_t(x, &a->capacity) && xdr_u_int(x, &a->flags);
}

/* remote_storage_vol_get_info_ret: the type travels as an XDR char. */
struct vol_info_ret {
    char type;
    uint64_t capacity, allocation;
};
static bool_t xdr_vol_info_ret(XDR *x, struct vol_info_ret *r)
{
    return xdr_char(x, &r->type) && xdr_uint64_t(x, &r->capacity) && xdr_uint64_t(x, &r->allocation);
}

/* ---- helpers ---- */

static struct host_vol vol_ref(const struct wire_vol *vol)
{
    return (struct host_vol){.pool = vol->pool, .name = vol->name, .key = vol->key};
}

static bool answer_vol(struct host_vol *vol, struct wire_vol *r)
{
    *r = (struct wire_vol){.pool = strdup(vol->pool), .name = strdup(vol->name), .key = strdup(vol->key)};
    host_vol_clear(vol);
    return true;
}

/* ---- look-ups and creation ---- */

static bool do_lookup_by_name(struct rpc_call *call, struct pool_name_args *a, struct wire_vol *r,
                              GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool pool = rpc_pool_ref(&a->pool);
    struct host_vol vol = {0};
    return s && host_storage_vol_by_name(s, &pool, a->name, &vol, error) && answer_vol(&vol, r);
}

static bool do_lookup_by_key(struct rpc_call *call, struct wire_string_value *a, struct wire_vol *r,
                             GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_vol vol = {0};
    return s && host_storage_vol_by_key(s, a->value, &vol, error) && answer_vol(&vol, r);
}

static bool do_lookup_by_path(struct rpc_call *call, struct wire_string_value *a, struct wire_vol *r,
                              GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_vol vol = {0};
    return s && host_storage_vol_by_path(s, a->value, &vol, error) && answer_vol(&vol, r);
}

static bool do_create_xml(struct rpc_call *call, struct create_args *a, struct wire_vol *r, GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool pool = rpc_pool_ref(&a->pool);
    struct host_vol vol = {0};
    return s && host_storage_vol_create(s, &pool, a->xml, NULL, a->flags, &vol, error) && answer_vol(&vol, r);
}

static bool do_create_xml_from(struct rpc_call *call, struct create_from_args *a, struct wire_vol *r,
                               GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_pool pool = rpc_pool_ref(&a->pool);
    struct host_vol clone = vol_ref(&a->clone), vol = {0};
    return s && host_storage_vol_create(s, &pool, a->xml, &clone, a->flags, &vol, error) && answer_vol(&vol, r);
}

/* ---- changes ---- */

static bool act(struct rpc_call *call, const struct wire_vol *vol, enum host_vol_action action, uint64_t arg,
                uint32_t flags, GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_vol ref = vol_ref(vol);
    return s && host_storage_vol_act(s, &ref, action, arg, flags, error);
}

static bool do_delete(struct rpc_call *call, struct vol_flags *a, struct rpc_void *r, GError **error)
{
    (void)r;
    return act(call, &a->vol, HOST_VOL_DELETE, 0, a->flags, error);
}

static bool do_wipe(struct rpc_call *call, struct vol_flags *a, struct rpc_void *r, GError **error)
{
    (void)r;
    return act(call, &a->vol, HOST_VOL_WIPE, 0, a->flags, error);
}

static bool do_wipe_pattern(struct rpc_call *call, struct wipe_pattern_args *a, struct rpc_void *r,
                            GError **error)
{
    (void)r;
    return act(call, &a->vol, HOST_VOL_WIPE_PATTERN, a->algorithm, a->flags, error);
}

static bool do_resize(struct rpc_call *call, struct resize_args *a, struct rpc_void *r, GError **error)
{
    (void)r;
    return act(call, &a->vol, HOST_VOL_RESIZE, a->capacity, a->flags, error);
}

/* ---- what a volume is ---- */

static bool info(struct rpc_call *call, const struct wire_vol *vol, uint32_t flags, struct vol_info_ret *r,
                 GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_vol ref = vol_ref(vol);
    virStorageVolInfo got;
    if (!s || !host_storage_vol_info(s, &ref, flags, &got, error))
        return false;
    *r = (struct vol_info_ret){.type = (char)got.type, .capacity = got.capacity, .allocation = got.allocation};
    return true;
}

static bool do_get_info(struct rpc_call *call, struct wire_vol_only *a, struct vol_info_ret *r, GError **error)
{
    return info(call, &a->vol, 0, r, error);
}

static bool do_get_info_flags(struct rpc_call *call, struct vol_flags *a, struct vol_info_ret *r, GError **error)
{
    return info(call, &a->vol, a->flags, r, error);
}

static bool do_get_xml(struct rpc_call *call, struct vol_flags *a, struct wire_string_value *r, GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_vol ref = vol_ref(&a->vol);
    return s && rpc_text_reply(host_storage_vol_xml(s, &ref, a->flags, error), r);
}

static bool do_get_path(struct rpc_call *call, struct wire_vol_only *a, struct wire_string_value *r, GError **error)
{
    g_autoptr(host_storage) s = rpc_storage_for(call, error);
    struct host_vol ref = vol_ref(&a->vol);
    return s && rpc_text_reply(host_storage_vol_path(s, &ref, error), r);
}

#define P RPC_PROC
#define W PROC_WRITE
const struct proc_entry rpc_storage_vol_procs[] = {
    P(PROC_STORAGE_VOL_LOOKUP_BY_NAME, struct pool_name_args, xdr_pool_name_args, struct wire_vol, xdr_wire_vol,
      do_lookup_by_name, 0),
    P(PROC_STORAGE_VOL_LOOKUP_BY_KEY, struct wire_string_value, xdr_wire_string_value, struct wire_vol,
      xdr_wire_vol, do_lookup_by_key, 0),
    P(PROC_STORAGE_VOL_LOOKUP_BY_PATH, struct wire_string_value, xdr_wire_string_value, struct wire_vol,
      xdr_wire_vol, do_lookup_by_path, 0),
    P(PROC_STORAGE_VOL_CREATE_XML, struct create_args, xdr_create_args, struct wire_vol, xdr_wire_vol,
      do_create_xml, W),
    P(PROC_STORAGE_VOL_CREATE_XML_FROM, struct create_from_args, xdr_create_from_args, struct wire_vol,
      xdr_wire_vol, do_create_xml_from, W),
    P(PROC_STORAGE_VOL_DELETE, struct vol_flags, xdr_vol_flags, struct rpc_void, xdr_rpc_void, do_delete, W),
    P(PROC_STORAGE_VOL_WIPE, struct vol_flags, xdr_vol_flags, struct rpc_void, xdr_rpc_void, do_wipe, W),
    P(PROC_STORAGE_VOL_WIPE_PATTERN, struct wipe_pattern_args, xdr_wipe_pattern_args, struct rpc_void,
      xdr_rpc_void, do_wipe_pattern, W),
    P(PROC_STORAGE_VOL_RESIZE, struct resize_args, xdr_resize_args, struct rpc_void, xdr_rpc_void, do_resize, W),
    P(PROC_STORAGE_VOL_GET_INFO, struct wire_vol_only, xdr_wire_vol_only, struct vol_info_ret, xdr_vol_info_ret,
      do_get_info, 0),
    P(PROC_STORAGE_VOL_GET_INFO_FLAGS, struct vol_flags, xdr_vol_flags, struct vol_info_ret, xdr_vol_info_ret,
      do_get_info_flags, 0),
    P(PROC_STORAGE_VOL_GET_XML_DESC, struct vol_flags, xdr_vol_flags, struct wire_string_value,
      xdr_wire_string_value, do_get_xml, 0),
    P(PROC_STORAGE_VOL_GET_PATH, struct wire_vol_only, xdr_wire_vol_only, struct wire_string_value, xdr_wire_string_value,
      do_get_path, 0),
};
const size_t rpc_storage_vol_procs_count = G_N_ELEMENTS(rpc_storage_vol_procs);
