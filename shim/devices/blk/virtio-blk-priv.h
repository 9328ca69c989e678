/* Internals shared by the virtio-blk files:
 *   virtio-blk.c       the device: config space, lifecycle, the I/O thread,
 *                      pausing, counters, snapshot state
 *   virtio-blk-req.c   one request: checking the chain, doing it, the status
 *   virtio-blk-ring.c  io='io_uring': a queue's reads and writes in flight together
 *
 * Locking: the transport lock (dev->transport.lock) guards the transport and
 * the queues, as for every virtio device; the I/O thread holds it only to take
 * and hand back chains. The request buffers are guest RAM, which lives as long
 * as the device. ctl_lock guards the pause and stop requests.
 */
#pragma once

#include <glib.h>
#include <linux/virtio_blk.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "block/blk-backend.h"
#include "block/blk-uring.h"
#include "devices/virtio-blk.h"
#include "devices/virtio-mmio.h"

/* seg_max: data segments of one request; with the header and the status it
 * still fits a chain (VIRTQ_MAX_CHAIN entries per direction). */
#define BLK_SEG_MAX (VIRTQ_MAX_CHAIN - 2u)
/* Limits of one DISCARD or WRITE_ZEROES request. */
#define BLK_MAX_DISCARD_SECTORS (1u << 22) /* 2 GiB per segment */
#define BLK_MAX_DISCARD_SEG 16u
/* Chains taken from a queue in one go, then done and handed back together. */
#define BLK_BATCH 32u

struct blk_counters {
    atomic_uint_fast64_t read_ops, read_bytes, write_ops, write_bytes;
    atomic_uint_fast64_t flush_ops, discard_ops, write_zeroes_ops;
    atomic_uint_fast64_t zero_writes;  /* OUT requests of zeros done as WRITE_ZEROES (detect_zeroes) */
    atomic_uint_fast64_t store_flushes; /* flushes that reached the store (FLUSH, and writes under write_through) */
    atomic_uint_fast64_t io_errors;    /* the backend failed (ENOSPC, EIO, ...) */
    atomic_uint_fast64_t nospace_errors; /* of them, a full file system (ENOSPC, EDQUOT) */
    atomic_uint_fast64_t last_errno;   /* the last one's errno, 0 before any (domblkerror) */
    atomic_uint_fast64_t guest_errors; /* malformed chains and requests */
    atomic_uint_fast64_t unsupported;  /* request types we do not know */
    atomic_uint_fast64_t sleeps;       /* the I/O thread slept until notified (polling found nothing) */
    atomic_uint_fast64_t ring_transfers; /* reads and writes done through the io_uring */
    atomic_uint_fast64_t ring_max_in_flight; /* the most of them in flight at once */
};

/* What a write means besides its data (libvirt's <driver cache= detect_zeroes=>). */
enum blk_detect_zeroes { BLK_DETECT_ZEROES_OFF, BLK_DETECT_ZEROES_ON, BLK_DETECT_ZEROES_UNMAP };

struct blk_policy {
    bool write_through;  /* every write is flushed before it completes */
    bool ignore_flush;   /* FLUSH completes without touching the store */
    enum blk_detect_zeroes detect_zeroes; /* an all-zero OUT goes to write_zeroes (may unmap with UNMAP) */
};

struct blk_request {
    struct virtq_chain chain;
    bool malformed;    /* virtq_pop refused the chain */
    char *why;         /* ... and why (g_free) */
    uint32_t used_len; /* what goes into the used ring */
    uint64_t generation; /* dev->generation when the chain was taken */
    /* A read or write in the ring (blk_request_start): */
    bool ring_write;
    uint64_t sector;
    size_t len;
    struct iovec iov[VIRTQ_MAX_CHAIN]; /* the kernel reads it until the transfer is reaped */
};

struct virtio_blk {
    struct virtio_mmio transport;
    struct virtio_device_ops ops;  /* this disk's queues and features */
    struct blk_backend *backend;
    char *id;
    uint8_t serial[VIRTIO_BLK_ID_BYTES]; /* GET_ID's answer, NUL padded */
    uint64_t capacity_sectors;
    struct virtio_blk_config config;     /* the config space, little-endian as x86 */
    struct blk_policy policy;            /* set at creation, read by the I/O thread */

    /* Guarded by the transport lock: bumped at every device reset, so the
     * completion of a chain taken before a reset is not handed to the new
     * rings. */
    uint64_t generation;

    GThread *thread;
    int epoll_fd, wake_fd;
    GMutex ctl_lock;
    GCond ctl_cond;
    unsigned pause_count;       /* ctl_lock: > 0 asks the thread to hold still */
    atomic_bool pause_wanted;   /* pause_count > 0, for the polling loop */
    bool thread_idle;           /* ctl_lock: the thread holds still */
    bool stop;                  /* ctl_lock */

    struct blk_request batch[BLK_BATCH]; /* I/O thread only */
    struct blk_uring *ring;              /* io='io_uring' and the kernel has it; else NULL */
    unsigned free_slots[BLK_BATCH];      /* with a ring: batch entries not in use (I/O thread only) */
    unsigned nfree;
    struct blk_counters counters;
};

/* virtio-blk-req.c: do one request taken from q (I/O thread, transport lock
 * not held): check it, call the backend, write the status byte, and set
 * req->used_len. */
void blk_request_execute(struct virtio_blk *dev, struct virtq *q, struct blk_request *req);
/* A well-formed IN or OUT the ring can do: started in dev->ring, true
 * (blk_request_finish answers it when reaped). false: nothing done, the
 * request is blk_request_execute's. */
bool blk_request_start(struct virtio_blk *dev, struct blk_request *req);
/* The ring's answer err (0 or a negative errno) for a started request:
 * the status byte and req->used_len, as blk_request_execute would. */
void blk_request_finish(struct virtio_blk *dev, struct virtq *q, struct blk_request *req, int err);

/* virtio-blk.c, for virtio-blk-ring.c: */
struct virtq *blk_queue(struct virtio_blk *dev, unsigned i);
bool blk_queue_live(struct virtio_blk *dev, unsigned i);
/* Hand one finished chain back and tell the driver (takes the transport lock). */
void blk_complete(struct virtio_blk *dev, unsigned i, struct blk_request *req);

/* virtio-blk-ring.c: service queue i through dev->ring; whether there was anything. */
bool blk_service_queue_ring(struct virtio_blk *dev, unsigned i);
