/* virtio-rng (device id 4): Cloud Hypervisor's "rng" device, over
 * virtio-mmio. One queue (requestq): each buffer the guest posts is filled
 * with bytes read from the host's entropy source (rng.src, default
 * /dev/urandom), at most as many as the rate limit's token bucket allows
 * (rng.rate_limiter.bandwidth, vsnap's extension: bytes per refill_time ms;
 * libvirt's <rate bytes= period=>). A buffer the bucket cannot pay for waits
 * until it refills.
 *
 * Threads: a device thread takes buffers when the guest notifies (or the
 * bucket refills) and holds the transport lock while touching the queue.
 *
 * Snapshots: the transport and its queue (virtio-mmio.h); the source is the
 * host's and opened anew on restore.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "config/vm-config.h"
#include "devices/virtio-host.h"

struct virtio_rng;

/* Registers virtio-mmio device number mmio_index, opens cfg->src and starts
 * the device thread. */
struct virtio_rng *virtio_rng_new(const struct virtio_host *host, unsigned mmio_index, const struct rng_config *cfg,
                                  GError **error);
/* Stop the thread, close the source. NULL is fine. */
void virtio_rng_free(struct virtio_rng *dev);

/* "virtio_mmio.device=4K@0xd0001000:6" for the guest command line. */
char *virtio_rng_cmdline_entry(const struct virtio_rng *dev);

/* {"rx_bytes": bytes given to the guest, "requests", "throttled": times the
 * rate limit held a request back}. */
void virtio_rng_add_counters(struct virtio_rng *dev, JsonBuilder *b);

/* Snapshots, as virtio-vsock.h's. */
void virtio_rng_quiesce(struct virtio_rng *dev);
void virtio_rng_unquiesce(struct virtio_rng *dev);
void virtio_rng_save_state(struct virtio_rng *dev, JsonBuilder *b);
bool virtio_rng_restore_state(struct virtio_rng *dev, JsonObject *obj, GError **error);
