/* A polled virtio-rng driver for the test guest: the command port's
 * "RNG <n>" reads n bytes from the device (commands.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RNG_READ_MAX (64u * 1024u)

/* Find and start the device; false (silently) if the VM has none. */
bool rng_init(const char *cmdline, uint64_t tsc_khz);
bool rng_present(void);
/* Fill buf with len (<= RNG_READ_MAX) bytes from the device, asking as often
 * as it takes (it may give less than asked, a rate limit makes it wait);
 * poll(), if not NULL, runs while waiting. Returns the bytes read: fewer
 * than len when timeout_ms passed first. */
size_t rng_read(uint8_t *buf, size_t len, uint64_t timeout_ms, void (*poll)(void));
