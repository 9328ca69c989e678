/* A disk's base image, recognised again later: its size, its modification
 * time and a CRC-32C of its first and last MiB. No inode (a copy made with
 * `cp -a`, on this host or another, must still match) and no hash of the
 * whole image (checking must cost the same whatever the image's size). */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define SNAP_DISK_IDENTITY_SPAN (1u << 20) /* bytes checksummed at each end */

struct snap_disk_identity {
    uint64_t size;      /* bytes (a block device's size) */
    uint64_t mtime_ns;  /* st_mtim in nanoseconds */
    uint32_t crc32c;    /* CRC-32C of [0, 1 MiB) then [size - 1 MiB, size), clipped, not overlapping */
};

/* The image's identity now. SNAP_ERROR_IO naming it if it cannot be read. */
bool snap_disk_identity_read(const char *image, struct snap_disk_identity *out, GError **error);

/* The image must still be the one want describes: SNAP_ERROR_CHAIN naming
 * the image and what changed otherwise. */
bool snap_disk_identity_check(const char *image, const struct snap_disk_identity *want, GError **error);
