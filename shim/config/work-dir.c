/* Where a VM's active disk overlays live: the vsnap_work_dir extension of
 * VmConfig (vm-config.h). */
#include "config/vm-config.h"

#include <errno.h>
#include <glib/gstdio.h>

#include "config/shim-error.h"

bool vm_config_ensure_work_dir(struct vm_config *cfg, GError **error)
{
    if (!cfg->vsnap_work_dir) {
        g_autofree char *pattern = g_build_filename(g_get_tmp_dir(), "vsnap-work-XXXXXX", NULL);
        if (!g_mkdtemp_full(pattern, 0700)) {
            int e = errno;
            g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "cannot create a work directory for disk overlays in "
                        "%s: %s", g_get_tmp_dir(), g_strerror(e));
            return false;
        }
        cfg->vsnap_work_dir = g_steal_pointer(&pattern);
        return true;
    }
    if (g_mkdir_with_parents(cfg->vsnap_work_dir, 0700) != 0) {
        int e = errno;
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "invalid field 'vsnap_work_dir': cannot create %s: %s",
                    cfg->vsnap_work_dir, g_strerror(e));
        return false;
    }
    return true;
}

char *vm_config_new_overlay_path(struct vm_config *cfg, const struct disk_config *disk, GError **error)
{
    if (!vm_config_ensure_work_dir(cfg, error))
        return NULL;
    g_autofree char *id = g_uri_escape_string(disk->id, NULL, FALSE);
    g_autofree char *name = g_strdup_printf("%s-%08x%08x.overlay", id, g_random_int(), g_random_int());
    return g_build_filename(cfg->vsnap_work_dir, name, NULL);
}

bool vm_config_assign_overlays(struct vm_config *cfg, GError **error)
{
    for (unsigned i = 0; i < cfg->ndisks; i++) {
        struct disk_config *d = &cfg->disks[i];
        if (d->vsnap_chain && !d->vsnap_overlay && !(d->vsnap_overlay = vm_config_new_overlay_path(cfg, d, error)))
            return false;
    }
    return true;
}
