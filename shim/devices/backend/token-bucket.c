/* See token-bucket.h. */
#include "devices/token-bucket.h"

/* a * b / c without overflowing for the sizes a device sees. */
static uint64_t mul_div(uint64_t a, uint64_t b, uint64_t c)
{
    return (uint64_t)((unsigned __int128)a * b / c);
}

void token_bucket_init(struct token_bucket *b, uint64_t size, uint64_t one_time_burst, uint64_t refill_time_ms,
                       uint64_t now_ns)
{
    *b = (struct token_bucket){
        .size = size,
        .refill_time_ns = refill_time_ms * 1000000ull,
        .tokens = size,
        .burst = one_time_burst,
        .last_ns = now_ns,
    };
}

static void refill(struct token_bucket *b, uint64_t now_ns)
{
    if (now_ns <= b->last_ns || b->refill_time_ns == 0)
        return;
    uint64_t elapsed = now_ns - b->last_ns;
    uint64_t add = mul_div(elapsed, b->size, b->refill_time_ns);
    if (add == 0)
        return; /* keep last_ns: the fraction is not lost */
    b->tokens = b->tokens + add >= b->size ? b->size : b->tokens + add;
    b->last_ns = b->tokens == b->size ? now_ns : b->last_ns + mul_div(add, b->refill_time_ns, b->size);
}

uint64_t token_bucket_take(struct token_bucket *b, uint64_t want, uint64_t now_ns)
{
    if (b->size == 0)
        return want;
    uint64_t from_burst = want < b->burst ? want : b->burst;
    b->burst -= from_burst;
    want -= from_burst;
    refill(b, now_ns);
    uint64_t taken = want < b->tokens ? want : b->tokens;
    b->tokens -= taken;
    return from_burst + taken;
}

uint64_t token_bucket_wait_ns(const struct token_bucket *b, uint64_t want, uint64_t now_ns)
{
    if (b->size == 0 || b->burst > 0)
        return 0;
    if (want > b->size)
        want = b->size;
    struct token_bucket probe = *b;
    refill(&probe, now_ns);
    if (probe.tokens >= want)
        return 0;
    /* The bucket holds probe.tokens as of probe.last_ns and gains size tokens
     * per refill_time from then on. */
    uint64_t missing = want - probe.tokens;
    uint64_t ready_at = probe.last_ns + mul_div(missing, probe.refill_time_ns, probe.size) + 1;
    return ready_at > now_ns ? ready_at - now_ns : 1;
}
