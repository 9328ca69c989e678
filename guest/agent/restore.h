/* What the agent does when the host acknowledges an announcement that follows
 * a reset of the readiness connection (a restore from a snapshot, or a clone):
 * the guest's clock stopped when the snapshot was taken, and its RNG state is
 * shared with every other VM restored from the same snapshot. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Set CLOCK_REALTIME to the host's time. With apply false (host tests) only
 * report what would be done. Returns false with errno on failure. */
bool restore_set_clock(int64_t host_realtime_ns, bool apply);

/* Mix bytes into the kernel's pool and credit them (RNDADDENTROPY on
 * /dev/urandom; needs CAP_SYS_ADMIN). Returns false with errno on failure. */
bool restore_add_entropy(const uint8_t *bytes, size_t len);
