/* Export: a reader feeds frames to compression workers, the caller's thread
 * writes them in order into the upload and keeps the seek table. */
#include "store/object.h"
#include "store/sha256.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

char *object_name(const char *digest)
{
    return g_strdup_printf("objects/%s.zst", digest);
}

static bool read_at(int fd, const char *path, void *buf, gsize len, guint64 off, GError **error)
{
    guint8 *p = buf;
    while (len) {
        ssize_t n = pread(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "read %s at %" G_GUINT64_FORMAT ": %s",
                        path, off, n == 0 ? "file shrank while it was exported" : g_strerror(errno));
            return false;
        }
        p += n;
        len -= n;
        off += n;
    }
    return true;
}

bool object_digest(int fd, const char *path, guint64 size, const struct store_options *o,
                   char out[65], GError **error)
{
    g_autoptr(sha256) sum = sha256_new();
    const gsize chunk = 4u << 20;
    g_autofree guint8 *buf = g_malloc(chunk);
    for (guint64 off = 0; off < size;) {
        gsize n = MIN(chunk, size - off);
        if (store_cancelled(o, error)) {
            g_prefix_error(error, "digest of %s: ", path);
            return false;
        }
        if (!read_at(fd, path, buf, n, off, error))
            return false;
        sha256_update(sum, buf, n);
        off += n;
    }
    sha256_finish(sum, out);
    return true;
}

/* ---- the pipeline ---- */

struct export_job {
    struct export *x;
    guint64 seq;
};

struct export {
    int fd;
    const char *path;
    guint64 size;
    guint frame_size;
    int level;
    guint window;            /* frames in flight at most */
    GBytes **done;           /* [seq % window] compressed frame, NULL until done */
    GMutex lock;
    GCond cond;
    GError *error;
    GBytes *zero_frame;      /* a whole zero frame, compressed once */
};

static void cctx_free(gpointer c)
{
    ZSTD_freeCCtx(c);
}

static GPrivate cctx_key = G_PRIVATE_INIT(cctx_free);

static void export_fail(struct export *x, GError *e)
{
    g_mutex_lock(&x->lock);
    if (!x->error)
        x->error = e;
    else
        g_error_free(e);
    g_cond_broadcast(&x->cond);
    g_mutex_unlock(&x->lock);
}

static ZSTD_CCtx *thread_cctx(void)
{
    ZSTD_CCtx *c = g_private_get(&cctx_key);
    if (!c) {
        c = ZSTD_createCCtx();
        g_private_set(&cctx_key, c);
    }
    return c;
}

static GBytes *compress_frame(struct export *x, guint64 seq, GError **error)
{
    guint64 off = seq * x->frame_size;
    gsize len = MIN((guint64)x->frame_size, x->size - off);
    g_autofree guint8 *buf = g_malloc(len);
    if (!read_at(x->fd, x->path, buf, len, off, error))
        return NULL;
    bool whole_zero = len == x->frame_size && seekable_is_zero(buf, len);
    if (whole_zero) {
        g_mutex_lock(&x->lock);
        GBytes *z = x->zero_frame ? g_bytes_ref(x->zero_frame) : NULL;
        g_mutex_unlock(&x->lock);
        if (z)
            return z;
    }
    GBytes *frame = seekable_compress_frame(thread_cctx(), buf, len, x->level, error);
    if (frame && whole_zero) {
        g_mutex_lock(&x->lock);
        if (!x->zero_frame)
            x->zero_frame = g_bytes_ref(frame);
        g_mutex_unlock(&x->lock);
    }
    return frame;
}

static void compress_job(gpointer data, gpointer user)
{
    struct export_job *j = data;
    struct export *x = j->x;
    GError *e = NULL;
    GBytes *frame = NULL;
    g_mutex_lock(&x->lock);
    bool failed = x->error != NULL;
    g_mutex_unlock(&x->lock);
    if (!failed)
        frame = compress_frame(x, j->seq, &e);
    if (!frame && !failed) {
        export_fail(x, e);
    } else if (frame) {
        g_mutex_lock(&x->lock);
        x->done[j->seq % x->window] = frame;
        g_cond_broadcast(&x->cond);
        g_mutex_unlock(&x->lock);
    }
    g_free(j);
}

static bool write_frames(struct export *x, GThreadPool *pool, struct transport *t, struct upload *u,
                         struct seekable_frame *frames, guint64 nframes, struct progress *progress,
                         guint64 *written, GError **error)
{
    guint64 submitted = 0;
    for (guint64 seq = 0; seq < nframes; seq++) {
        GError *cancelled = NULL;
        if (store_cancelled(t->opts, &cancelled)) {
            g_prefix_error(&cancelled, "export of %s: ", x->path);
            export_fail(x, cancelled);   /* the queued frames are not compressed for nothing */
            return false;
        }
        while (submitted < nframes && submitted < seq + x->window) {
            struct export_job *j = g_new(struct export_job, 1);
            *j = (struct export_job){ x, submitted++ };
            g_thread_pool_push(pool, j, NULL);
        }
        g_mutex_lock(&x->lock);
        while (!x->done[seq % x->window] && !x->error)
            g_cond_wait(&x->cond, &x->lock);
        GBytes *frame = g_steal_pointer(&x->done[seq % x->window]);
        g_mutex_unlock(&x->lock);
        if (!frame)
            return false;
        gsize len;
        const void *p = g_bytes_get_data(frame, &len);
        frames[seq] = (struct seekable_frame){
            .offset = *written, .data_offset = seq * x->frame_size, .size = (guint32)len,
            .data_size = (guint32)MIN((guint64)x->frame_size, x->size - seq * x->frame_size),
            .checksum = seekable_frame_checksum(frame) };
        bool ok = t->ops->upload_write(u, p, len, error);
        g_bytes_unref(frame);
        if (!ok)
            return false;
        *written += len;
        progress_add(progress, frames[seq].data_size);
    }
    return true;
}

bool object_export(struct transport *t, const char *name, int fd, const char *path, guint64 size,
                   struct progress *progress, struct object_info *info, GError **error)
{
    const struct store_options *o = t->opts;
    if (o->frame_size < SEEKABLE_MIN_FRAME_DATA || o->frame_size > SEEKABLE_MAX_FRAME_DATA) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "frame size %u: 4 KiB to 64 MiB (what a "
                    "reader accepts)", o->frame_size);
        return false;
    }
    guint64 nframes = (size + o->frame_size - 1) / o->frame_size;
    if (nframes > SEEKABLE_MAX_FRAMES) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID,
                    "%s: too large for frames of %u bytes", path, o->frame_size);
        return false;
    }
    struct export x = { .fd = fd, .path = path, .size = size, .frame_size = o->frame_size,
                        .level = o->level, .window = 2 * MAX(1u, o->threads) + 2 };
    x.done = g_new0(GBytes *, x.window);
    g_mutex_init(&x.lock);
    g_cond_init(&x.cond);
    struct upload *u = t->ops->upload_begin(t, name, error);
    bool ok = u != NULL;
    GThreadPool *pool = NULL;
    g_autofree struct seekable_frame *frames = g_new0(struct seekable_frame, nframes ? nframes : 1);
    guint64 written = 0;
    if (ok) {
        pool = g_thread_pool_new(compress_job, NULL, MAX(1u, o->threads), FALSE, NULL);
        ok = write_frames(&x, pool, t, u, frames, nframes, progress, &written, error);
        g_thread_pool_free(pool, FALSE, TRUE);   /* waits for running jobs */
    }
    if (!ok && x.error) {
        g_clear_error(error);
        g_propagate_error(error, g_steal_pointer(&x.error));
    }
    if (ok) {
        g_autoptr(GBytes) table = seekable_table_encode(frames, nframes);
        gsize len;
        const void *p = g_bytes_get_data(table, &len);
        g_autofree char *sum = g_compute_checksum_for_bytes(G_CHECKSUM_SHA256, table);
        g_strlcpy(info->table_sha256, sum, sizeof(info->table_sha256));
        info->object_size = written + len;
        info->frames = nframes;
        ok = t->ops->upload_write(u, p, len, error);
        if (ok) {
            ok = t->ops->upload_finish(u, error);   /* frees u, also on failure */
            u = NULL;
        }
    }
    if (u)
        t->ops->upload_abort(u);
    for (guint i = 0; i < x.window; i++)
        if (x.done[i])
            g_bytes_unref(x.done[i]);
    g_free(x.done);
    g_clear_pointer(&x.zero_frame, g_bytes_unref);
    g_clear_error(&x.error);
    g_mutex_clear(&x.lock);
    g_cond_clear(&x.cond);
    return ok;
}
