/* A disk being copied (virsh blockcopy): see blk-backend.h's block copy. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "block/blk-backend.h"
#include "blk-iov.h"

#include <errno.h>
#include <string.h>

#define STEP_MAX (1u << 20)

struct blk_mirror {
    struct blk_backend base; /* first */
    struct blk_backend *source, *target;
    GMutex lock;             /* the guest's writes against the copy's steps */
    uint64_t copied_to;      /* bytes: the target holds [0, copied_to) as the disk has it */
    uint8_t *buf;
};

static struct blk_mirror *mirror_of(struct blk_backend *b)
{
    return (struct blk_mirror *)b;
}

static int mirror_readv(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov)
{
    return blk_backend_readv(mirror_of(b)->source, offset, iov, niov);
}

/* What lands below copied_to lands in the target too (the whole request:
 * what lies beyond is copied from the source later anyway). */
static int mirror_writev(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov)
{
    struct blk_mirror *m = mirror_of(b);
    g_mutex_lock(&m->lock);
    int err = blk_backend_writev(m->source, offset, iov, niov);
    if (!err && offset < m->copied_to)
        err = blk_backend_writev(m->target, offset, iov, niov);
    g_mutex_unlock(&m->lock);
    return err;
}

/* Either side may be gone already (blk_mirror_end). */
static int mirror_flush(struct blk_backend *b)
{
    struct blk_mirror *m = mirror_of(b);
    int err = m->source ? blk_backend_flush(m->source) : 0;
    return err || !m->target ? err : blk_backend_flush(m->target);
}

/* A discarded range may read as zeros in the source afterwards: the target
 * gets zeros there, so the two never differ. */
static int mirror_discard(struct blk_backend *b, uint64_t offset, uint64_t len)
{
    struct blk_mirror *m = mirror_of(b);
    g_mutex_lock(&m->lock);
    int err = blk_backend_discard(m->source, offset, len);
    if (!err && offset < m->copied_to) {
        g_autofree uint8_t *bytes = g_malloc((size_t)MIN(len, STEP_MAX));
        for (uint64_t done = 0; !err && done < len;) {
            struct iovec iov = { bytes, (size_t)MIN(len - done, STEP_MAX) };
            err = blk_backend_readv(m->source, offset + done, &iov, 1);
            err = err ? err : blk_backend_writev(m->target, offset + done, &iov, 1);
            done += iov.iov_len;
        }
    }
    g_mutex_unlock(&m->lock);
    return err;
}

static int mirror_write_zeroes(struct blk_backend *b, uint64_t offset, uint64_t len, bool may_unmap)
{
    struct blk_mirror *m = mirror_of(b);
    g_mutex_lock(&m->lock);
    int err = blk_backend_write_zeroes(m->source, offset, len, may_unmap);
    if (!err && offset < m->copied_to)
        err = blk_backend_write_zeroes(m->target, offset, len, may_unmap);
    g_mutex_unlock(&m->lock);
    return err;
}

static void mirror_close(struct blk_backend *b)
{
    struct blk_mirror *m = mirror_of(b);
    blk_backend_close(m->source);
    blk_backend_close(m->target);
    g_mutex_clear(&m->lock);
    g_free(m->buf);
    g_free(m->base.name);
    g_free(m);
}

static const struct blk_backend_ops mirror_ops = {
    .readv = mirror_readv,
    .writev = mirror_writev,
    .flush = mirror_flush,
    .discard = mirror_discard,
    .write_zeroes = mirror_write_zeroes,
    .close = mirror_close,
};

struct blk_backend *blk_mirror_new(struct blk_backend *source, struct blk_backend *target)
{
    struct blk_mirror *m = g_new0(struct blk_mirror, 1);
    m->base.ops = &mirror_ops;
    m->base.capacity = source->capacity;
    m->base.block_size = source->block_size;
    m->base.readonly = source->readonly;
    m->base.can_discard = source->can_discard;
    m->base.name = g_strdup(source->name);
    m->source = source;
    m->target = target;
    m->buf = g_malloc(STEP_MAX);
    g_mutex_init(&m->lock);
    return &m->base;
}

static bool all_zero(const uint8_t *p, size_t len)
{
    return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

int blk_mirror_step(struct blk_backend *b, uint64_t max_bytes, uint64_t *copied_to)
{
    struct blk_mirror *m = mirror_of(b);
    g_mutex_lock(&m->lock);
    uint64_t at = m->copied_to, n = MIN(MIN(max_bytes, STEP_MAX), m->base.capacity - at);
    struct iovec iov = { m->buf, (size_t)n };
    int err = n ? blk_backend_readv(m->source, at, &iov, 1) : 0;
    /* The target is a new, sparse file: zeros are there already. */
    if (!err && n && !all_zero(m->buf, (size_t)n))
        err = blk_backend_writev(m->target, at, &iov, 1);
    if (!err)
        m->copied_to = at + n;
    *copied_to = m->copied_to;
    g_mutex_unlock(&m->lock);
    return err;
}

bool blk_mirror_is(const struct blk_backend *b)
{
    return b && b->ops == &mirror_ops;
}

struct blk_backend *blk_mirror_end(struct blk_backend *b, bool to_target)
{
    struct blk_mirror *m = mirror_of(b);
    struct blk_backend *keep = to_target ? m->target : m->source;
    if (to_target)
        m->target = NULL;
    else
        m->source = NULL;
    return keep;
}
