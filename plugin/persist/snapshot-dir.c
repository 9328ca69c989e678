#include "snapshot-dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "snapshot/chain.h"
#include "snapshot/directory.h"
#include "snapshot/ram-image.h"
#include "snapshot/disk.h"
#include "conf/domain-conf.h"
#include "util/virt-error.h"

/* The library's message names the file; the code says whose fault it was. */
static bool to_vir_error(GError *local, GError **error)
{
    int code = snap_error_is_bad_input(local) ? VIR_ERR_OPERATION_FAILED : VIR_ERR_SYSTEM_ERROR;
    g_set_error_literal(error, VSNAP_VIR_ERROR, code, local->message);
    g_error_free(local);
    return false;
}

char *snapdir_url(const char *dir)
{
    return snap_dir_url(dir);
}

bool snapdir_parent(const char *dir, char **parent, GError **error)
{
    GError *local = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(dir, &local);
    *parent = d ? g_strdup(d->parent_path) : NULL;
    return d || to_vir_error(local, error);
}

char *snapdir_layer_id(const char *dir, GError **error)
{
    GError *local = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(dir, &local);
    if (!d) {
        to_vir_error(local, error);
        return NULL;
    }
    char id[37];
    snap_id_to_string(&d->memory.id, id);
    return g_strdup(id);
}

char *snapdir_disk_layer(const char *dir, const char *disk_id, GError **error)
{
    GError *local = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(dir, &local);
    struct snap_disk_record record;
    bool present = false;
    if (!d || !snap_dir_disk_record(d, disk_id, &record, &present, &local)) {
        to_vir_error(local, error);
        return NULL;
    }
    if (!present)
        return NULL;
    char *path = g_build_filename(dir, record.file, NULL);
    snap_disk_record_clear(&record);
    return path;
}

/* The directory must still hold the snapshot it was taken as. */
static bool is_expected(const struct snap_dir *d, const char *expected_id, GError **error)
{
    char id[37];
    snap_id_to_string(&d->memory.id, id);
    if (!expected_id || g_str_equal(id, expected_id))
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                "%s holds snapshot layer %s, not %s that was taken there (its files were "
                "replaced)", d->path, id, expected_id);
    return false;
}

bool snapdir_check_chain(const char *top, const char *expected_id, GError **error)
{
    GError *local = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(top, &local);
    if (d && !is_expected(d, expected_id, error))
        return false;
    return (d && snap_dir_verify_chain(d, &local)) || to_vir_error(local, error);
}

bool snapdir_seal(const char *dir, GError **error)
{
    GError *local = NULL;
    return snap_dir_seal(dir, &local) || to_vir_error(local, error);
}

bool snapdir_fold_into_child(const char *inner, const char *child, GError **error)
{
    GError *local = NULL;
    return snap_dir_fold_into_child(inner, child, &local) || to_vir_error(local, error);
}

guint64 snapdir_bytes(const char *dir)
{
    return snap_dir_bytes(dir);
}

bool snapdir_remove(const char *dir, GError **error)
{
    GError *local = NULL;
    return snap_dir_remove(dir, &local) || to_vir_error(local, error);
}

bool snapdir_remove_with_partials(const char *dir, GError **error)
{
    GError *local = NULL;
    return (snap_dir_remove_partials(dir, &local) && snap_dir_remove(dir, &local)) ||
           to_vir_error(local, error);
}

bool snapdir_disks_sit_on(const char *dir, const char *parent, bool *sits, GError **error)
{
    GError *local = NULL;
    *sits = false;
    g_autoptr(snap_dir) d = snap_dir_read(dir, &local);
    g_autoptr(GPtrArray) parents = d ? snap_dir_disk_parent_dirs(d, &local) : NULL;
    if (!parents)
        return to_vir_error(local, error);
    *sits = g_ptr_array_find_with_equal_func(parents, parent, g_str_equal, NULL);
    return true;
}

bool snapdir_fold_disks_into_child(const char *inner, const char *child, GError **error)
{
    GError *local = NULL;
    return snap_dir_fold_disks_into_child(inner, child, &local) || to_vir_error(local, error);
}

static bool check_disk(const struct snap_dir *d, const struct domain_disk *disk, GError **error)
{
    GError *local = NULL;
    bool present = false;
    g_autoptr(snap_disk_chain) c = snap_dir_disk_chain(d, disk->target, &present, &local);
    if (!c && !present && !local)
        return true;
    if (c && snap_disk_chain_verify(c, disk->path, 0, &local))
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "disk '%s' (image %s): %s",
                disk->target, disk->path, local->message);
    g_error_free(local);
    return false;
}

bool snapdir_check_disks(const char *dir, const struct domain_def *def, GError **error)
{
    GError *local = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(dir, &local);
    if (!d)
        return to_vir_error(local, error);
    for (size_t i = 0; i < def->n_disks; i++)
        if (!def->disks[i].readonly && !check_disk(d, &def->disks[i], error))
            return false;
    return true;
}

bool snapdir_adopt_parent(const char *dir, const char *parent, GError **error)
{
    GError *local = NULL;
    return (snap_dir_set_parent(dir, parent, &local) &&
            snap_dir_relink_disk_parents(dir, NULL, false, &local)) ||
           to_vir_error(local, error);
}

/* Under an exclusive flock of the directory: clones started at once build
 * the image once, the others wait and open it. */
bool snapdir_build_ram_image(const char *dir, char **path, GError **error)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || flock(dfd, LOCK_EX) < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot lock %s: %s", dir, g_strerror(errno));
        if (dfd >= 0)
            close(dfd);
        return false;
    }
    GError *local = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(dir, &local);
    g_autoptr(snap_chain) c = d ? snap_dir_open_chain(d, &local) : NULL;
    int fd = c ? snap_ram_image_get(c, dir, &d->memory.id, path, &local) : -1;
    close(dfd);   /* and its lock */
    if (fd < 0)
        return to_vir_error(local, error);
    close(fd);
    return true;
}
