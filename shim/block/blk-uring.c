/* A disk's io_uring: see block/blk-uring.h. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "block/blk-uring.h"
#include "blk-iov.h"

#include <errno.h>
#include <gio/gio.h>
#include <limits.h>
#include <liburing.h>
#include <string.h>

/* One transfer queued or in flight: enough to finish a short one with the
 * backend's own op. */
struct uring_op {
    struct blk_backend *backend;
    uint64_t offset;
    const struct iovec *iov;
    unsigned niov;
    bool write;
    size_t len;
    void *tag;
    int next_free; /* -1: the last free slot, or the slot is in use */
};

struct blk_uring {
    struct io_uring ring;
    unsigned entries;
    unsigned busy;    /* slots in use */
    unsigned queued;  /* of them, not submitted yet */
    int free_head;
    struct uring_op *ops;
};

/* READV and WRITEV only; no registering after the ring is enabled.
 * (Debian 12's liburing 2.3 declares io_uring_register_restrictions and
 * io_uring_enable_rings but does not export them: the plain register call.) */
static int restrict_ring(struct io_uring *ring)
{
    struct io_uring_restriction res[2];
    memset(res, 0, sizeof res);
    res[0].opcode = IORING_RESTRICTION_SQE_OP;
    res[0].sqe_op = IORING_OP_READV;
    res[1].opcode = IORING_RESTRICTION_SQE_OP;
    res[1].sqe_op = IORING_OP_WRITEV;
    int r = io_uring_register((unsigned)ring->ring_fd, IORING_REGISTER_RESTRICTIONS, res, G_N_ELEMENTS(res));
    return r < 0 ? r : io_uring_register((unsigned)ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
}

struct blk_uring *blk_uring_new(unsigned entries, GError **error)
{
    struct blk_uring *u = g_new0(struct blk_uring, 1);
    struct io_uring_params params = { .flags = IORING_SETUP_R_DISABLED };
    int r = io_uring_queue_init_params(entries, &u->ring, &params);
    if (r == 0 && (r = restrict_ring(&u->ring)) < 0)
        io_uring_queue_exit(&u->ring);
    if (r < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(-r), "cannot set up an io_uring: %s", g_strerror(-r));
        g_free(u);
        return NULL;
    }
    u->entries = entries;
    u->ops = g_new0(struct uring_op, entries);
    for (unsigned i = 0; i < entries; i++)
        u->ops[i].next_free = i + 1 < entries ? (int)i + 1 : -1;
    u->free_head = 0;
    return u;
}

void blk_uring_free(struct blk_uring *u)
{
    if (!u)
        return;
    g_assert(u->busy == 0);
    io_uring_queue_exit(&u->ring);
    g_free(u->ops);
    g_free(u);
}

unsigned blk_uring_busy(const struct blk_uring *u)
{
    return u->busy;
}

bool blk_uring_start(struct blk_uring *u, struct blk_backend *b, uint64_t offset, const struct iovec *iov,
                     unsigned niov, bool write, void *tag)
{
    int fd = b->ops->ring_fd ? b->ops->ring_fd(b, offset, iov, niov, write) : -1;
    if (fd < 0 || u->free_head < 0 || niov > IOV_MAX)
        return false;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    if (!sqe)
        return false;
    int slot = u->free_head;
    struct uring_op *op = &u->ops[slot];
    u->free_head = op->next_free;
    *op = (struct uring_op){ .backend = b, .offset = offset, .iov = iov, .niov = niov, .write = write,
                             .len = blk_iov_total(iov, niov), .tag = tag, .next_free = -1 };
    if (write)
        io_uring_prep_writev(sqe, fd, iov, niov, offset);
    else
        io_uring_prep_readv(sqe, fd, iov, niov, offset);
    io_uring_sqe_set_data64(sqe, (uint64_t)slot);
    u->busy++;
    u->queued++;
    return true;
}

/* The rest of a transfer the ring did in part (a read at the end of a file
 * that shrank, a write cut short), or again when it was interrupted: the
 * backend's op retries and zero-fills as its contract says. */
static int finish_op(struct uring_op *op, int res)
{
    if (res == -EINTR || res == -EAGAIN)
        res = 0;
    if (res < 0)
        return res;
    if ((size_t)res >= op->len)
        return 0;
    struct iovec rest[IOV_MAX];
    unsigned n = blk_iov_advance(op->iov, op->niov, (size_t)res, rest);
    return op->write ? blk_backend_writev(op->backend, op->offset + (uint64_t)res, rest, n)
                     : blk_backend_readv(op->backend, op->offset + (uint64_t)res, rest, n);
}

/* Hand what is queued to the kernel; a failure leaves it queued for the next call. */
static int submit(struct blk_uring *u, unsigned wait_nr)
{
    int r;
    do
        r = io_uring_submit_and_wait(&u->ring, wait_nr);
    while (r == -EINTR);
    if (r >= 0)
        u->queued -= MIN((unsigned)r, u->queued);
    return r;
}

bool blk_uring_reap(struct blk_uring *u, bool wait, void **tag, int *result)
{
    struct io_uring_cqe *cqe = NULL;
    if (u->queued)
        submit(u, 0);
    while (io_uring_peek_cqe(&u->ring, &cqe) != 0 || !cqe) {
        if (!wait || u->busy == 0)
            return false;
        int r = submit(u, 1);
        if (r < 0) {
            g_warning("io_uring: waiting for a completion: %s", g_strerror(-r));
            return false;
        }
    }
    unsigned slot = (unsigned)io_uring_cqe_get_data64(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(&u->ring, cqe);
    g_assert(slot < u->entries);
    struct uring_op *op = &u->ops[slot];
    *tag = op->tag;
    *result = finish_op(op, res);
    op->next_free = u->free_head;
    u->free_head = (int)slot;
    u->busy--;
    return true;
}
