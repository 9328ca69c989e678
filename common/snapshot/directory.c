/* The files of a snapshot directory and how one is written: URLs, the
 * partial directory, durable files, commit, progress, removal (see
 * directory.h). */
#include "snapshot/directory.h"
#include "snapshot/workset.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static bool io_failed(GError **error, int err, const char *what, const char *path)
{
    g_set_error(error, SNAP_ERROR, err == ENOSPC || err == EDQUOT ? SNAP_ERROR_NO_SPACE : SNAP_ERROR_IO,
                "%s %s: %s", what, path, g_strerror(err));
    return false;
}

char *snap_dir_url(const char *path)
{
    g_autofree char *escaped = g_uri_escape_string(path, "/", TRUE);
    return g_strconcat("file://", escaped, NULL);
}

char *snap_dir_path_from_url(const char *url, GError **error)
{
    const char *path = url;
    if (url && g_str_has_prefix(url, "file://"))
        path = url + strlen("file://");
    g_autofree char *unescaped = path && path[0] == '/' ? g_uri_unescape_string(path, NULL) : NULL;
    if (!unescaped || unescaped[0] != '/') {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                    "\"%s\" is not a file:// URL with an absolute path (file:///dir)", url ? url : "");
        return NULL;
    }
    /* Trailing slashes would make the partial directory's name wrong. */
    size_t n = strlen(unescaped);
    while (n > 1 && unescaped[n - 1] == '/')
        unescaped[--n] = '\0';
    return g_steal_pointer(&unescaped);
}

char *snap_dir_create_partial(const char *dest, GError **error)
{
    g_autofree char *parent = g_path_get_dirname(dest);
    g_autofree char *base = g_path_get_basename(dest);
    g_autofree char *pattern = g_strdup_printf("%s/.%s.partial-XXXXXX", parent, base);
    if (!g_mkdtemp_full(pattern, 0700)) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
            g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID, "cannot create a directory in %s: %s", parent,
                        g_strerror(e));
            return NULL;
        }
        io_failed(error, e, "cannot create a directory in", parent);
        return NULL;
    }
    return g_steal_pointer(&pattern);
}

bool snap_dir_write_file(const char *dir, const char *name, const char *text, GError **error)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) local = NULL;
    if (!g_file_set_contents_full(path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                  0600, &local)) {
        bool full = local->domain == G_FILE_ERROR && local->code == G_FILE_ERROR_NOSPC;
        g_set_error(error, SNAP_ERROR, full ? SNAP_ERROR_NO_SPACE : SNAP_ERROR_IO, "cannot write %s: %s", path,
                    local->message);
        return false;
    }
    return true;
}

static bool sync_dir(const char *dir, GError **error)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return io_failed(error, errno, "cannot open directory", dir);
    bool ok = fsync(fd) == 0 || io_failed(error, errno, "cannot fsync directory", dir);
    close(fd);
    return ok;
}

bool snap_dir_is_snapshot_file(const char *name)
{
    static const char *const own[] = {
        SNAP_DIR_CONFIG_FILE, SNAP_DIR_STATE_FILE, SNAP_DIR_LAYER_FILE,
        SNAP_DIR_LAYER_FILE SNAP_DIR_SEAL_SUFFIX, SNAP_DIR_STORE_ORIGIN_FILE, SNAP_DIR_WORKSET_FILE,
    };
    /* disk-<id>.layer (snapshot/disk.h) and its temporary names. */
    if (g_str_has_prefix(name, "disk-") && strstr(name, ".layer"))
        return true;
    for (size_t i = 0; i < G_N_ELEMENTS(own); i++) {
        size_t n = strlen(own[i]);
        /* g_file_set_contents and the layer writer use "<name>.XXXXXX" on the way. */
        if (strncmp(name, own[i], n) == 0 && (name[n] == '\0' || name[n] == '.'))
            return true;
    }
    return false;
}

bool snap_dir_mark_from_store(const char *dir, const char *origin, GError **error)
{
    g_autofree char *text = g_strconcat(origin, "\n", NULL);
    return snap_dir_write_file(dir, SNAP_DIR_STORE_ORIGIN_FILE, text, error);
}

bool snap_dir_is_from_store(const char *dir)
{
    g_autofree char *path = g_build_filename(dir, SNAP_DIR_STORE_ORIGIN_FILE, NULL);
    struct stat st;
    return lstat(path, &st) == 0 || errno != ENOENT;
}

static bool refuse_destination(GError **error, const char *dest, const char *why, const char *name)
{
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                "%s exists and %s%s%s (a snapshot is never written over another, nor over anything but "
                "files it does not own)", dest, why, name ? ": " : "", name ? name : "");
    return false;
}

/* The names of dest's foreign files, or NULL with *absent set when dest does
 * not exist; refused as snap_dir_check_destination says. */
static GPtrArray *foreign_files(const char *dest, bool *absent, GError **error)
{
    struct stat st;
    *absent = false;
    if (lstat(dest, &st) != 0) {
        if (errno == ENOENT) {
            g_autofree char *parent = g_path_get_dirname(dest);
            *absent = g_file_test(parent, G_FILE_TEST_IS_DIR);
            if (!*absent)
                g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                            "cannot create %s: %s is not a directory", dest, parent);
            return NULL;
        }
        io_failed(error, errno, "cannot look at", dest);
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) {
        refuse_destination(error, dest, "is not a directory", NULL);
        return NULL;
    }
    g_autoptr(GError) local = NULL;
    g_autoptr(GDir) dir = g_dir_open(dest, 0, &local);
    if (!dir) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO, "cannot read directory %s: %s", dest, local->message);
        return NULL;
    }
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *name;
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(dest, name, NULL);
        if (snap_dir_is_snapshot_file(name)) {
            refuse_destination(error, dest, "holds a snapshot file", name);
            return NULL;
        }
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            refuse_destination(error, dest, "holds something that is not a regular file", name);
            return NULL;
        }
        g_ptr_array_add(names, g_strdup(name));
    }
    return g_steal_pointer(&names);
}

bool snap_dir_check_destination(const char *dest, GError **error)
{
    bool absent;
    g_autoptr(GPtrArray) names = foreign_files(dest, &absent, error);
    return absent || names;
}

/* A copy, for when a hard link is refused (another file system's rules, or
 * protected_hardlinks for a file someone else owns). */
static bool copy_file(const char *from, const char *to, GError **error)
{
    g_autofree char *data = NULL;
    gsize len = 0;
    g_autoptr(GError) local = NULL;
    struct stat st;
    if (stat(from, &st) != 0)
        return io_failed(error, errno, "cannot look at", from);
    if (!g_file_get_contents(from, &data, &len, &local)) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO, "cannot read %s: %s", from, local->message);
        return false;
    }
    if (!g_file_set_contents_full(to, data, (gssize)len, G_FILE_SET_CONTENTS_DURABLE, st.st_mode & 07777,
                                  &local)) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO, "cannot write %s: %s", to, local->message);
        return false;
    }
    return true;
}

static bool carry_foreign_files(const char *dest, const char *partial, GPtrArray *names, GError **error)
{
    for (guint i = 0; i < names->len; i++) {
        g_autofree char *from = g_build_filename(dest, names->pdata[i], NULL);
        g_autofree char *to = g_build_filename(partial, names->pdata[i], NULL);
        if (link(from, to) != 0 && !copy_file(from, to, error))
            return false;
    }
    return true;
}

/* The directory dest was before the exchange: only the foreign files, which
 * dest now holds too. Anything else that appeared in it meanwhile stays. */
static void remove_old_directory(const char *old, GPtrArray *names)
{
    for (guint i = 0; i < names->len; i++) {
        g_autofree char *path = g_build_filename(old, names->pdata[i], NULL);
        if (unlink(path) != 0 && errno != ENOENT)
            g_warning("snapshot committed, but %s stays: %s", path, g_strerror(errno));
    }
    if (rmdir(old) != 0)
        g_warning("snapshot committed, but the directory it replaced stays at %s: %s", old, g_strerror(errno));
}

static bool exchange_into_place(const char *partial, const char *dest, GPtrArray *names, GError **error)
{
    if (!carry_foreign_files(dest, partial, names, error) || !sync_dir(partial, error))
        return false;
    if (renameat2(AT_FDCWD, partial, AT_FDCWD, dest, RENAME_EXCHANGE) != 0)
        return io_failed(error, errno, "cannot move the snapshot into place at", dest);
    remove_old_directory(partial, names);
    return true;
}

bool snap_dir_commit(const char *partial, const char *dest, GError **error)
{
    bool absent;
    g_autoptr(GPtrArray) names = foreign_files(dest, &absent, error);
    if (!absent && !names)
        return false;
    if (names && names->len > 0) {
        if (!exchange_into_place(partial, dest, names, error))
            return false;
    } else {
        if (!sync_dir(partial, error))
            return false;
        if (rename(partial, dest) != 0)
            return io_failed(error, errno, "cannot move the snapshot into place at", dest);
    }
    g_autofree char *parent = g_path_get_dirname(dest);
    return sync_dir(parent, error);
}

static guint64 files_bytes(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    guint64 total = 0;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        struct stat st;
        /* st_blocks: a sparse temporary file counts what is written. */
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            total += MIN((guint64)st.st_size, (guint64)st.st_blocks * 512);
    }
    return total;
}

guint64 snap_dir_bytes(const char *dir)
{
    g_autofree char *parent = g_path_get_dirname(dir);
    g_autofree char *base = g_path_get_basename(dir);
    g_autofree char *prefix = g_strdup_printf(".%s.partial-", base);
    guint64 total = files_bytes(dir);
    g_autoptr(GDir) d = g_dir_open(parent, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        if (g_str_has_prefix(name, prefix)) {
            g_autofree char *path = g_build_filename(parent, name, NULL);
            total += files_bytes(path);
        }
    }
    return total;
}

bool snap_dir_remove_partials(const char *dest, GError **error)
{
    g_autofree char *parent = g_path_get_dirname(dest);
    g_autofree char *base = g_path_get_basename(dest);
    g_autofree char *prefix = g_strdup_printf(".%s.partial-", base);
    g_autoptr(GDir) d = g_dir_open(parent, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        if (!g_str_has_prefix(name, prefix))
            continue;
        g_autofree char *path = g_build_filename(parent, name, NULL);
        if (!snap_dir_remove(path, error))
            return false;
    }
    return true;
}

bool snap_dir_remove(const char *dir, GError **error)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    if (!d && !g_file_test(dir, G_FILE_TEST_EXISTS))
        return true; /* already gone */
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
            if (!snap_dir_remove(path, error))
                return false;
        } else if (g_unlink(path) < 0 && errno != ENOENT) {
            return io_failed(error, errno, "cannot remove", path);
        }
    }
    if (g_rmdir(dir) < 0 && errno != ENOENT)
        return io_failed(error, errno, "cannot remove", dir);
    return true;
}
