/* The fill pattern and checksum the host tests check against (their own
 * implementation is tests/lib/pattern.c).
 *
 * Word k (8 bytes, little-endian) of a region filled with seed S is
 * pattern_mix(S ^ k), k counting from 0 at the region's start; pattern_mix is
 * splitmix64's output function. The checksum is 64-bit FNV-1a over the bytes.
 */
#pragma once

#include <stdint.h>

#define FNV1A64_OFFSET_BASIS 0xcbf29ce484222325ull
#define FNV1A64_PRIME 0x100000001b3ull

uint64_t pattern_mix(uint64_t x);

/* Write nwords words of the pattern for seed, starting at word number first_word
 * of the region, to dst. */
void pattern_fill(uint64_t *dst, uint64_t first_word, uint64_t nwords, uint64_t seed);

/* Continue an FNV-1a hash over len bytes at buf (start with FNV1A64_OFFSET_BASIS). */
uint64_t fnv1a64_update(uint64_t hash, const void *buf, uint64_t len);
