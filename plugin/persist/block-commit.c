#include "persist/block-commit.h"

#include <libvirt/libvirt.h>

#include "domain/domain.h"
#include "run/process.h"
#include "snapshot/disk.h"
#include "util/virt-error.h"

static bool refuse(GError **error, int code, const char *fmt, const char *a, const char *b)
{
    g_set_error(error, VSNAP_VIR_ERROR, code, fmt, a, b);
    return false;
}

/* Index of path in chain (top first), or -1. */
static int chain_index(char **chain, const char *path)
{
    for (int i = 0; chain && chain[i]; i++)
        if (g_str_equal(chain[i], path))
            return i;
    return -1;
}

/* The disk's chain (top first: overlay, layers newest first) and image;
 * whether another disk has layers too (their snapshot directories are
 * shared, and a fold of one disk's layer must not drop the other's). */
static char **copy_chain(struct vsnap_domain *dom, const char *target, char **image, bool *others)
{
    g_mutex_lock(&dom->lock);
    char **chain = NULL;
    *others = false;
    for (size_t i = 0; i < dom->def->n_disks; i++) {
        const struct domain_disk *d = &dom->def->disks[i];
        if (g_str_equal(d->target, target)) {
            chain = g_strdupv(d->chain);
            *image = g_strdup(d->path);
        } else if (d->chain && d->chain[0] && d->chain[1]) {
            *others = true;
        }
    }
    g_mutex_unlock(&dom->lock);
    return chain;
}

/* [*t, *b): the layers to fold, *t - 1 their child. */
static bool find_range(char **chain, const char *image, const char *target, const char *top, const char *base,
                       bool shallow, int *t, int *b, GError **error)
{
    int n = (int)g_strv_length(chain);
    *t = top ? chain_index(chain, top) : 1;
    if (*t < 1)
        return refuse(error, VIR_ERR_INVALID_ARG, "could not find image '%s' in the chain of disk '%s'",
                      top, target);
    *b = shallow ? *t + 1 : !base || g_str_equal(base, image) ? n : chain_index(chain, base);
    if (*b <= *t)
        return refuse(error, VIR_ERR_INVALID_ARG, "base '%s' is not below top in the chain of disk '%s'",
                      base ? base : image, target);
    if (*t == 1)
        return refuse(error, VIR_ERR_CONFIG_UNSUPPORTED, "%s is the top sealed layer of disk '%s': what it holds "
                      "joins the active overlay with blockpull, or the image with blockcommit --active",
                      chain[1], target);
    return true;
}

bool block_commit_inner(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *target, const char *top,
                        const char *base, bool shallow, GError **error)
{
    (void)drv;
    g_autofree char *image = NULL;
    bool others = false;
    g_auto(GStrv) chain = copy_chain(dom, target, &image, &others);
    if (!chain || !chain[0] || !chain[1])
        return refuse(error, VIR_ERR_OPERATION_INVALID, "disk '%s' has no snapshot layers to commit%s", target, "");
    if (others)
        return refuse(error, VIR_ERR_CONFIG_UNSUPPORTED, "a commit of inner layers of disk '%s' in a domain with "
                      "another disk on layers is not supported by vsnap yet%s", target, "");
    int t, b;
    if (!find_range(chain, image, target, top, base, shallow, &t, &b, error))
        return false;
    g_autofree char *child = g_path_get_dirname(chain[t - 1]);
    g_autoptr(GError) local = NULL;
    for (int k = t; k < b; k++) {
        g_autofree char *inner = g_path_get_dirname(chain[k]);
        if (!snap_dir_fold_disk_into_child(inner, child, target, &local)) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "cannot commit %s into %s: %s", chain[k],
                        chain[t - 1], local->message);
            return false;
        }
    }
    for (int k = t; k < b; k++) {
        g_autofree char *inner = g_path_get_dirname(chain[k]);
        if (!process_drop_disk_layers(dom, inner, error))
            return false;
    }
    return true;
}
