#include "snapshot-disks.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <unistd.h>
#include <string.h>

#include "domain/disk-state.h"
#include "managed-image.h"
#include "run/process.h"
#include "snapshot-dir.h"
#include "snapshot-tree.h"
#include "snapshot/directory.h"
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

/* keeps: the disks run on gone's layer with nothing above it; its
 * directory becomes a kept part of their chains (snapshot_disks_keep_layer)
 * once the snapshot's metadata is done with, instead of going. */
static bool delete_disks(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *gone_dir,
                         GPtrArray *child_dirs, bool last, bool check_only, bool *keeps, GError **error)
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
    /* A clone's images are its origin's base: never folded into. */
    bool fold_back = used && last && !running && !has_managed && !domain_def_is_clone(current);
    *keeps = on_top && !fold_back;
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
    /* A kept layer stays in the chains, under its new name. */
    if (*keeps)
        return true;
    if (running)
        return process_drop_disk_layers(dom, gone_dir, error);
    return disk_state_drop_layers(disk_dir, current, gone_dir, error);
}

bool snapshot_disks_check_delete(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *gone_dir,
                                 bool *keeps, GError **error)
{
    g_autoptr(GPtrArray) none = g_ptr_array_new();
    return delete_disks(drv, dom, gone_dir, none, true, true, keeps, error);
}

bool snapshot_disks_delete(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *gone_dir,
                           GPtrArray *child_dirs, bool last, bool *keeps, GError **error)
{
    return delete_disks(drv, dom, gone_dir, child_dirs, last, false, keeps, error);
}

/* ---- kept layers (disk-state.h: <disk dir>/kept-<id>) ---- */

static bool refuse_errno(GError **error, const char *what, const char *path)
{
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot %s %s: %s", what, path, g_strerror(errno));
    return false;
}

/* The chains (the running VM's, told to its shim, or the record of a shut-off
 * domain) name the layers in from by their place in to. */
static bool relocate_chains(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *from, const char *to,
                            GError **error)
{
    g_autofree char *disk_dir = disk_state_dir(drv->paths.state_dir, dom->name);
    bool running = false;
    g_autoptr(domain_def) current = current_disks(dom, disk_dir, &running, error);
    if (!current)
        return false;
    return running ? process_move_disk_layers(dom, from, to, error)
                   : disk_state_relocate(disk_dir, current, from, to, error);
}

/* A rename is durable once both directories are. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

static bool remove_file(const char *dir, const char *name, GError **error)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    return g_unlink(path) == 0 || errno == ENOENT || refuse_errno(error, "remove", path);
}

/* A kept directory is no snapshot: the files that made it one go, and so
 * does its memory (the snapshots whose memory was a diff on it took its
 * pages before it was moved). state.json and config.json stay: they hold
 * the disk records that chains resolve through. */
static bool strip_snapshot_files(const char *kept, GError **error)
{
    for (const char *const *f = snapshot_entry_own_files; *f; f++)
        if (!remove_file(kept, *f, error))
            return false;
    return remove_file(kept, SNAP_DIR_LAYER_FILE SNAP_DIR_SEAL_SUFFIX, error) &&
           remove_file(kept, SNAP_DIR_LAYER_FILE, error);
}

bool snapshot_disks_keep_layer(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *gone_dir,
                               GError **error)
{
    g_autofree char *disk_dir = disk_state_dir(drv->paths.state_dir, dom->name);
    g_autofree char *kept = disk_state_kept_dir(disk_dir, gone_dir);
    if (!disk_state_make_dir(disk_dir, error))
        return false;
    test_hook("snapshot-keep-before-move");
    /* The rename is the delete: the snapshot's metadata moves with it out of
     * the domain's snapshots, and a crash after it finds the layer kept. */
    if (g_file_test(gone_dir, G_FILE_TEST_IS_DIR) && g_rename(gone_dir, kept) != 0)
        return refuse_errno(error, "move the kept disk layer's directory to", kept);
    g_autofree char *snapshots = g_path_get_dirname(gone_dir);
    sync_dir(snapshots);
    sync_dir(disk_dir);
    test_hook("snapshot-keep-moved");
    return strip_snapshot_files(kept, error) && relocate_chains(drv, dom, gone_dir, kept, error);
}

/* A kept layer's move the shim or the record was not told of (a daemon
 * killed right after the rename): told now. */
bool snapshot_disks_finish_moves(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    g_autofree char *disk_dir = disk_state_dir(drv->paths.state_dir, dom->name);
    /* Only a rename already made can have been missed: without a kept
     * directory there is nothing to tell, and the shim is not asked (every
     * job of the domain comes here, before it is seen as running). */
    g_autoptr(GPtrArray) kept = disk_state_list(disk_dir, true);
    if (kept->len == 0)
        return true;
    GPtrArray *shim_layers = NULL;
    if (!process_shim_disk_layers(dom, &shim_layers, error))
        return false;
    g_autoptr(GPtrArray) layers = shim_layers;
    /* The shim's view, then the daemon's (the record of a shut-off domain). */
    g_autoptr(GPtrArray) recorded = snapshot_disks_in_use(drv, dom);
    for (guint i = 0; i < recorded->len; i++)
        g_ptr_array_add(layers, g_strdup(recorded->pdata[i]));
    for (guint i = 0; i < layers->len; i++) {
        const char *layer = layers->pdata[i];
        g_autofree char *kept_layer = g_file_test(layer, G_FILE_TEST_EXISTS) ? NULL
                                                                              : disk_state_kept_path(disk_dir, layer);
        if (!kept_layer)
            continue;
        g_autofree char *from = g_path_get_dirname(layer);
        g_autofree char *to = g_path_get_dirname(kept_layer);
        g_message("domain %s: its disks' chains name %s, kept as %s: following it", dom->name, from, to);
        if (!relocate_chains(drv, dom, from, to, error))
            return false;
    }
    for (guint i = 0; i < kept->len; i++)
        if (!strip_snapshot_files(kept->pdata[i], error))
            return false;
    return true;
}

/* Whether any of dirs' snapshots has a disk layer taken on one in kept. */
static bool add_users(GPtrArray *dirs, const char *kept, GPtrArray *users, GError **error)
{
    for (guint i = 0; i < dirs->len; i++) {
        bool sits = false;
        if (!snapdir_disks_sit_on(dirs->pdata[i], kept, &sits, error))
            return false;
        if (sits)
            g_ptr_array_add(users, g_strdup(dirs->pdata[i]));
    }
    return true;
}

/* Every directory whose disk layers were taken on kept's: snapshots, saves,
 * the managed save image. */
static GPtrArray *kept_users(struct vsnap_driver *drv, struct vsnap_domain *dom, struct snapshot_tree *tree,
                             const char *kept, GError **error)
{
    g_autofree char *disk_dir = disk_state_dir(drv->paths.state_dir, dom->name);
    g_autoptr(GPtrArray) dirs = disk_state_list(disk_dir, false);
    for (guint i = 0; i < tree->entries->len; i++)
        g_ptr_array_add(dirs, g_strdup(((struct snapshot_entry *)tree->entries->pdata[i])->dir));
    if (managed_image_exists(drv->paths.state_dir, dom->name))
        g_ptr_array_add(dirs, managed_image_dir(drv->paths.state_dir, dom->name));
    g_autoptr(GPtrArray) users = g_ptr_array_new_with_free_func(g_free);
    return add_users(dirs, kept, users, error) ? g_steal_pointer(&users) : NULL;
}

/* One kept directory: folded into whatever was taken on it, out of the
 * chains, removed; unless the disks still run on it. Each step can be
 * redone, so a crash anywhere is finished by the next call. */
static bool fold_kept(struct vsnap_driver *drv, struct vsnap_domain *dom, struct snapshot_tree *tree,
                      const char *kept, GError **error)
{
    g_autofree char *disk_dir = disk_state_dir(drv->paths.state_dir, dom->name);
    bool running = false;
    g_autoptr(domain_def) current = current_disks(dom, disk_dir, &running, error);
    if (!current)
        return false;
    g_autoptr(GPtrArray) above = g_ptr_array_new_with_free_func(g_free);
    bool on_top = false, used = false;
    find_users(current, kept, above, &on_top, &used);
    if (on_top)
        return true;
    g_autoptr(GPtrArray) users = kept_users(drv, dom, tree, kept, error);
    if (!users)
        return false;
    for (guint i = 0; i < users->len; i++)
        if (!snapdir_fold_disks_into_child(kept, users->pdata[i], error))
            return false;
    test_hook("snapshot-kept-folded");
    if (used && !(running ? process_drop_disk_layers(dom, kept, error)
                          : disk_state_drop_layers(disk_dir, current, kept, error)))
        return false;
    g_message("domain %s: the kept disk layers in %s are folded into %u snapshot(s) and go", dom->name, kept,
              users->len);
    return snapdir_remove(kept, error);
}

bool snapshot_disks_fold_kept(struct vsnap_driver *drv, struct vsnap_domain *dom, struct snapshot_tree *tree,
                              GError **error)
{
    g_autofree char *disk_dir = disk_state_dir(drv->paths.state_dir, dom->name);
    g_autoptr(GPtrArray) kept = disk_state_list(disk_dir, true);
    for (guint i = 0; i < kept->len; i++)
        if (!fold_kept(drv, dom, tree, kept->pdata[i], error))
            return false;
    return true;
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
