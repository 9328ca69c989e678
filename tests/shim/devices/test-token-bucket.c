/* The rate limit of virtio-rng (devices/backend/token-bucket.c) and the kvmclock
 * arithmetic of a restore without KVM_CLOCK_REALTIME (persist/clock.c). */
#include <glib.h>

#include "devices/token-bucket.h"
#include "persist/clock.h"

#define MS 1000000ull

static void test_unlimited(void)
{
    struct token_bucket b;
    token_bucket_init(&b, 0, 0, 0, 0);
    g_assert_cmpuint(token_bucket_take(&b, 1 << 20, 0), ==, 1 << 20);
    g_assert_cmpuint(token_bucket_wait_ns(&b, 1 << 20, 0), ==, 0);
}

static void test_refill(void)
{
    struct token_bucket b;
    token_bucket_init(&b, 4096, 0, 1000, 0); /* 4 KiB per second */
    g_assert_cmpuint(token_bucket_take(&b, 10000, 0), ==, 4096); /* starts full */
    g_assert_cmpuint(token_bucket_take(&b, 1, 0), ==, 0);
    uint64_t wait = token_bucket_wait_ns(&b, 1024, 0);
    g_assert_cmpuint(wait, >=, 250 * MS);                       /* 1 KiB takes 250 ms */
    g_assert_cmpuint(wait, <=, 251 * MS);
    g_assert_cmpuint(token_bucket_take(&b, 4096, 250 * MS), ==, 1024);
    g_assert_cmpuint(token_bucket_take(&b, 4096, 10000 * MS), ==, 4096); /* never more than size */
    /* Small steps lose nothing: 1000 steps of 1 ms refill one second's worth. */
    uint64_t got = 0;
    for (uint64_t t = 1; t <= 1000; t++)
        got += token_bucket_take(&b, 4096, 10000 * MS + t * MS);
    g_assert_cmpuint(got, >=, 4095);
    g_assert_cmpuint(got, <=, 4096);
}

static void test_burst(void)
{
    struct token_bucket b;
    token_bucket_init(&b, 100, 1000, 1000, 0);
    g_assert_cmpuint(token_bucket_take(&b, 600, 0), ==, 600);   /* from the burst */
    g_assert_cmpuint(token_bucket_take(&b, 600, 0), ==, 500);   /* the rest of it, then the bucket */
    g_assert_cmpuint(token_bucket_take(&b, 600, 0), ==, 0);
}

static void test_clock_advanced(void)
{
    /* Stopped 5 s of wall time: the guest clock moves on by 5 s. */
    g_assert_cmpuint(clock_advanced(1000, 10 * 1000 * MS, 15 * 1000 * MS), ==, 1000 + 5 * 1000 * MS);
    /* The host's wall clock went back: the guest clock never does. */
    g_assert_cmpuint(clock_advanced(1000, 15 * 1000 * MS, 10 * 1000 * MS), ==, 1000);
    g_assert_cmpstr(clock_restore_method_name(CLOCK_RESTORE_ADVANCE), ==, "advance");
    g_assert_cmpstr(clock_restore_method_name(CLOCK_RESTORE_REALTIME), ==, "realtime");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/token-bucket/unlimited", test_unlimited);
    g_test_add_func("/token-bucket/refill", test_refill);
    g_test_add_func("/token-bucket/burst", test_burst);
    g_test_add_func("/clock/advanced", test_clock_advanced);
    return g_test_run();
}
