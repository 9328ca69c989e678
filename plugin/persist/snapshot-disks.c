#include "snapshot-disks.h"

#include <string.h>

#include "domain/disk-state.h"
#include "managed-image.h"
#include "run/process.h"
#include "snapshot-dir.h"
#include "domain/state.h"
#include "util/test-hook.h"
#include "util/virt-error.h"

void snapshot_disks_fill(const char *dir, const struct domain_def *domain, struct snapshot_def *out)
{
    out->disks_given = domain->n_disks > 0;
    out->n_disks = domain->n_disks;
    out->disks = g_new0(struct snapshot_disk, MAX(domain->n_disks, 1));
    for (size_t i = 0; i < domain->n_disks; i++) {
        const struct domain_disk *disk = &domain->disks[i];
        struct snapshot_disk *d = &out->disks[i];
        d->name = g_strdup(disk->target);
        g_autoptr(GError) error = NULL;
        d->file = snapdir_disk_layer(dir, disk->target, &error);
        d->external = d->file || !disk->readonly;
        if (error)
            g_warning("snapshot %s, disk %s: %s", dir, disk->target, error->message);
        else if (!d->file && !disk->readonly)
            d->external = false;   /* taken before its disks had layers */
    }
}

static bool refuse_disk(GError **error, int code, const char *disk, const char *why)
{
    g_set_error(error, VSNAP_VIR_ERROR, code, "snapshot disk '%s': %s", disk, why);
    return false;
}

bool snapshot_disks_check_request(const struct snapshot_def *request, const struct domain_def *domain,
                                  GError **error)
{
    for (size_t i = 0; i < request->n_disks; i++) {
        const struct snapshot_disk *d = &request->disks[i];
        const struct domain_disk *disk = NULL;
        for (size_t j = 0; j < domain->n_disks && !disk; j++)
            if (strcmp(domain->disks[j].target, d->name) == 0)
                disk = &domain->disks[j];
        if (!disk)
            return refuse_disk(error, VIR_ERR_INVALID_ARG, d->name, "the domain has no such disk");
        if (d->file)
            return refuse_disk(error, VIR_ERR_CONFIG_UNSUPPORTED, d->name,
                               "vsnap writes each snapshot's disk layer into the snapshot itself; a file "
                               "cannot be given");
        if (d->external && disk->readonly)
            return refuse_disk(error, VIR_ERR_CONFIG_UNSUPPORTED, d->name,
                               "a read-only disk is in no snapshot (snapshot='no')");
        if (!d->external && !disk->readonly)
            return refuse_disk(error, VIR_ERR_CONFIG_UNSUPPORTED, d->name,
                               "a vsnap snapshot holds every writable disk with the memory that uses "
                               "it (snapshot='external')");
    }
    return true;
}

bool snapshot_disks_check_same(const struct snapshot_def *given, const struct snapshot_def *stored,
                               GError **error)
{
    if (!given->disks_given)
        return true;
    bool same = given->n_disks == stored->n_disks;
    for (size_t i = 0; same && i < given->n_disks; i++) {
        const struct snapshot_disk *a = &given->disks[i], *b = &stored->disks[i];
        same = strcmp(a->name, b->name) == 0 && a->external == b->external &&
               (!a->file || g_strcmp0(a->file, b->file) == 0);
    }
    if (same)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                "the disks of a vsnap snapshot are part of its saved state and cannot be changed");
    return false;
}

static bool inside(const char *path, const char *dir)
{
    size_t len = strlen(dir);
    return strncmp(path, dir, len) == 0 && path[len] == '/';
}

/* The domain's disks as they are now: the running VM's live definition, or
 * the persistent one with the recorded chains. */
static struct domain_def *current_disks(struct vsnap_domain *dom, const char *disk_dir, bool *running,
                                        GError **error)
{
    g_mutex_lock(&dom->lock);
    *running = dom->run != NULL;
    g_autoptr(domain_def) def = domain_def_copy(dom->def);
    g_mutex_unlock(&dom->lock);
    if (!*running && !disk_state_load(disk_dir, def, error))
        return NULL;
    return g_steal_pointer(&def);
}

static bool has_dir(GPtrArray *dirs, const char *dir)
{
    for (guint i = 0; i < dirs->len; i++)
        if (g_str_equal(dirs->pdata[i], dir))
            return true;
    return false;
}

/* What the current chains need of gone: the directories whose layers sit on
 * gone's (added to targets), or that the chain tops out on gone (*on_top). */
static void find_users(const struct domain_def *def, const char *gone_dir, GPtrArray *targets, bool *on_top,
                       bool *used)
{
    for (size_t i = 0; i < def->n_disks; i++) {
        char **chain = def->disks[i].chain;
        for (size_t j = 1; chain && chain[j]; j++) {
            if (!inside(chain[j], gone_dir))
                continue;
            *used = true;
            if (j == 1) {
                *on_top = true;
                continue;
            }
            g_autofree char *above = g_path_get_dirname(chain[j - 1]);
            if (!has_dir(targets, above))
                g_ptr_array_add(targets, g_steal_pointer(&above));
        }
    }
}

static bool delete_disks(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *gone_dir,
                         GPtrArray *child_dirs, bool last, bool check_only, GError **error)
{
    g_autofree char *disk_dir = disk_state_dir(drv->paths.state_dir, dom->name);
    bool running = false;
    g_autoptr(domain_def) current = current_disks(dom, disk_dir, &running, error);
    if (!current)
        return false;
    g_autoptr(GPtrArray) targets = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < child_dirs->len; i++)
        g_ptr_array_add(targets, g_strdup(child_dirs->pdata[i]));
    bool on_top = false, used = false;
    find_users(current, gone_dir, targets, &on_top, &used);
    g_autofree char *managed = managed_image_dir(drv->paths.state_dir, dom->name);
    bool has_managed = managed_image_exists(drv->paths.state_dir, dom->name);
    if (has_managed && !has_dir(targets, managed))
        g_ptr_array_add(targets, g_strdup(managed));
    bool fold_back = used && last && !running && !has_managed;
    if (on_top && !fold_back) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "the disks of domain '%s' run on the disk layer of this snapshot (%s), and nothing "
                    "above it holds its blocks: take a new snapshot first (this one then folds into it)%s",
                    dom->name, gone_dir,
                    last ? ", or shut the domain off (deleting its last snapshot then folds the disks back "
                           "into their images)"
                         : "");
        return false;
    }
    if (check_only)
        return true;
    if (fold_back) {
        if (!disk_state_fold_into_images(current, error))
            return false;
        test_hook("snapshot-disks-folded");
        return disk_state_remove(disk_dir, error);
    }
    for (guint i = 0; i < targets->len; i++)
        if (!snapdir_fold_disks_into_child(gone_dir, targets->pdata[i], error))
            return false;
    if (running)
        return process_drop_disk_layers(dom, gone_dir, error);
    return disk_state_drop_layers(disk_dir, current, gone_dir, error);
}

bool snapshot_disks_check_delete(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *gone_dir,
                                 GError **error)
{
    g_autoptr(GPtrArray) none = g_ptr_array_new();
    return delete_disks(drv, dom, gone_dir, none, true, true, error);
}

bool snapshot_disks_delete(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *gone_dir,
                           GPtrArray *child_dirs, bool last, GError **error)
{
    return delete_disks(drv, dom, gone_dir, child_dirs, last, false, error);
}

GPtrArray *snapshot_disks_in_use(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *disk_dir = disk_state_dir(drv->paths.state_dir, dom->name);
    bool running = false;
    g_autoptr(GError) error = NULL;
    g_autoptr(domain_def) current = current_disks(dom, disk_dir, &running, &error);
    if (!current) {
        g_warning("domain %s: %s", dom->name, error->message);
        return paths;
    }
    for (size_t i = 0; i < current->n_disks; i++)
        for (char **p = current->disks[i].chain; p && *p; p++)
            g_ptr_array_add(paths, g_strdup(*p));
    return paths;
}
