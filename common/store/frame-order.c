/* The in-order hashing stage of an import (frame-order.h). */
#include "store/frame-order.h"
#include "store/sha256.h"

struct frame_order {
    const struct seekable_table *t;
    guint64 window;
    void (*advanced)(void *ctx);
    void *ctx;
    struct sha256 *sum;
    GThread *thread;
    GMutex lock;
    GCond cond;
    /* frame i waits in ring[i % nslots]: every frame but the last holds at
     * least SEEKABLE_MIN_FRAME_DATA bytes, so the frames a window admits
     * fit in window / SEEKABLE_MIN_FRAME_DATA + 2 slots */
    struct frame_out **ring;
    guint nslots;
    gint next;            /* first frame not hashed (atomic: admits reads it unlocked) */
    GPtrArray *spare;     /* struct frame_out, free for the next frames */
    bool stopped;
};

static void frame_out_free(gpointer p)
{
    struct frame_out *b = p;
    if (b) {
        g_free(b->data);
        g_free(b);
    }
}

guint frame_order_next(struct frame_order *o)
{
    return (guint)g_atomic_int_get(&o->next);
}

bool frame_order_admits(struct frame_order *o, guint i)
{
    guint next = frame_order_next(o);
    if (i == next)
        return true;
    return i > next && i - next < o->nslots &&
           o->t->frames[i].data_offset < o->t->frames[next].data_offset + o->window;
}

/* Take frame next's buffer when it is there; NULL when stopped or done. */
static struct frame_out *wait_turn(struct frame_order *o, guint next)
{
    g_mutex_lock(&o->lock);
    while (!o->stopped && !o->ring[next % o->nslots])
        g_cond_wait(&o->cond, &o->lock);
    struct frame_out *out = o->stopped ? NULL : g_steal_pointer(&o->ring[next % o->nslots]);
    g_mutex_unlock(&o->lock);
    return out;
}

static gpointer hash_frames(gpointer data)
{
    struct frame_order *o = data;
    for (guint next = 0; next < o->t->nframes; next++) {
        struct frame_out *out = wait_turn(o, next);
        if (!out)
            break;
        sha256_update(o->sum, out->data, o->t->frames[next].data_size);
        g_mutex_lock(&o->lock);
        g_ptr_array_add(o->spare, out);
        g_atomic_int_set(&o->next, (gint)next + 1);
        g_mutex_unlock(&o->lock);
        o->advanced(o->ctx);
    }
    return NULL;
}

struct frame_order *frame_order_new(const struct seekable_table *t, guint64 window,
                                    void (*advanced)(void *ctx), void *ctx)
{
    struct frame_order *o = g_new0(struct frame_order, 1);
    o->t = t;
    o->window = window;
    o->advanced = advanced;
    o->ctx = ctx;
    o->sum = sha256_new();
    o->nslots = (guint)MIN(window / SEEKABLE_MIN_FRAME_DATA + 2, (guint64)t->nframes + 1);
    o->ring = g_new0(struct frame_out *, o->nslots);
    o->spare = g_ptr_array_new_with_free_func(frame_out_free);
    g_mutex_init(&o->lock);
    g_cond_init(&o->cond);
    o->thread = g_thread_new("store-digest", hash_frames, o);
    return o;
}

struct frame_out *frame_order_buffer(struct frame_order *o, gsize size)
{
    g_mutex_lock(&o->lock);
    struct frame_out *b = o->spare->len ? g_ptr_array_steal_index_fast(o->spare, o->spare->len - 1)
                                        : NULL;
    g_mutex_unlock(&o->lock);
    if (!b)
        b = g_new0(struct frame_out, 1);
    if (b->cap < size) {
        g_free(b->data);
        b->data = g_malloc(size);
        b->cap = size;
    }
    return b;
}

void frame_order_put(struct frame_order *o, guint i, struct frame_out *out)
{
    g_mutex_lock(&o->lock);
    g_assert(!o->ring[i % o->nslots]);   /* admits kept i within the ring */
    o->ring[i % o->nslots] = out;
    g_cond_broadcast(&o->cond);
    g_mutex_unlock(&o->lock);
}

void frame_order_give_back(struct frame_order *o, struct frame_out *out)
{
    g_mutex_lock(&o->lock);
    g_ptr_array_add(o->spare, out);
    g_mutex_unlock(&o->lock);
}

void frame_order_stop(struct frame_order *o)
{
    g_mutex_lock(&o->lock);
    o->stopped = true;
    g_cond_broadcast(&o->cond);
    g_mutex_unlock(&o->lock);
}

bool frame_order_finish(struct frame_order *o, char digest[65])
{
    if (o->thread)
        g_thread_join(g_steal_pointer(&o->thread));
    if (o->stopped || frame_order_next(o) != o->t->nframes)
        return false;
    sha256_finish(o->sum, digest);
    return true;
}

void frame_order_free(struct frame_order *o)
{
    if (!o)
        return;
    frame_order_stop(o);
    if (o->thread)
        g_thread_join(o->thread);
    for (guint i = 0; i < o->nslots; i++)
        frame_out_free(o->ring[i]);
    g_free(o->ring);
    g_ptr_array_unref(o->spare);
    sha256_free(o->sum);
    g_mutex_clear(&o->lock);
    g_cond_clear(&o->cond);
    g_free(o);
}
