/* virtio-blk (device id 2, virtio 1.x over virtio-mmio): one disk of the VM,
 * its contents behind a struct blk_backend (block/blk-backend.h).
 *
 * Requests IN, OUT, FLUSH, GET_ID, DISCARD and WRITE_ZEROES; the config space
 * gives capacity, seg_max, blk_size, the queue count (VIRTIO_BLK_F_MQ with
 * num_queues > 1) and the discard and write-zeroes limits; a read-only disk
 * offers VIRTIO_BLK_F_RO and answers every write with VIRTIO_BLK_S_IOERR.
 * Every chain is checked before its buffers are touched (in guest RAM, the
 * header readable and the status byte writable, data in the right direction,
 * lengths whole sectors, the range inside the capacity); a malformed one is
 * answered with IOERR where its status byte can be found, and the device goes
 * on serving.
 *
 * Threads: register accesses arrive on vCPU threads (the transport lock);
 * the disk's own I/O thread waits on the queues' eventfds (bound with
 * KVM_IOEVENTFD), takes chains under the transport lock, does the I/O with
 * the lock released (preadv/pwritev straight between the image and guest
 * RAM, every byte written into RAM marked dirty through the virtio_host), and
 * hands the chains back under the lock. After a batch it keeps polling the
 * rings for a short while with notifications off, so a driver that submits
 * back to back does not pay a VM exit per request.
 *
 * Snapshots: virtio_blk_pause completes the requests in flight and every
 * chain the guest has published, then holds the thread still; the VM pauses
 * its disks whenever it pauses its vCPUs, so a paused VM's disks are idle
 * and its rings hold no half-done request. The saved state is the transport
 * (registers and queues, as vsock's) plus the capacity the guest was told;
 * the disk's contents are the backend's business.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "block/blk-backend.h"
#include "config/vm-config.h"
#include "devices/virtio-host.h"

struct virtio_blk;

/* Create the disk as virtio-mmio device number mmio_index over backend (taken,
 * freed on failure too) and start its I/O thread. cfg gives the id, serial,
 * queues and queue size; backend decides read-only, capacity and discard. */
struct virtio_blk *virtio_blk_new(const struct virtio_host *host, unsigned mmio_index,
                                  const struct disk_config *cfg, struct blk_backend *backend, GError **error);

/* Stop the I/O thread (requests in flight complete first) and close the
 * backend. NULL is fine. */
void virtio_blk_free(struct virtio_blk *dev);

/* "virtio_mmio.device=4K@0xd0001000:6" for the guest command line. */
char *virtio_blk_cmdline_entry(const struct virtio_blk *dev);

const char *virtio_blk_id(const struct virtio_blk *dev);
/* The store behind the disk: only touch it while the disk is paused. */
struct blk_backend *virtio_blk_backend(struct virtio_blk *dev);
/* Put backend (same capacity and read-only-ness) behind the paused disk and
 * return the one it had (the caller closes it). */
struct blk_backend *virtio_blk_replace_backend(struct virtio_blk *dev, struct blk_backend *backend);

/* The backend's capacity grew (blk_raw_refresh_capacity, with the disk
 * paused): the config space says so and the guest gets the configuration
 * change interrupt (virtio 1.x, 4.2.2: VIRTIO_MMIO_INT_CONFIG). */
void virtio_blk_capacity_changed(struct virtio_blk *dev);

/* vm.counters member named by the disk's id: {"read_ops", "read_bytes",
 * "write_ops", "write_bytes", "flush_ops", "discard_ops", "write_zeroes_ops",
 * "io_errors", "nospace_errors" (of them ENOSPC or EDQUOT), "last_errno"
 * (the last I/O error's, 0 before any), "guest_errors", "unsupported", "sleeps"} (Cloud Hypervisor's
 * names for the first four; sleeps: how often the I/O thread found nothing
 * and waited for the guest's notification). */
void virtio_blk_add_counters(struct virtio_blk *dev, JsonBuilder *builder);

/* Complete every request in flight and every chain the guest published, then
 * hold the I/O thread still (nothing is read, written or put in guest RAM)
 * until as many virtio_blk_resume calls; pauses nest. false (and the pause
 * undone) if the disk did not go idle within a few seconds: a backend stuck
 * in I/O. Main thread, with the vCPUs parked. */
bool virtio_blk_pause(struct virtio_blk *dev, GError **error);
void virtio_blk_resume(struct virtio_blk *dev);

/* Snapshot state, with the disk paused: {"id", "capacity", "transport"}.
 * restore_state loads a snapshot's into a fresh disk of the same config and
 * refuses a disk whose id or capacity differs from what the guest saw. */
void virtio_blk_save_state(struct virtio_blk *dev, JsonBuilder *b);
bool virtio_blk_restore_state(struct virtio_blk *dev, JsonObject *obj, GError **error);
