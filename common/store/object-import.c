/* Import: ranged reads of whole frames (transport fetch) feed decompression
 * workers as soon as each frame's bytes are in; each worker pwrites its frame
 * at the frame's uncompressed offset and hands it to the hashing stage
 * (frame-order.h), which digests the frames in order.
 *
 * Memory is bounded whatever the object claims (README.md, "Pull"): a
 * range's compressed bytes are kept in one buffer from when it starts until
 * its last frame is decompressed, and a range starts only while the ranges
 * held stay within the import's budget (import_may_start); a frame is
 * decompressed only inside the hashing stage's window, so the decompressed
 * frames waiting for their turn stay within it. */
#include "store/frame-order.h"
#include "store/object.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

/* Compressed bytes the ranges of an import may hold at once: this many
 * times what its connections transfer at once, so the next ranges can
 * start while the hashing stage catches up with the last ones. */
#define IMPORT_BUDGET_RANGES 2u
/* Uncompressed bytes that may be decompressed ahead of the digest: at
 * least two frames per worker, within these bounds. */
#define IMPORT_MIN_WINDOW (16ull << 20)
#define IMPORT_MAX_WINDOW (256ull << 20)

/* A range's compressed bytes. Buffers are reused: a fresh allocation per
 * range (megabytes, beyond malloc's mmap threshold) costs page faults and
 * the zeroing of new memory each time. */
struct range_buf {
    guint8 *data;
    gsize cap;
};

struct import_range {
    guint first, end;        /* frames [first, end) */
    guint64 start, bytes;    /* where its bytes are in the object */
    struct range_buf *buf;   /* from when it starts until its frames are decompressed */
    guint64 received;        /* bytes of it in buf */
    guint whole;             /* frames [first, whole) are in buf whole */
    guint handed;            /* frames [first, handed) went to the workers */
    guint decompressed;      /* how many of those are done */
};

struct import {
    const struct seekable_table *table;
    const char *name;
    int fd;
    const char *path;        /* fd's, for errors */
    struct progress *progress;
    struct import_range *ranges;
    guint nranges;
    struct frame_order *order;
    GThreadPool *pool;
    GMutex lock;
    GCond cond;              /* a range let go of its buffer, a frame was hashed, a failure */
    guint64 budget, held;    /* compressed bytes the ranges may hold, and hold */
    guint max_held, held_ranges;
    GPtrArray *open;         /* ranges holding frames not yet handed to the workers */
    GPtrArray *spare;        /* struct range_buf */
    GError *error;
    gint failed;
};

struct frame_job {
    guint range, index;
};

static void range_buf_free(gpointer p)
{
    struct range_buf *b = p;
    if (b) {
        g_free(b->data);
        g_free(b);
    }
}

struct worker_state {
    ZSTD_DCtx *dctx;
};

static void worker_state_free(gpointer p)
{
    struct worker_state *w = p;
    ZSTD_freeDCtx(w->dctx);
    g_free(w);
}

static GPrivate worker_key = G_PRIVATE_INIT(worker_state_free);

static ZSTD_DCtx *worker_dctx(void)
{
    struct worker_state *w = g_private_get(&worker_key);
    if (!w) {
        w = g_new0(struct worker_state, 1);
        w->dctx = ZSTD_createDCtx();
        g_private_set(&worker_key, w);
    }
    return w->dctx;
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
    frame_order_stop(im->order);
}

static bool aborted(struct import *im, GError **error)
{
    g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "import of %s stopped", im->name);
    return false;
}

/* ---- the workers ---- */

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

/* A range whose frames are all decompressed lets go of its buffer (kept
 * for the next range while the budget allows). With im->lock held. */
static void range_done(struct import *im, struct import_range *r)
{
    if (++r->decompressed < r->end - r->first || !r->buf)
        return;
    struct range_buf *b = g_steal_pointer(&r->buf);
    im->held -= r->bytes;
    im->held_ranges--;
    gsize spare_bytes = 0;
    for (guint i = 0; i < im->spare->len; i++)
        spare_bytes += ((struct range_buf *)im->spare->pdata[i])->cap;
    if (im->held + spare_bytes + b->cap <= im->budget)
        g_ptr_array_add(im->spare, b);
    else
        range_buf_free(b);
    g_cond_broadcast(&im->cond);
}

static void decompress_frame(struct import *im, struct import_range *r, guint index)
{
    const struct seekable_frame *f = &im->table->frames[index];
    const guint8 *bytes = r->buf->data + (f->offset - r->start);
    struct frame_out *out = frame_order_buffer(im->order, f->data_size);
    GError *e = NULL;
    if (seekable_decompress_frame(worker_dctx(), f, index, bytes, out->data, im->name, &e) &&
        write_frame(im, f, out->data, &e)) {
        progress_add(im->progress, f->data_size);
        frame_order_put(im->order, index, out);
    } else {
        frame_order_give_back(im->order, out);
        import_fail(im, e);
    }
}

static void frame_job_run(gpointer data, gpointer user)
{
    struct frame_job *j = data;
    struct import *im = user;
    struct import_range *r = &im->ranges[j->range];
    if (!g_atomic_int_get(&im->failed))
        decompress_frame(im, r, j->index);
    g_mutex_lock(&im->lock);
    range_done(im, r);
    g_mutex_unlock(&im->lock);
    g_free(j);
}

/* ---- frames to the workers ---- */

/* The frames of r that are whole and that the hashing stage admits, to the
 * workers. With im->lock held. */
static void hand_out(struct import *im, struct import_range *r)
{
    while (r->handed < r->whole && frame_order_admits(im->order, r->handed)) {
        struct frame_job *j = g_new(struct frame_job, 1);
        *j = (struct frame_job){ (guint)(r - im->ranges), r->handed++ };
        g_thread_pool_push(im->pool, j, NULL);
    }
    if (r->handed == r->end)
        g_ptr_array_remove_fast(im->open, r);
}

/* The hashing stage moved on (its thread): frames it refused may go now. */
static void frames_hashed(void *ctx)
{
    struct import *im = ctx;
    g_mutex_lock(&im->lock);
    for (guint i = im->open->len; i-- > 0;)
        hand_out(im, im->open->pdata[i]);
    g_cond_broadcast(&im->cond);
    g_mutex_unlock(&im->lock);
}

static bool import_data(void *ctx, guint range, const guint8 *buf, gsize len, GError **error)
{
    struct import *im = ctx;
    struct import_range *r = &im->ranges[range];
    if (g_atomic_int_get(&im->failed))
        return aborted(im, error);
    if (!r->buf || len > r->bytes - r->received) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE,
                    "object %s: the server sent more bytes than asked for", im->name);
        return false;
    }
    /* only this range's reader writes here, beyond what the workers read */
    memcpy(r->buf->data + r->received, buf, len);
    g_mutex_lock(&im->lock);
    r->received += len;
    const struct seekable_frame *frames = im->table->frames;
    while (r->whole < r->end && frames[r->whole].offset + frames[r->whole].size <= r->start + r->received)
        r->whole++;
    hand_out(im, r);
    g_mutex_unlock(&im->lock);
    return true;
}

static guint64 import_restart(void *ctx, guint range)
{
    struct import *im = ctx;
    struct import_range *r = &im->ranges[range];
    g_mutex_lock(&im->lock);
    guint64 at = r->start + r->received;   /* what is in the buffer stays */
    g_mutex_unlock(&im->lock);
    return at;
}

/* A range may start when the ranges held leave room in the budget, and the
 * range holding the next frame to hash always may (nothing else can move
 * until it comes). With im->lock held. */
static bool may_hold(struct import *im, const struct import_range *r)
{
    guint next = frame_order_next(im->order);
    if (next >= r->first && next < r->end)
        return true;
    return im->held_ranges < im->max_held && im->held + r->bytes <= im->budget;
}

static void start_range(struct import *im, struct import_range *r)
{
    struct range_buf *b = NULL;
    for (guint i = 0; !b && i < im->spare->len; i++)
        if (((struct range_buf *)im->spare->pdata[i])->cap >= r->bytes)
            b = g_ptr_array_steal_index_fast(im->spare, i);
    if (!b) {
        b = g_new0(struct range_buf, 1);
        b->data = g_malloc(r->bytes);
        b->cap = r->bytes;
    }
    r->buf = b;
    im->held += r->bytes;
    im->held_ranges++;
    g_ptr_array_add(im->open, r);
}

static bool import_may_start(void *ctx, guint range, guint wait_ms)
{
    struct import *im = ctx;
    struct import_range *r = &im->ranges[range];
    gint64 until = g_get_monotonic_time() + (gint64)wait_ms * 1000;
    g_mutex_lock(&im->lock);
    bool ok;
    /* a failed import lets the range start: its first bytes end the fetch */
    while (!(ok = r->buf || im->error || may_hold(im, r)) && g_get_monotonic_time() < until)
        g_cond_wait_until(&im->cond, &im->lock, until);
    if (ok && !r->buf && !im->error)
        start_range(im, r);
    g_mutex_unlock(&im->lock);
    return ok;
}

/* Consecutive frames, as many as fit in range_size (at least one). */
static guint plan_ranges(const struct seekable_table *t, guint64 range_size,
                         struct import_range **out_ranges, struct fetch_range **out_fetch)
{
    GArray *ranges = g_array_new(FALSE, TRUE, sizeof(struct import_range));
    GArray *fetch = g_array_new(FALSE, TRUE, sizeof(struct fetch_range));
    for (guint i = 0; i < t->nframes;) {
        struct import_range r = { .first = i, .whole = i, .handed = i, .start = t->frames[i].offset };
        guint64 bytes = t->frames[i].size;
        for (i++; i < t->nframes && bytes + t->frames[i].size <= range_size; i++)
            bytes += t->frames[i].size;
        r.end = i;
        r.bytes = bytes;
        g_array_append_val(ranges, r);
        struct fetch_range f = { r.start, r.start + bytes };
        g_array_append_val(fetch, f);
    }
    guint n = ranges->len;
    *out_ranges = (struct import_range *)g_array_free(ranges, FALSE);
    *out_fetch = (struct fetch_range *)g_array_free(fetch, FALSE);
    return n;
}

static guint64 window_for(const struct seekable_table *t, const struct store_options *o)
{
    guint64 largest = 0;
    for (guint i = 0; i < t->nframes; i++)
        largest = MAX(largest, (guint64)t->frames[i].data_size);
    return CLAMP(2 * MAX(1u, o->threads) * largest, IMPORT_MIN_WINDOW, IMPORT_MAX_WINDOW);
}

static void import_init(struct import *im, const struct store_options *o)
{
    g_mutex_init(&im->lock);
    g_cond_init(&im->cond);
    guint64 largest = 0;
    for (guint i = 0; i < im->nranges; i++)
        largest = MAX(largest, im->ranges[i].bytes);
    guint conns = MAX(1u, o->connections);
    im->max_held = IMPORT_BUDGET_RANGES * conns;
    im->budget = im->max_held * largest;
    im->open = g_ptr_array_new();
    im->spare = g_ptr_array_new_with_free_func(range_buf_free);
    im->order = frame_order_new(im->table, window_for(im->table, o), frames_hashed, im);
    im->pool = g_thread_pool_new(frame_job_run, im, MAX(1u, o->threads), FALSE, NULL);
}

/* After import_wait: the hashing thread has ended, so nothing hands the
 * pool frames any more; the workers end before the stage they use goes. */
static void import_clear(struct import *im)
{
    g_thread_pool_free(im->pool, FALSE, TRUE);
    frame_order_free(im->order);
    for (guint i = 0; i < im->nranges; i++)
        range_buf_free(im->ranges[i].buf);
    g_ptr_array_unref(im->open);
    g_ptr_array_unref(im->spare);
    g_free(im->ranges);
    g_clear_error(&im->error);
    g_mutex_clear(&im->lock);
    g_cond_clear(&im->cond);
}

/* After the fetch: every range whole, then every frame hashed (the
 * hashing thread ends, also when the import failed). */
static bool import_wait(struct import *im, bool fetched, GError *fetch_error, char digest[65],
                        GError **error)
{
    for (guint i = 0; fetched && i < im->nranges; i++)
        if (im->ranges[i].whole != im->ranges[i].end) {
            g_set_error(&fetch_error, STORE_ERROR, STORE_ERROR_REMOTE, "object %s: short read", im->name);
            fetched = false;
        }
    if (!fetched)   /* the frames still queued are not decompressed for nothing */
        import_fail(im, fetch_error);
    bool hashed = frame_order_finish(im->order, digest);
    g_mutex_lock(&im->lock);
    /* a worker's error is the cause of the fetch's, and came first */
    GError *e = im->error ? g_error_copy(im->error) : NULL;
    g_mutex_unlock(&im->lock);
    if (e) {
        g_propagate_error(error, e);
        return false;
    }
    return hashed || aborted(im, error);
}

bool object_import(struct transport *t, const char *name, const struct seekable_table *table,
                   int fd, const char *path, struct progress *progress, char digest[65],
                   GError **error)
{
    struct import im = { .table = table, .name = name, .fd = fd, .path = path, .progress = progress };
    struct fetch_range *fetch;
    im.nranges = plan_ranges(table, t->opts->range_size, &im.ranges, &fetch);
    import_init(&im, t->opts);
    struct fetch_consumer c = { import_data, import_restart, import_may_start, &im };
    GError *fetch_error = NULL;
    bool ok = im.nranges == 0 || t->ops->fetch(t, name, fetch, im.nranges, &c, &fetch_error);
    ok = import_wait(&im, ok, fetch_error, digest, error);
    g_free(fetch);
    import_clear(&im);
    return ok;
}
