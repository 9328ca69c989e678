#include "host/host-storage.h"

#include <libvirt/virterror.h>
#include <string.h>

#include "host/network-port.h"
#include "util/virt-error.h"

struct host_storage {
    virConnectPtr conn;
};

void host_pool_clear(struct host_pool *pool)
{
    g_clear_pointer(&pool->name, g_free);
}

void host_vol_clear(struct host_vol *vol)
{
    g_clear_pointer(&vol->pool, g_free);
    g_clear_pointer(&vol->name, g_free);
    g_clear_pointer(&vol->key, g_free);
}

host_storage *host_storage_open(const char *uri, bool readonly, const char *api, GError **error)
{
    g_autoptr(GError) why = NULL;
    virConnectPtr conn = host_driver_open(uri, readonly, "storage", &why);
    if (!conn) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_SUPPORT, "%s is not supported by vsnap without the host's "
                    "storage driver (vsnap keeps no storage pools of its own): %s", api, why->message);
        return NULL;
    }
    host_storage *s = g_new0(host_storage, 1);
    s->conn = conn;
    return s;
}

void host_storage_close(host_storage *s)
{
    if (!s)
        return;
    virConnectClose(s->conn);
    g_free(s);
}

virConnectPtr host_storage_conn(host_storage *s)
{
    return s->conn;
}

void host_storage_set_error(GError **error, const char *what)
{
    virErrorPtr last = virGetLastError();
    if (last && last->code != VIR_ERR_OK && last->message)
        g_set_error_literal(error, VSNAP_VIR_ERROR, last->code, last->message);
    else
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR, "%s failed", what);
}

char *host_storage_take_text(char *value, const char *what, GError **error)
{
    if (!value) {
        host_storage_set_error(error, what);
        return NULL;
    }
    char *copy = g_strdup(value);
    free(value);
    return copy;
}

/* The handle of pool, which is freed. */
static void take_pool_handle(virStoragePoolPtr pool, struct host_pool *out)
{
    out->name = g_strdup(virStoragePoolGetName(pool));
    virStoragePoolGetUUID(pool, out->uuid);
    virStoragePoolFree(pool);
}

/* The same for what a look-up made: false with the driver's error when it
 * made nothing. */
static bool take_pool(virStoragePoolPtr pool, struct host_pool *out, const char *what, GError **error)
{
    if (!pool) {
        host_storage_set_error(error, what);
        return false;
    }
    take_pool_handle(pool, out);
    return true;
}

virStoragePoolPtr host_storage_find_pool(host_storage *s, const struct host_pool *pool, GError **error)
{
    virStoragePoolPtr found = virStoragePoolLookupByUUID(s->conn, pool->uuid);
    if (!found)
        host_storage_set_error(error, "virStoragePoolLookupByUUID");
    return found;
}

static void clear_pool_item(gpointer item)
{
    host_pool_clear(item);
}

GArray *host_storage_pools(host_storage *s, unsigned flags, GError **error)
{
    virStoragePoolPtr *pools = NULL;
    int n = virConnectListAllStoragePools(s->conn, &pools, flags);
    if (n < 0) {
        host_storage_set_error(error, "virConnectListAllStoragePools");
        return NULL;
    }
    GArray *out = g_array_sized_new(FALSE, TRUE, sizeof(struct host_pool), (guint)n);
    g_array_set_clear_func(out, clear_pool_item);
    for (int i = 0; i < n; i++) {
        struct host_pool item = {0};
        take_pool_handle(pools[i], &item);
        g_array_append_val(out, item);
    }
    free(pools);
    return out;
}

bool host_storage_pool_by_name(host_storage *s, const char *name, struct host_pool *out, GError **error)
{
    return take_pool(virStoragePoolLookupByName(s->conn, name), out, "virStoragePoolLookupByName", error);
}

bool host_storage_pool_by_uuid(host_storage *s, const unsigned char uuid[16], struct host_pool *out,
                               GError **error)
{
    return take_pool(virStoragePoolLookupByUUID(s->conn, uuid), out, "virStoragePoolLookupByUUID", error);
}

bool host_storage_pool_by_target_path(host_storage *s, const char *path, struct host_pool *out,
                                      GError **error)
{
    return take_pool(virStoragePoolLookupByTargetPath(s->conn, path), out, "virStoragePoolLookupByTargetPath",
                     error);
}

bool host_storage_pool_define(host_storage *s, const char *xml, unsigned flags, bool start,
                              struct host_pool *out, GError **error)
{
    return start ? take_pool(virStoragePoolCreateXML(s->conn, xml, flags), out, "virStoragePoolCreateXML", error)
                 : take_pool(virStoragePoolDefineXML(s->conn, xml, flags), out, "virStoragePoolDefineXML", error);
}

static int run_action(virStoragePoolPtr pool, enum host_pool_action action, unsigned arg)
{
    switch (action) {
    case HOST_POOL_CREATE:
        return virStoragePoolCreate(pool, arg);
    case HOST_POOL_BUILD:
        return virStoragePoolBuild(pool, arg);
    case HOST_POOL_DESTROY:
        return virStoragePoolDestroy(pool);
    case HOST_POOL_DELETE:
        return virStoragePoolDelete(pool, arg);
    case HOST_POOL_UNDEFINE:
        return virStoragePoolUndefine(pool);
    case HOST_POOL_REFRESH:
        return virStoragePoolRefresh(pool, arg);
    case HOST_POOL_SET_AUTOSTART:
        return virStoragePoolSetAutostart(pool, (int)arg);
    }
    return -1;
}

bool host_storage_pool_act(host_storage *s, const struct host_pool *pool, enum host_pool_action action,
                           unsigned arg, GError **error)
{
    virStoragePoolPtr found = host_storage_find_pool(s, pool, error);
    if (!found)
        return false;
    bool ok = run_action(found, action, arg) == 0;
    if (!ok)
        host_storage_set_error(error, "the storage pool call");
    virStoragePoolFree(found);
    return ok;
}

static int read_fact(virStoragePoolPtr pool, enum host_pool_fact fact)
{
    int autostart = 0;
    switch (fact) {
    case HOST_POOL_ACTIVE:
        return virStoragePoolIsActive(pool);
    case HOST_POOL_PERSISTENT:
        return virStoragePoolIsPersistent(pool);
    case HOST_POOL_AUTOSTART:
        return virStoragePoolGetAutostart(pool, &autostart) == 0 ? autostart : -1;
    case HOST_POOL_VOLUME_COUNT:
        return virStoragePoolNumOfVolumes(pool);
    }
    return -1;
}

int host_storage_pool_fact(host_storage *s, const struct host_pool *pool, enum host_pool_fact fact,
                           GError **error)
{
    virStoragePoolPtr found = host_storage_find_pool(s, pool, error);
    if (!found)
        return -1;
    int value = read_fact(found, fact);
    if (value < 0)
        host_storage_set_error(error, "the storage pool query");
    virStoragePoolFree(found);
    return value;
}

bool host_storage_pool_info(host_storage *s, const struct host_pool *pool, virStoragePoolInfo *out,
                            GError **error)
{
    virStoragePoolPtr found = host_storage_find_pool(s, pool, error);
    if (!found)
        return false;
    bool ok = virStoragePoolGetInfo(found, out) == 0;
    if (!ok)
        host_storage_set_error(error, "virStoragePoolGetInfo");
    virStoragePoolFree(found);
    return ok;
}

char *host_storage_pool_xml(host_storage *s, const struct host_pool *pool, unsigned flags, GError **error)
{
    virStoragePoolPtr found = host_storage_find_pool(s, pool, error);
    if (!found)
        return NULL;
    char *xml = host_storage_take_text(virStoragePoolGetXMLDesc(found, flags), "virStoragePoolGetXMLDesc", error);
    virStoragePoolFree(found);
    return xml;
}

static void clear_vol_item(gpointer item)
{
    host_vol_clear(item);
}

GArray *host_storage_pool_volumes(host_storage *s, const struct host_pool *pool, unsigned flags,
                                  GError **error)
{
    virStoragePoolPtr found = host_storage_find_pool(s, pool, error);
    if (!found)
        return NULL;
    virStorageVolPtr *vols = NULL;
    int n = virStoragePoolListAllVolumes(found, &vols, flags);
    if (n < 0)
        host_storage_set_error(error, "virStoragePoolListAllVolumes");
    GArray *out = NULL;
    if (n >= 0) {
        out = g_array_sized_new(FALSE, TRUE, sizeof(struct host_vol), (guint)n);
        g_array_set_clear_func(out, clear_vol_item);
    }
    for (int i = 0; i < n; i++) {
        struct host_vol item = {.pool = g_strdup(virStoragePoolGetName(found)),
                                .name = g_strdup(virStorageVolGetName(vols[i])),
                                .key = g_strdup(virStorageVolGetKey(vols[i]))};
        g_array_append_val(out, item);
        virStorageVolFree(vols[i]);
    }
    free(vols);
    virStoragePoolFree(found);
    return out;
}

char *host_storage_find_sources(host_storage *s, const char *type, const char *spec, unsigned flags,
                                GError **error)
{
    return host_storage_take_text(virConnectFindStoragePoolSources(s->conn, type, spec, flags),
                                  "virConnectFindStoragePoolSources", error);
}

char *host_storage_capabilities(host_storage *s, unsigned flags, GError **error)
{
    return host_storage_take_text(virConnectGetStoragePoolCapabilities(s->conn, flags),
                                  "virConnectGetStoragePoolCapabilities", error);
}
