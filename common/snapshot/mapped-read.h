/* Reading a layer's page data through its mapping when the file may change
 * under it.
 *
 * A layer's data is mmapped (snap_layer_open). If the file is truncated while
 * mapped (someone cuts a snapshot short, a tool rewrites it) or its storage
 * fails, touching the lost part raises SIGBUS, which would end the process: a
 * shim, its VM with it. These functions read mapped bytes and return false
 * instead, on whichever thread they run (the on-demand handler too). The
 * kernel's own reads of a mapping (pwrite, UFFDIO_COPY) fail with EFAULT
 * there and need nothing of this.
 *
 * The first call installs a SIGBUS handler for the process; a SIGBUS outside
 * these functions still ends the process as before. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* memcpy from mapped memory. False: the mapping faulted (dst partly written). */
bool snap_mapped_copy(void *dst, const void *mapped, size_t len);
/* Whether mapped[0, len) equals mem[0, len) into *equal. False: it faulted. */
bool snap_mapped_equal(const void *mapped, const void *mem, size_t len, bool *equal);
/* CRC-32C (crc32c.h) of mapped bytes into *crc. False: it faulted. */
bool snap_mapped_crc32c(const void *mapped, size_t len, uint32_t *crc);
