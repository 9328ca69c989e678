/* One disk's io_uring (blk-uring.c): the reads and writes a guest has queued,
 * in flight together on a backend's plain file instead of one preadv/pwritev
 * after another (libvirt's <driver io='io_uring'/>).
 *
 * Only a backend whose ring_fd op names a descriptor for the range goes
 * through the ring (a raw image, its O_DIRECT transfers when the guest's
 * buffers are aligned); anything else is the caller's to do with the
 * backend's synchronous ops. The ring accepts READV and WRITEV and nothing
 * else (IORING_REGISTER_RESTRICTIONS): what the ring's kernel workers do is
 * not seen by seccomp, so it may do no more than the disk thread's list.
 *
 * Threads: created and freed on any thread, used by the disk's I/O thread only.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "block/blk-backend.h"

struct blk_uring;

/* A ring for up to entries transfers in flight. NULL with error (ENOSYS on an
 * old kernel, EPERM where io_uring is disabled, ...): the caller goes on
 * without one. */
struct blk_uring *blk_uring_new(unsigned entries, GError **error);
/* Nothing may be in flight. NULL is fine. */
void blk_uring_free(struct blk_uring *u);

/* Queue a read or write of [offset, offset + the iov's length) of b; it is
 * submitted at the next blk_uring_reap. iov (and the buffers) stay valid
 * until the transfer is reaped; tag comes back with it. false: b cannot take
 * it through the ring, or the ring is full: do it with b's op. */
bool blk_uring_start(struct blk_uring *u, struct blk_backend *b, uint64_t offset, const struct iovec *iov,
                     unsigned niov, bool write, void *tag);
/* Transfers queued or in flight. */
unsigned blk_uring_busy(const struct blk_uring *u);
/* Submit what is queued, then take one finished transfer: its tag and its
 * result, 0 or a negative errno, as the backend's readv/writev answer (a
 * short transfer is finished with the backend's op). wait: block until one
 * finishes; else false when none has. */
bool blk_uring_reap(struct blk_uring *u, bool wait, void **tag, int *result);
