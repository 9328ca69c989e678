/* Import: ranged reads of whole frames (transport fetch) feed decompression
 * workers as soon as each frame's bytes are in; each worker pwrites its frame
 * at the frame's uncompressed offset. Nothing compressed is kept beyond the
 * frames in flight, which are bounded: a full queue makes the readers wait. */
#include "store/object.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

/* ---- frames ---- */

/* A compressed frame's bytes. Buffers are reused: a fresh allocation per
 * frame (1 MiB, beyond malloc's mmap threshold) costs page faults and the
 * zeroing of new memory for every frame, and its free on a worker contends
 * with the reader's next allocation for malloc's arena lock. */
struct frame_buf {
    guint8 *data;
    gsize cap;
};

struct import_range {
    guint first, end;        /* frames [first, end) */
    guint cur;               /* the frame whose bytes come next */
    struct frame_buf *buf;   /* cur's bytes so far (have of them), or NULL */
    gsize have;
};

struct import {
    const struct seekable_table *table;
    const char *name;
    int fd;
    const char *path;        /* fd's, for errors */
    struct import_range *ranges;
    GThreadPool *pool;
    struct progress *progress;
    guint in_flight, max_in_flight;
    GPtrArray *spare;   /* struct frame_buf, free for the next frames */
    GMutex lock;
    GCond cond;
    GError *error;
    gint failed;
};

struct frame_job {
    guint index;
    struct frame_buf *buf;
};

static void frame_buf_free(gpointer p)
{
    struct frame_buf *b = p;
    if (b) {
        g_free(b->data);
        g_free(b);
    }
}

/* A buffer of at least size bytes: a spare one, else a new one. */
static struct frame_buf *frame_buf_get(struct import *im, gsize size)
{
    g_mutex_lock(&im->lock);
    struct frame_buf *b = im->spare->len ? g_ptr_array_steal_index_fast(im->spare, im->spare->len - 1)
                                         : NULL;
    g_mutex_unlock(&im->lock);
    if (!b)
        b = g_new0(struct frame_buf, 1);
    if (b->cap < size) {
        g_free(b->data);
        b->data = g_malloc(size);
        b->cap = size;
    }
    return b;
}

struct worker_buffers {
    ZSTD_DCtx *dctx;
    guint8 *out;
    gsize cap;
};

static void worker_buffers_free(gpointer p)
{
    struct worker_buffers *w = p;
    ZSTD_freeDCtx(w->dctx);
    g_free(w->out);
    g_free(w);
}

static GPrivate worker_key = G_PRIVATE_INIT(worker_buffers_free);

static struct worker_buffers *worker_buffers(gsize cap)
{
    struct worker_buffers *w = g_private_get(&worker_key);
    if (!w) {
        w = g_new0(struct worker_buffers, 1);
        w->dctx = ZSTD_createDCtx();
        g_private_set(&worker_key, w);
    }
    if (w->cap < cap) {
        g_free(w->out);
        w->out = g_malloc(cap);
        w->cap = cap;
    }
    return w;
}

static void import_fail(struct import *im, GError *e)
{
    g_mutex_lock(&im->lock);
    if (!im->error)
        im->error = e;
    else
        g_error_free(e);
    g_atomic_int_set(&im->failed, 1);
    g_cond_broadcast(&im->cond);
    g_mutex_unlock(&im->lock);
}

static bool write_frame(struct import *im, const struct seekable_frame *f, const guint8 *data,
                        GError **error)
{
    if (seekable_is_zero(data, f->data_size))
        return true;   /* the file reads as zero there already */
    for (gsize done = 0; done < f->data_size;) {
        ssize_t n = pwrite(im->fd, data + done, f->data_size - done, f->data_offset + done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int err = errno;
            g_set_error(error, STORE_ERROR, err == ENOSPC || err == EDQUOT ? STORE_ERROR_NO_SPACE
                                                                           : STORE_ERROR_IO,
                        "writing %s (object %s's frame at %" G_GUINT64_FORMAT "): %s", im->path,
                        im->name, f->data_offset + done, g_strerror(err));
            return false;
        }
        done += n;
    }
    /* start the write-back now, so the caller's fsync at the end has little
     * left to wait for */
    sync_file_range(im->fd, (off64_t)f->data_offset, f->data_size, SYNC_FILE_RANGE_WRITE);
    return true;
}

static void frame_job_run(gpointer data, gpointer user)
{
    struct frame_job *j = data;
    struct import *im = user;
    const struct seekable_frame *f = &im->table->frames[j->index];
    GError *e = NULL;
    if (!g_atomic_int_get(&im->failed)) {
        struct worker_buffers *w = worker_buffers(MAX(f->data_size, 1u));
        if (seekable_decompress_frame(w->dctx, f, j->index, j->buf->data, w->out, im->name, &e) &&
            write_frame(im, f, w->out, &e))
            progress_add(im->progress, f->data_size);
        else
            import_fail(im, e);
    }
    g_mutex_lock(&im->lock);
    g_ptr_array_add(im->spare, j->buf);
    g_free(j);
    im->in_flight--;
    g_cond_broadcast(&im->cond);
    g_mutex_unlock(&im->lock);
}

static bool aborted(struct import *im, GError **error)
{
    g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "import of %s stopped", im->name);
    return false;
}

/* Hand a complete frame to the workers, waiting while too many are queued. */
static bool dispatch(struct import *im, guint index, struct frame_buf *buf, GError **error)
{
    g_mutex_lock(&im->lock);
    while (im->in_flight >= im->max_in_flight && !im->error)
        g_cond_wait(&im->cond, &im->lock);
    bool failed = im->error != NULL;
    if (!failed)
        im->in_flight++;
    else
        g_ptr_array_add(im->spare, buf);
    g_mutex_unlock(&im->lock);
    if (failed)
        return aborted(im, error);
    struct frame_job *j = g_new(struct frame_job, 1);
    *j = (struct frame_job){ index, buf };
    g_thread_pool_push(im->pool, j, NULL);
    return true;
}

static bool import_data(void *ctx, guint range, const guint8 *buf, gsize len, GError **error)
{
    struct import *im = ctx;
    struct import_range *r = &im->ranges[range];
    if (g_atomic_int_get(&im->failed))
        return aborted(im, error);
    while (len) {
        if (r->cur >= r->end) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE,
                        "object %s: the server sent more bytes than asked for", im->name);
            return false;
        }
        const struct seekable_frame *f = &im->table->frames[r->cur];
        if (!r->buf)
            r->buf = frame_buf_get(im, f->size);
        gsize want = f->size - r->have;
        gsize take = MIN(want, len);
        memcpy(r->buf->data + r->have, buf, take);
        r->have += take;
        if (take == want) {
            struct frame_buf *whole = g_steal_pointer(&r->buf);
            r->have = 0;
            if (!dispatch(im, r->cur++, whole, error))
                return false;
        }
        buf += take;
        len -= take;
    }
    return true;
}

static guint64 import_restart(void *ctx, guint range)
{
    struct import *im = ctx;
    struct import_range *r = &im->ranges[range];
    r->have = 0;
    if (r->cur >= r->end)
        return im->table->frames[r->end - 1].offset + im->table->frames[r->end - 1].size;
    return im->table->frames[r->cur].offset;
}

/* Consecutive frames, as many as fit in range_size (at least one). */
static guint plan_ranges(const struct seekable_table *t, guint64 range_size,
                         struct import_range **out_ranges, struct fetch_range **out_fetch)
{
    GArray *ranges = g_array_new(FALSE, TRUE, sizeof(struct import_range));
    GArray *fetch = g_array_new(FALSE, TRUE, sizeof(struct fetch_range));
    for (guint i = 0; i < t->nframes;) {
        struct import_range r = { .first = i, .cur = i };
        guint64 bytes = t->frames[i].size;
        for (i++; i < t->nframes && bytes + t->frames[i].size <= range_size; i++)
            bytes += t->frames[i].size;
        r.end = i;
        g_array_append_val(ranges, r);
        struct fetch_range f = { t->frames[r.first].offset, t->frames[r.first].offset + bytes };
        g_array_append_val(fetch, f);
    }
    guint n = ranges->len;
    *out_ranges = (struct import_range *)g_array_free(ranges, FALSE);
    *out_fetch = (struct fetch_range *)g_array_free(fetch, FALSE);
    return n;
}

bool object_import(struct transport *t, const char *name, const struct seekable_table *table,
                   int fd, const char *path, struct progress *progress, GError **error)
{
    const struct store_options *o = t->opts;
    if (table->nframes == 0)
        return true;
    struct import im = { .table = table, .name = name, .fd = fd, .path = path, .progress = progress,
                         .max_in_flight = 4 * MAX(1u, o->threads) + 2 * MAX(1u, o->connections),
                         .spare = g_ptr_array_new_with_free_func(frame_buf_free) };
    g_mutex_init(&im.lock);
    g_cond_init(&im.cond);
    struct fetch_range *fetch;
    guint n = plan_ranges(table, o->range_size, &im.ranges, &fetch);
    im.pool = g_thread_pool_new(frame_job_run, &im, MAX(1u, o->threads), FALSE, NULL);
    struct fetch_consumer c = { import_data, import_restart, &im };
    GError *fetch_error = NULL;
    bool ok = t->ops->fetch(t, name, fetch, n, &c, &fetch_error);
    if (!ok)   /* the frames still queued are not decompressed for nothing */
        g_atomic_int_set(&im.failed, 1);
    g_thread_pool_free(im.pool, FALSE, TRUE);
    if (im.error) {   /* a worker's error is the cause of the fetch's */
        g_clear_error(&fetch_error);
        g_propagate_error(error, im.error);
        ok = false;
    } else if (!ok) {
        g_propagate_error(error, fetch_error);
    }
    for (guint i = 0; i < n; i++) {
        if (ok && im.ranges[i].cur != im.ranges[i].end) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE, "object %s: short read", name);
            ok = false;
        }
        frame_buf_free(im.ranges[i].buf);
    }
    g_ptr_array_unref(im.spare);
    g_free(im.ranges);
    g_free(fetch);
    g_mutex_clear(&im.lock);
    g_cond_clear(&im.cond);
    return ok;
}
