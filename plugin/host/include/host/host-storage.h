/* The host's libvirt storage driver (virtstoraged, or libvirtd where the
 * drivers are not split), reached through libvirt's client library at
 * storage_uri (storage:///system), for the storage pool and volume calls
 * clients make on the vsnap connection: virt-install and virt-manager look a
 * disk image up as a volume and define a dir pool for its directory, as they
 * do with QEMU. vsnap itself keeps no pools: a disk is a file its domain
 * names. Each call is one connection (with keepalive, opened read-only for a
 * read-only client), closed when the call ends; the driver's own error codes
 * (VIR_ERR_NO_STORAGE_POOL, VIR_ERR_NO_STORAGE_VOL, ...) and messages come
 * back unchanged. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

#define HOST_STORAGE_DEFAULT_URI "storage:///system"

/* The handles clients hold: a pool by name and uuid, a volume by its pool's
 * name, its name and its key (libvirt's remote_nonnull_storage_pool and
 * remote_nonnull_storage_vol). */
struct host_pool {
    char *name;
    unsigned char uuid[16];
};
struct host_vol {
    char *pool;
    char *name;
    char *key;
};
void host_pool_clear(struct host_pool *pool);
void host_vol_clear(struct host_vol *vol);

/* One connection to the storage driver. */
typedef struct host_storage host_storage;
/* For a call of api (virStorageVolLookupByPath, say): VIR_ERR_NO_SUPPORT
 * naming it when no storage driver answers within the time limit, since
 * vsnap keeps no pools of its own; virtinst takes that answer to
 * virConnectListAllStoragePools as "no storage API" and uses paths as they
 * are. */
host_storage *host_storage_open(const char *uri, bool readonly, const char *api, GError **error);
void host_storage_close(host_storage *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(host_storage, host_storage_close)

/* ---- pools (host-storage.c) ---- */

/* virConnectListAllStoragePools' flags; an array of struct host_pool. */
GArray *host_storage_pools(host_storage *s, unsigned flags, GError **error);
bool host_storage_pool_by_name(host_storage *s, const char *name, struct host_pool *out, GError **error);
bool host_storage_pool_by_uuid(host_storage *s, const unsigned char uuid[16], struct host_pool *out,
                               GError **error);
bool host_storage_pool_by_target_path(host_storage *s, const char *path, struct host_pool *out,
                                      GError **error);
/* virStoragePoolDefineXML, or virStoragePoolCreateXML when start. */
bool host_storage_pool_define(host_storage *s, const char *xml, unsigned flags, bool start,
                              struct host_pool *out, GError **error);

enum host_pool_action {
    HOST_POOL_CREATE,         /* arg: flags */
    HOST_POOL_BUILD,          /* arg: flags */
    HOST_POOL_DESTROY,
    HOST_POOL_DELETE,         /* arg: flags */
    HOST_POOL_UNDEFINE,
    HOST_POOL_REFRESH,        /* arg: flags */
    HOST_POOL_SET_AUTOSTART,  /* arg: 0 or 1 */
};
bool host_storage_pool_act(host_storage *s, const struct host_pool *pool, enum host_pool_action action,
                           unsigned arg, GError **error);

enum host_pool_fact { HOST_POOL_ACTIVE, HOST_POOL_PERSISTENT, HOST_POOL_AUTOSTART, HOST_POOL_VOLUME_COUNT };
/* 0 or more; -1 with error. */
int host_storage_pool_fact(host_storage *s, const struct host_pool *pool, enum host_pool_fact fact,
                           GError **error);
bool host_storage_pool_info(host_storage *s, const struct host_pool *pool, virStoragePoolInfo *out,
                            GError **error);
char *host_storage_pool_xml(host_storage *s, const struct host_pool *pool, unsigned flags, GError **error);
/* virStoragePoolListAllVolumes' flags; an array of struct host_vol. */
GArray *host_storage_pool_volumes(host_storage *s, const struct host_pool *pool, unsigned flags,
                                  GError **error);
/* virConnectFindStoragePoolSources (spec may be NULL), virConnectGetStoragePoolCapabilities. */
char *host_storage_find_sources(host_storage *s, const char *type, const char *spec, unsigned flags,
                                GError **error);
char *host_storage_capabilities(host_storage *s, unsigned flags, GError **error);

/* ---- volumes (host-storage-vol.c) ---- */

bool host_storage_pool_by_volume(host_storage *s, const struct host_vol *vol, struct host_pool *out,
                                 GError **error);
bool host_storage_vol_by_name(host_storage *s, const struct host_pool *pool, const char *name,
                              struct host_vol *out, GError **error);
bool host_storage_vol_by_key(host_storage *s, const char *key, struct host_vol *out, GError **error);
bool host_storage_vol_by_path(host_storage *s, const char *path, struct host_vol *out, GError **error);
/* virStorageVolCreateXML, or virStorageVolCreateXMLFrom when clone is not NULL. */
bool host_storage_vol_create(host_storage *s, const struct host_pool *pool, const char *xml,
                             const struct host_vol *clone, unsigned flags, struct host_vol *out,
                             GError **error);

enum host_vol_action {
    HOST_VOL_DELETE,        /* flags */
    HOST_VOL_WIPE,          /* flags */
    HOST_VOL_WIPE_PATTERN,  /* arg: the algorithm, flags */
    HOST_VOL_RESIZE,        /* arg: the capacity, flags */
};
bool host_storage_vol_act(host_storage *s, const struct host_vol *vol, enum host_vol_action action,
                          uint64_t arg, unsigned flags, GError **error);
/* virStorageVolGetInfoFlags (virStorageVolGetInfo for flags 0). */
bool host_storage_vol_info(host_storage *s, const struct host_vol *vol, unsigned flags, virStorageVolInfo *out,
                           GError **error);
char *host_storage_vol_xml(host_storage *s, const struct host_vol *vol, unsigned flags, GError **error);
char *host_storage_vol_path(host_storage *s, const struct host_vol *vol, GError **error);

/* For host-storage-vol.c, the same module: the connection; the pool a
 * handle names (NULL with the driver's error); the driver's last error as
 * error, its code and message unchanged ("<what> failed" when it left
 * none); a libvirt string (freed) as a GLib one, NULL with error when
 * value is NULL. */
virConnectPtr host_storage_conn(host_storage *s);
virStoragePoolPtr host_storage_find_pool(host_storage *s, const struct host_pool *pool, GError **error);
void host_storage_set_error(GError **error, const char *what);
char *host_storage_take_text(char *value, const char *what, GError **error);
