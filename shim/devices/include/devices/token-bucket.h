/* A token bucket for device rate limits (Cloud Hypervisor's and
 * Firecracker's TokenBucketConfig): up to `size` tokens, refilled
 * continuously at size per refill_time, plus a one-time burst spent first.
 * One token is one byte here. Not locked: its device's lock guards it.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct token_bucket {
    uint64_t size;           /* 0: unlimited */
    uint64_t refill_time_ns;
    uint64_t tokens;         /* available now, at most size */
    uint64_t burst;          /* one-time burst left */
    uint64_t last_ns;        /* when tokens were last refilled (CLOCK_MONOTONIC) */
};

void token_bucket_init(struct token_bucket *b, uint64_t size, uint64_t one_time_burst, uint64_t refill_time_ms,
                       uint64_t now_ns);
/* Take up to want tokens at now_ns; returns how many were taken (want when
 * unlimited). */
uint64_t token_bucket_take(struct token_bucket *b, uint64_t want, uint64_t now_ns);
/* How long from now_ns until `want` tokens (at most size) are there; 0 if
 * they are. */
uint64_t token_bucket_wait_ns(const struct token_bucket *b, uint64_t want, uint64_t now_ns);
