#include "pattern.h"

#include <string.h>

uint64_t pattern_mix(uint64_t x)
{
    uint64_t z = x + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t pattern_word(uint64_t seed, uint64_t k)
{
    return pattern_mix(seed ^ k);
}

uint64_t pattern_fnv1a(uint64_t hash, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < len; i++) {
        hash ^= p[i];
        hash *= PATTERN_FNV_PRIME;
    }
    return hash;
}

/* The bytes of word w in little-endian order, whatever the host's order is. */
static void word_bytes(uint64_t w, uint8_t out[8])
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(w >> (8 * i));
}

uint64_t pattern_checksum(uint64_t seed, uint64_t length)
{
    uint64_t hash = PATTERN_FNV_OFFSET_BASIS;
    uint8_t bytes[8];
    uint64_t k = 0;
    for (; (k + 1) * 8 <= length; k++) {
        word_bytes(pattern_word(seed, k), bytes);
        hash = pattern_fnv1a(hash, bytes, 8);
    }
    if (length % 8) {
        word_bytes(pattern_word(seed, k), bytes);
        hash = pattern_fnv1a(hash, bytes, length % 8);
    }
    return hash;
}

void pattern_fill(void *buf, size_t len, uint64_t seed)
{
    uint8_t *out = buf;
    uint8_t bytes[8];
    for (size_t off = 0, k = 0; off < len; off += 8, k++) {
        word_bytes(pattern_word(seed, k), bytes);
        memcpy(out + off, bytes, len - off < 8 ? len - off : 8);
    }
}
