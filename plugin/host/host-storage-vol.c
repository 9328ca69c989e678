/* Storage volumes on the host's storage driver (host-storage.h). A volume
 * handle is looked up by its pool's name and its own name, as libvirt's
 * storage driver finds the volume of a call. */
#include <libvirt/virterror.h>

#include "host/host-storage.h"

/* The handle of vol, which is freed; its pool's name is pool_name, or the
 * pool the driver says holds it. */
static bool take_vol(virStorageVolPtr vol, const char *pool_name, struct host_vol *out, const char *what,
                     GError **error)
{
    if (!vol) {
        host_storage_set_error(error, what);
        return false;
    }
    virStoragePoolPtr pool = pool_name ? NULL : virStoragePoolLookupByVolume(vol);
    if (!pool_name && !pool) {
        host_storage_set_error(error, "virStoragePoolLookupByVolume");
        virStorageVolFree(vol);
        return false;
    }
    out->pool = g_strdup(pool_name ? pool_name : virStoragePoolGetName(pool));
    out->name = g_strdup(virStorageVolGetName(vol));
    out->key = g_strdup(virStorageVolGetKey(vol));
    if (pool)
        virStoragePoolFree(pool);
    virStorageVolFree(vol);
    return true;
}

static virStorageVolPtr find_vol(host_storage *s, const struct host_vol *vol, GError **error)
{
    virStoragePoolPtr pool = virStoragePoolLookupByName(host_storage_conn(s), vol->pool);
    virStorageVolPtr found = pool ? virStorageVolLookupByName(pool, vol->name) : NULL;
    if (!found)
        host_storage_set_error(error, pool ? "virStorageVolLookupByName" : "virStoragePoolLookupByName");
    if (pool)
        virStoragePoolFree(pool);
    return found;
}

bool host_storage_pool_by_volume(host_storage *s, const struct host_vol *vol, struct host_pool *out,
                                 GError **error)
{
    virStorageVolPtr found = find_vol(s, vol, error);
    if (!found)
        return false;
    virStoragePoolPtr pool = virStoragePoolLookupByVolume(found);
    bool ok = pool != NULL;
    if (ok) {
        out->name = g_strdup(virStoragePoolGetName(pool));
        virStoragePoolGetUUID(pool, out->uuid);
        virStoragePoolFree(pool);
    } else {
        host_storage_set_error(error, "virStoragePoolLookupByVolume");
    }
    virStorageVolFree(found);
    return ok;
}

bool host_storage_vol_by_name(host_storage *s, const struct host_pool *pool, const char *name,
                              struct host_vol *out, GError **error)
{
    virStoragePoolPtr found = host_storage_find_pool(s, pool, error);
    if (!found)
        return false;
    bool ok = take_vol(virStorageVolLookupByName(found, name), virStoragePoolGetName(found), out,
                       "virStorageVolLookupByName", error);
    virStoragePoolFree(found);
    return ok;
}

bool host_storage_vol_by_key(host_storage *s, const char *key, struct host_vol *out, GError **error)
{
    return take_vol(virStorageVolLookupByKey(host_storage_conn(s), key), NULL, out, "virStorageVolLookupByKey",
                    error);
}

bool host_storage_vol_by_path(host_storage *s, const char *path, struct host_vol *out, GError **error)
{
    return take_vol(virStorageVolLookupByPath(host_storage_conn(s), path), NULL, out,
                    "virStorageVolLookupByPath", error);
}

bool host_storage_vol_create(host_storage *s, const struct host_pool *pool, const char *xml,
                             const struct host_vol *clone, unsigned flags, struct host_vol *out,
                             GError **error)
{
    virStoragePoolPtr found = host_storage_find_pool(s, pool, error);
    if (!found)
        return false;
    virStorageVolPtr source = clone ? find_vol(s, clone, error) : NULL;
    bool ok = false;
    if (!clone)
        ok = take_vol(virStorageVolCreateXML(found, xml, flags), virStoragePoolGetName(found), out,
                      "virStorageVolCreateXML", error);
    else if (source)
        ok = take_vol(virStorageVolCreateXMLFrom(found, xml, source, flags), virStoragePoolGetName(found), out,
                      "virStorageVolCreateXMLFrom", error);
    if (source)
        virStorageVolFree(source);
    virStoragePoolFree(found);
    return ok;
}

static int run_action(virStorageVolPtr vol, enum host_vol_action action, uint64_t arg, unsigned flags)
{
    switch (action) {
    case HOST_VOL_DELETE:
        return virStorageVolDelete(vol, flags);
    case HOST_VOL_WIPE:
        return virStorageVolWipe(vol, flags);
    case HOST_VOL_WIPE_PATTERN:
        return virStorageVolWipePattern(vol, (unsigned)arg, flags);
    case HOST_VOL_RESIZE:
        return virStorageVolResize(vol, arg, flags);
    }
    return -1;
}

bool host_storage_vol_act(host_storage *s, const struct host_vol *vol, enum host_vol_action action,
                          uint64_t arg, unsigned flags, GError **error)
{
    virStorageVolPtr found = find_vol(s, vol, error);
    if (!found)
        return false;
    bool ok = run_action(found, action, arg, flags) == 0;
    if (!ok)
        host_storage_set_error(error, "the storage volume call");
    virStorageVolFree(found);
    return ok;
}

bool host_storage_vol_info(host_storage *s, const struct host_vol *vol, unsigned flags, virStorageVolInfo *out,
                           GError **error)
{
    virStorageVolPtr found = find_vol(s, vol, error);
    if (!found)
        return false;
    int rc = flags ? virStorageVolGetInfoFlags(found, out, flags) : virStorageVolGetInfo(found, out);
    if (rc < 0)
        host_storage_set_error(error, "virStorageVolGetInfo");
    virStorageVolFree(found);
    return rc == 0;
}

char *host_storage_vol_xml(host_storage *s, const struct host_vol *vol, unsigned flags, GError **error)
{
    virStorageVolPtr found = find_vol(s, vol, error);
    if (!found)
        return NULL;
    char *xml = host_storage_take_text(virStorageVolGetXMLDesc(found, flags), "virStorageVolGetXMLDesc", error);
    virStorageVolFree(found);
    return xml;
}

char *host_storage_vol_path(host_storage *s, const struct host_vol *vol, GError **error)
{
    virStorageVolPtr found = find_vol(s, vol, error);
    if (!found)
        return NULL;
    char *path = host_storage_take_text(virStorageVolGetPath(found), "virStorageVolGetPath", error);
    virStorageVolFree(found);
    return path;
}
