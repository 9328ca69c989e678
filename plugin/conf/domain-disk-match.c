/* Does a definition given for saved state (restore --xml, save --xml,
 * save-image-define) have the disks of the saved VM? The shim restores the
 * disks its snapshot recorded, and once a disk has snapshots its layers
 * belong to that image: a definition naming another image, another target
 * or another order of disks would run the saved guest on disks that are not
 * the ones its memory was using, and show users a lie. */
#include "conf/domain-conf.h"

#include <string.h>

static bool refuse(GError **error, const char *what)
{
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                "the disks of the definition given do not match the saved domain's: %s", what);
    return false;
}

static bool same_disk(const struct domain_disk *saved, const struct domain_disk *given, GError **error)
{
    if (strcmp(saved->target, given->target) != 0) {
        g_autofree char *what = g_strdup_printf("disk '%s' of the saved domain is '%s' in the definition "
                                                "given (same disks, same order)",
                                                saved->target, given->target);
        return refuse(error, what);
    }
    if (strcmp(saved->path, given->path) != 0 || saved->is_block != given->is_block) {
        g_autofree char *what = g_strdup_printf("disk '%s' has image '%s' in the saved domain, '%s' in the "
                                                "definition given",
                                                saved->target, saved->path, given->path);
        return refuse(error, what);
    }
    if (saved->readonly != given->readonly) {
        g_autofree char *what = g_strdup_printf("disk '%s' is %s in the saved domain", saved->target,
                                                saved->readonly ? "read-only" : "writable");
        return refuse(error, what);
    }
    return true;
}

bool domain_def_check_same_disks(const struct domain_def *saved, const struct domain_def *given,
                                 GError **error)
{
    for (size_t i = 0; i < MIN(saved->n_disks, given->n_disks); i++)
        if (!same_disk(&saved->disks[i], &given->disks[i], error))
            return false;
    if (saved->n_disks > given->n_disks) {
        g_autofree char *what = g_strdup_printf("disk '%s' of the saved domain is missing",
                                                saved->disks[given->n_disks].target);
        return refuse(error, what);
    }
    if (given->n_disks > saved->n_disks) {
        g_autofree char *what = g_strdup_printf("disk '%s' is not one of the saved domain's",
                                                given->disks[saved->n_disks].target);
        return refuse(error, what);
    }
    return true;
}
