#include "pattern.h"

uint64_t pattern_mix(uint64_t x)
{
    uint64_t z = x + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void pattern_fill(uint64_t *dst, uint64_t first_word, uint64_t nwords, uint64_t seed)
{
    /* x86 is little-endian, so a plain 64-bit store gives the byte order the
     * pattern defines. volatile: the point is that the bytes land in guest RAM. */
    volatile uint64_t *out = dst;
    for (uint64_t i = 0; i < nwords; i++)
        out[i] = pattern_mix(seed ^ (first_word + i));
}

uint64_t fnv1a64_update(uint64_t hash, const void *buf, uint64_t len)
{
    const volatile uint8_t *p = buf;
    for (uint64_t i = 0; i < len; i++) {
        hash ^= p[i];
        hash *= FNV1A64_PRIME;
    }
    return hash;
}
