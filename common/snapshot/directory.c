/* The files of a snapshot directory and how one is written: URLs, the
 * partial directory, durable files, commit, progress, removal (see
 * directory.h). */
#include "snapshot/directory.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
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

bool snap_dir_commit(const char *partial, const char *dest, GError **error)
{
    if (!sync_dir(partial, error))
        return false;
    if (rename(partial, dest) != 0)
        return io_failed(error, errno, "cannot move the snapshot into place at", dest);
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
