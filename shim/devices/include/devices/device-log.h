/* The log of errors a device sees again and again: a malformed request from
 * the guest, a tap or an entropy source or a disk image that keeps failing.
 * A guest can repeat its mistakes at the rate of its vCPUs, so each device
 * counts every one (its counters in vm.counters) but logs only the first
 * DEVICE_LOG_LIMIT of a kind, the last of them saying that the rest are only
 * counted. Every device goes through here, so they all stop at the same
 * number and say so the same way. */
#pragma once

#include <glib.h>
#include <stdint.h>

#define DEVICE_LOG_LIMIT 20u

/* Log the error numbered n of its kind (1 for the first; the device keeps
 * the count, atomically or under its lock as its threads need) at level
 * (G_LOG_LEVEL_MESSAGE for the guest's errors, G_LOG_LEVEL_WARNING for the
 * host's), if n is at most DEVICE_LOG_LIMIT. The text starts with the device
 * ("net net0: ...", "virtio-rng: ..."); kind names the errors in the closing
 * remark of the last one ("guest errors": "(further guest errors are only
 * counted)"). */
void device_log_limited(GLogLevelFlags level, uint64_t n, const char *kind, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
