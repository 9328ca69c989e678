/* file:///dir stores: objects are files under dir, written under a temporary
 * name, fsynced and renamed, so a reader sees an object whole or not at all.
 * The same tree served by a static HTTP server is an http:// store. */
#include "store/transport.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct file_transport {
    struct transport base;
    char *root;
};

struct upload {
    int fd;
    char *tmp, *path;
};

static struct file_transport *ft(struct transport *t)
{
    return (struct file_transport *)t;
}

static bool fail_errno(GError **error, int err, const char *what, const char *path)
{
    g_set_error(error, STORE_ERROR, err == ENOSPC || err == EDQUOT ? STORE_ERROR_NO_SPACE
                                    : err == ENOENT ? STORE_ERROR_NOT_FOUND : STORE_ERROR_IO,
                "%s %s: %s", what, path, g_strerror(err));
    return false;
}

static char *object_path(struct transport *t, const char *name)
{
    return g_build_filename(ft(t)->root, name, NULL);
}

static bool file_stat(struct transport *t, const char *name, guint64 *size, GError **error)
{
    g_autofree char *p = object_path(t, name);
    struct stat st;
    if (stat(p, &st) == 0) {
        *size = S_ISREG(st.st_mode) ? (guint64)st.st_size : G_MAXUINT64;
        return true;
    }
    if (errno == ENOENT) {
        *size = G_MAXUINT64;
        return true;
    }
    return fail_errno(error, errno, "stat", p);
}

static GBytes *file_get(struct transport *t, const char *name, GError **error)
{
    g_autofree char *p = object_path(t, name);
    char *data;
    gsize len;
    g_autoptr(GError) e = NULL;
    if (!g_file_get_contents(p, &data, &len, &e)) {
        g_set_error(error, STORE_ERROR,
                    g_error_matches(e, G_FILE_ERROR, G_FILE_ERROR_NOENT) ? STORE_ERROR_NOT_FOUND
                                                                         : STORE_ERROR_IO,
                    "%s", e->message);
        return NULL;
    }
    return g_bytes_new_take(data, len);
}

static struct upload *file_upload_begin(struct transport *t, const char *name, GError **error)
{
    g_autofree char *path = object_path(t, name);
    g_autofree char *dir = g_path_get_dirname(path);
    if (g_mkdir_with_parents(dir, 0755) != 0) {
        fail_errno(error, errno, "mkdir", dir);
        return NULL;
    }
    struct upload *u = g_new0(struct upload, 1);
    u->path = g_steal_pointer(&path);
    u->tmp = g_strdup_printf("%s.tmp-XXXXXX", u->path);
    u->fd = g_mkstemp_full(u->tmp, O_WRONLY | O_CLOEXEC, 0644);
    if (u->fd < 0) {
        fail_errno(error, errno, "create", u->tmp);
        g_free(u->tmp);
        g_free(u->path);
        g_free(u);
        return NULL;
    }
    return u;
}

static bool file_upload_write(struct upload *u, const void *data, gsize len, GError **error)
{
    const guint8 *p = data;
    while (len) {
        ssize_t n = write(u->fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return fail_errno(error, errno, "write", u->tmp);
        p += n;
        len -= n;
    }
    return true;
}

static void file_upload_abort(struct upload *u)
{
    if (u->fd >= 0)
        close(u->fd);
    unlink(u->tmp);
    g_free(u->tmp);
    g_free(u->path);
    g_free(u);
}

static bool fsync_dir_of(const char *path, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return fail_errno(error, err, "fsync", dir);
    }
    close(fd);
    return true;
}

static bool file_upload_finish(struct upload *u, GError **error)
{
    bool ok = true;
    if (fsync(u->fd) != 0)
        ok = fail_errno(error, errno, "fsync", u->tmp);
    else if (close(u->fd) != 0)
        ok = fail_errno(error, errno, "close", u->tmp);
    u->fd = -1;
    if (ok && rename(u->tmp, u->path) != 0)
        ok = fail_errno(error, errno, "rename", u->tmp);
    if (ok)
        ok = fsync_dir_of(u->path, error);
    if (!ok) {
        file_upload_abort(u);
        return false;
    }
    g_free(u->tmp);
    g_free(u->path);
    g_free(u);
    return true;
}

static bool file_put(struct transport *t, const char *name, GBytes *data, GError **error)
{
    struct upload *u = file_upload_begin(t, name, error);
    if (!u)
        return false;
    gsize len;
    const void *p = g_bytes_get_data(data, &len);
    if (!file_upload_write(u, p, len, error)) {
        file_upload_abort(u);
        return false;
    }
    return file_upload_finish(u, error);
}

/* ---- fetch: one reader thread per connection, ranges taken in turn ---- */

#define FILE_CHUNK (256u << 10)

struct file_fetch {
    const char *path;
    int fd;
    const struct fetch_range *ranges;
    guint nranges;
    const struct fetch_consumer *c;
    const struct store_options *opts;
    gint next;        /* atomic: next range to take */
    gint failed;      /* atomic */
    GMutex lock;
    GError *error;
};

static void file_fetch_fail(struct file_fetch *f, GError *e)
{
    g_mutex_lock(&f->lock);
    if (!f->error)
        f->error = e;
    else
        g_error_free(e);
    g_mutex_unlock(&f->lock);
    g_atomic_int_set(&f->failed, 1);
}

/* Wait while the consumer holds range i back (it lets the range it needs
 * next start, and that one was taken before i); false when the fetch
 * failed or was cancelled meanwhile. */
static bool file_fetch_may_start(struct file_fetch *f, guint i)
{
    while (f->c->may_start && !f->c->may_start(f->c->ctx, i, 100)) {
        if (g_atomic_int_get(&f->failed))
            return false;
        GError *e = NULL;
        if (store_cancelled(f->opts, &e)) {
            g_prefix_error(&e, "read %s: ", f->path);
            file_fetch_fail(f, e);
            return false;
        }
    }
    return true;
}

static gpointer file_fetch_thread(gpointer data)
{
    struct file_fetch *f = data;
    g_autofree guint8 *buf = g_malloc(FILE_CHUNK);
    for (;;) {
        guint i = (guint)g_atomic_int_add(&f->next, 1);
        if (i >= f->nranges || g_atomic_int_get(&f->failed))
            return NULL;
        if (!file_fetch_may_start(f, i))
            return NULL;
        for (guint64 off = f->ranges[i].start; off < f->ranges[i].end;) {
            if (g_atomic_int_get(&f->failed))
                return NULL;
            GError *e = NULL;
            if (store_cancelled(f->opts, &e)) {   /* checked once a chunk */
                g_prefix_error(&e, "read %s: ", f->path);
                file_fetch_fail(f, e);
                return NULL;
            }
            gsize want = MIN((guint64)FILE_CHUNK, f->ranges[i].end - off);
            ssize_t n = pread(f->fd, buf, want, off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                g_set_error(&e, STORE_ERROR, n == 0 ? STORE_ERROR_CORRUPT : STORE_ERROR_IO,
                            "read %s at %" G_GUINT64_FORMAT ": %s", f->path, off,
                            n == 0 ? "the object is shorter than its manifest says" : g_strerror(errno));
                file_fetch_fail(f, e);
                return NULL;
            }
            if (!f->c->data(f->c->ctx, i, buf, n, &e)) {
                file_fetch_fail(f, e);
                return NULL;
            }
            off += n;
        }
    }
}

static bool file_fetch(struct transport *t, const char *name, const struct fetch_range *ranges,
                       guint nranges, const struct fetch_consumer *c, GError **error)
{
    g_autofree char *path = object_path(t, name);
    struct file_fetch f = { .path = path, .ranges = ranges, .nranges = nranges, .c = c,
                            .opts = t->opts };
    f.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f.fd < 0)
        return fail_errno(error, errno, "open", path);
    g_mutex_init(&f.lock);
    guint n = MAX(1u, MIN(t->opts->connections, nranges));
    GThread **threads = g_new(GThread *, n);
    for (guint i = 0; i < n; i++)
        threads[i] = g_thread_new("store-read", file_fetch_thread, &f);
    for (guint i = 0; i < n; i++)
        g_thread_join(threads[i]);
    g_free(threads);
    close(f.fd);
    g_mutex_clear(&f.lock);
    if (f.error) {
        g_propagate_error(error, f.error);
        return false;
    }
    return true;
}

static GPtrArray *file_list(struct transport *t, const char *dir, GError **error)
{
    g_autofree char *path = object_path(t, dir);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) e = NULL;
    GDir *d = g_dir_open(path, 0, &e);
    if (!d) {
        if (g_error_matches(e, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            return names;
        g_ptr_array_unref(names);
        g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "%s", e->message);
        return NULL;
    }
    for (const char *n; (n = g_dir_read_name(d));)
        if (!strstr(n, ".tmp-"))
            g_ptr_array_add(names, g_strdup(n));
    g_dir_close(d);
    return names;
}

static void file_free(struct transport *t)
{
    g_free(ft(t)->root);
    g_free(t->url);
    g_free(t);
}

static const struct transport_ops file_ops = {
    .stat = file_stat, .get = file_get, .put = file_put,
    .upload_begin = file_upload_begin, .upload_write = file_upload_write,
    .upload_finish = file_upload_finish, .upload_abort = file_upload_abort,
    .fetch = file_fetch, .list = file_list, .free = file_free,
};

struct transport *transport_file_open(const char *url, const struct store_options *o, GError **error)
{
    g_autofree char *root = g_filename_from_uri(url, NULL, NULL);
    if (!root || !g_path_is_absolute(root)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "%s: not a file:///dir URL", url);
        return NULL;
    }
    struct file_transport *t = g_new0(struct file_transport, 1);
    t->base.ops = &file_ops;
    t->base.url = g_strdup(url);
    t->base.opts = o;
    t->root = g_steal_pointer(&root);
    return &t->base;
}
