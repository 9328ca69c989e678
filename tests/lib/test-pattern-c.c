/* pattern.c's pieces agree with each other: pattern_fill + pattern_fnv1a gives
 * pattern_checksum for every length (including partial words), word k is
 * little-endian at byte 8k, and pattern_mix has splitmix64's published outputs. */
#include <stdio.h>
#include <stdlib.h>

#include "pattern.h"

static int failures;

static void check(int ok, const char *what, unsigned long long a, unsigned long long b)
{
    if (!ok) {
        fprintf(stderr, "FAIL %s: %016llx != %016llx\n", what, a, b);
        failures++;
    }
}

int main(void)
{
    check(pattern_mix(0) == 0xe220a8397b1dcdafull, "mix(0)", pattern_mix(0), 0xe220a8397b1dcdafull);
    check(pattern_mix(0x9e3779b97f4a7c15ull) == 0x6e789e6aa1b965f4ull, "mix(golden)",
          pattern_mix(0x9e3779b97f4a7c15ull), 0x6e789e6aa1b965f4ull);

    enum { MAX = 4096 + 7 };
    unsigned char *buf = malloc(MAX);
    if (!buf)
        return 1;
    for (size_t len = 0; len <= MAX; len += len < 80 ? 1 : 509) {
        pattern_fill(buf, len, 42);
        uint64_t a = pattern_fnv1a(PATTERN_FNV_OFFSET_BASIS, buf, len);
        uint64_t b = pattern_checksum(42, len);
        check(a == b, "fill+fnv vs checksum", a, b);
    }
    pattern_fill(buf, 24, 7);
    uint64_t w2 = 0;
    for (int i = 7; i >= 0; i--)
        w2 = w2 << 8 | buf[16 + i];
    check(w2 == pattern_word(7, 2), "word 2 little-endian", w2, pattern_word(7, 2));
    free(buf);
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
