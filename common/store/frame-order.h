/* The hashing stage of an import (object-import.c). Decompression workers
 * finish frames in any order and pwrite each at its offset; each then
 * hands its decompressed frame here, and one thread feeds the frames to
 * SHA-256 in order, so the object's digest is known when its last frame is
 * written, and nothing is read back. Library-internal.
 *
 * Frames wait for their turn in a ring. What may be decompressed at all is
 * bounded by a window of uncompressed bytes from the first frame not yet
 * hashed (frame_order_admits): the ring, and the buffers of the frames in
 * it and under decompression, hold at most window + one frame's bytes. The
 * first frame not yet hashed is always admitted, so the stage never waits
 * for a frame it refused. */
#pragma once

#include "store/seekable.h"

struct frame_order;

/* A frame's decompressed bytes (cap: what data holds). */
struct frame_out {
    guint8 *data;
    gsize cap;
};

/* advanced(ctx) runs on the hashing thread after each frame (no lock of
 * the stage held): frames that were refused may be admitted now. */
struct frame_order *frame_order_new(const struct seekable_table *t, guint64 window,
                                    void (*advanced)(void *ctx), void *ctx);
/* Whether frame i may be decompressed now. */
bool frame_order_admits(struct frame_order *o, guint i);
/* The first frame not yet hashed (t->nframes when all are). */
guint frame_order_next(struct frame_order *o);
/* A buffer for an admitted frame of size bytes. */
struct frame_out *frame_order_buffer(struct frame_order *o, gsize size);
/* Frame i is in out (from frame_order_buffer): hashed in its turn, then
 * out is reused. */
void frame_order_put(struct frame_order *o, guint i, struct frame_out *out);
/* A buffer not put (its frame failed). */
void frame_order_give_back(struct frame_order *o, struct frame_out *out);
/* The import failed: the thread ends without waiting for more frames. */
void frame_order_stop(struct frame_order *o);
/* Wait for the thread: the digest of every frame, or false when stopped. */
bool frame_order_finish(struct frame_order *o, char digest[65]);
void frame_order_free(struct frame_order *o);
