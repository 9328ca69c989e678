/* io='io_uring': the I/O thread keeps a queue's reads and writes in flight
 * together in dev->ring, taking new chains into free batch entries as
 * others finish, and hands each back as soon as it is done. Anything else
 * (FLUSH, DISCARD, WRITE_ZEROES, GET_ID, a bad request, a backend without
 * a plain file for the range) waits for everything in flight, then is done
 * as without a ring: a FLUSH covers every write the guest saw complete, and
 * those requests keep the order they had. See virtio-blk-priv.h. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "virtio-blk-priv.h"

/* Chains one call takes at most before the thread looks at its control
 * requests again (a pause, a stop). */
#define TAKE_MAX (4u * BLK_BATCH)

/* Chains of queue i into free batch entries, under one lock; their
 * indexes into taken. */
static unsigned take_chains(struct virtio_blk *dev, unsigned i, unsigned *taken)
{
    unsigned n = 0;
    g_mutex_lock(&dev->transport.lock);
    struct virtq *q = blk_queue(dev, i);
    if (blk_queue_live(dev, i)) {
        virtq_set_notify_wanted(q, false); /* we are looking anyway */
        while (dev->nfree > 0) {
            unsigned slot = dev->free_slots[dev->nfree - 1];
            struct blk_request *req = &dev->batch[slot];
            g_autoptr(GError) error = NULL;
            int r = virtq_pop(q, &req->chain, &error);
            if (r == 0)
                break;
            dev->nfree--;
            req->malformed = r < 0;
            req->why = r < 0 ? g_strdup(error->message) : NULL;
            req->generation = dev->generation;
            taken[n++] = slot;
        }
    }
    g_mutex_unlock(&dev->transport.lock);
    return n;
}

static void hand_back(struct virtio_blk *dev, unsigned i, struct blk_request *req)
{
    blk_complete(dev, i, req);
    dev->free_slots[dev->nfree++] = (unsigned)(req - dev->batch);
}

/* Answer finished transfers: at least one when wait (and any are in flight),
 * then every one that is done. */
static void reap(struct virtio_blk *dev, unsigned i, bool wait)
{
    void *tag;
    int err;
    while (blk_uring_reap(dev->ring, wait, &tag, &err)) {
        blk_request_finish(dev, blk_queue(dev, i), tag, err);
        hand_back(dev, i, tag);
        wait = false;
    }
}

static void drain(struct virtio_blk *dev, unsigned i)
{
    while (blk_uring_busy(dev->ring) > 0)
        reap(dev, i, true);
}

static void note_in_flight(struct virtio_blk *dev)
{
    uint_fast64_t busy = blk_uring_busy(dev->ring);
    uint_fast64_t max = atomic_load(&dev->counters.ring_max_in_flight);
    while (busy > max && !atomic_compare_exchange_weak(&dev->counters.ring_max_in_flight, &max, busy))
        ;
}

/* alone: the only request there is. Done on the thread: the ring gains
 * nothing without a second, and its kernel worker (a transfer that would
 * block is handed to one) costs a wakeup on a busy host (direct randread at
 * depth 1: 10 MB/s through the ring, 17.7 without). */
static void start_or_do(struct virtio_blk *dev, unsigned i, struct blk_request *req, bool alone)
{
    if (!alone && blk_request_start(dev, req))
        return;
    drain(dev, i);
    blk_request_execute(dev, blk_queue(dev, i), req);
    hand_back(dev, i, req);
}

bool blk_service_queue_ring(struct virtio_blk *dev, unsigned i)
{
    unsigned total = 0;
    for (;;) {
        unsigned taken[BLK_BATCH];
        unsigned n = total < TAKE_MAX ? take_chains(dev, i, taken) : 0;
        total += n;
        bool alone = n == 1 && blk_uring_busy(dev->ring) == 0;
        for (unsigned k = 0; k < n; k++)
            start_or_do(dev, i, &dev->batch[taken[k]], alone);
        note_in_flight(dev);
        if (blk_uring_busy(dev->ring) == 0 && n == 0)
            break;
        /* Something new came: submit it and answer what is done without
         * waiting; otherwise wait for the next transfer to finish. */
        reap(dev, i, n == 0);
    }
    return total > 0;
}
