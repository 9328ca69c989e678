/* Split virtqueues (virtio 1.x, section 2.7) seen from the device side.
 *
 * The driver publishes descriptor chains in the available ring; the device
 * takes them in order (virtq_pop), reads or fills the buffers they describe,
 * and hands them back through the used ring (virtq_push). Every byte the device
 * writes into guest RAM is marked dirty through the host (virtio-host.h): KVM's
 * dirty log only sees writes made by the guest itself, and a diff snapshot must
 * not miss a used ring update or a received packet.
 *
 * The queue state below (addresses, size, the two indices) is all a snapshot
 * needs to resume a queue: the rings themselves live in guest RAM.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

struct virtio_host;

#define VIRTQ_MAX_SIZE 256u
/* A chain longer than this is refused: it can only come from a confused or
 * hostile driver, and bounding it keeps iovecs on the stack. */
#define VIRTQ_MAX_CHAIN 64u

struct virtq {
    /* Written by the driver through the transport while the queue is not ready. */
    uint16_t size;   /* power of two, <= VIRTQ_MAX_SIZE */
    bool ready;
    uint64_t desc_gpa, avail_gpa, used_gpa;
    /* Device-side progress. */
    uint16_t last_avail_idx; /* next available entry the device will take */
    uint16_t used_idx;       /* next used entry the device will write */
    const struct virtio_host *host;
};

/* One descriptor chain, split into device-readable and device-writable parts,
 * each as host pointers into guest RAM with their guest-physical addresses. */
struct virtq_chain {
    uint16_t head;
    unsigned nread, nwrite;
    struct iovec read[VIRTQ_MAX_CHAIN];
    struct iovec write[VIRTQ_MAX_CHAIN];
    uint64_t write_gpa[VIRTQ_MAX_CHAIN];
    size_t read_len, write_len; /* totals */
    /* The chain's last descriptor as walked, even when the chain is malformed
     * (set unless the walk ended on a bad index, a loop or an indirect
     * descriptor): where a device that must answer puts its status byte. */
    bool has_tail;
    bool tail_writable;
    uint64_t tail_gpa;
    uint32_t tail_len;
};

void virtq_reset(struct virtq *q, const struct virtio_host *host);

/* Check the addresses the driver gave before the queue goes live: every ring
 * must lie in RAM and be aligned as the spec requires. */
bool virtq_validate(const struct virtq *q, GError **error);

/* True if the driver has published chains the device has not taken yet. */
bool virtq_has_available(const struct virtq *q);

/* Take the next chain. Returns 0 with nothing available, 1 with *chain filled,
 * -1 if the chain is malformed (set *error; the entry is consumed, and the
 * caller still returns it with virtq_push so the driver gets its descriptors
 * back; nothing of it may be used but virtq_chain_write_tail_byte). */
int virtq_pop(struct virtq *q, struct virtq_chain *chain, GError **error);

/* Hand a chain back, with the number of bytes the device wrote into it. The
 * used ring entry and index are marked dirty. A head that is not a descriptor
 * index (from a corrupt available ring) is not handed back: the driver never
 * owned such a chain. */
void virtq_push(struct virtq *q, uint16_t head, uint32_t written);

/* Put the chain back at the front of the available ring (the device took it
 * but could not use it yet, for example a receive buffer with nothing to put
 * in it). Only valid for the most recently popped chain. */
void virtq_unpop(struct virtq *q);

/* Whether the driver asked not to be interrupted (VRING_AVAIL_F_NO_INTERRUPT). */
bool virtq_interrupt_suppressed(const struct virtq *q);

/* Tell the driver whether it needs to notify the device after adding buffers
 * (VRING_USED_F_NO_NOTIFY). A polling driver reads this to skip an exit. */
void virtq_set_notify_wanted(struct virtq *q, bool wanted);

/* Copy out of / into a chain's scattered buffers, starting at offset. Writes
 * are marked dirty. Return the number of bytes copied. */
size_t virtq_chain_read(const struct virtq_chain *chain, size_t offset, void *dst, size_t len);
size_t virtq_chain_write(struct virtq *q, const struct virtq_chain *chain, size_t offset,
                         const void *src, size_t len);

/* Write value as the last byte of the chain's last descriptor, if that
 * descriptor is device-writable and the byte is in guest RAM (marked dirty):
 * how a device answers a malformed chain whose status byte is still where
 * the driver put it. Returns whether it wrote. */
bool virtq_chain_write_tail_byte(struct virtq *q, const struct virtq_chain *chain, uint8_t value);

/* Build an iovec over the writable part of a chain from offset on, limited to
 * max bytes, so a socket can be read straight into guest RAM. Returns the
 * number of iovec entries (<= VIRTQ_MAX_CHAIN). */
unsigned virtq_chain_write_iov(const struct virtq_chain *chain, size_t offset, size_t max,
                               struct iovec *iov);
/* The same over the readable part. */
unsigned virtq_chain_read_iov(const struct virtq_chain *chain, size_t offset, size_t max,
                              struct iovec *iov);
/* Mark [offset, offset + len) of the writable part dirty after writing it by
 * other means (readv into virtq_chain_write_iov's iovec). */
void virtq_chain_mark_written(struct virtq *q, const struct virtq_chain *chain, size_t offset,
                              size_t len);
