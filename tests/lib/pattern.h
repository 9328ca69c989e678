/* Host-side reference of the test guest's fill pattern and checksum, written
 * independently of guest/testguest/pattern.c so the tests check the guest rather
 * than compare it with itself.
 *
 * A region filled with seed S holds, as its 8-byte little-endian word number k
 * (k = 0 at the region's start), mix(S ^ k), where mix is splitmix64's output
 * function. Its checksum is 64-bit FNV-1a over the region's bytes in order.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define PATTERN_FNV_OFFSET_BASIS 0xcbf29ce484222325ull
#define PATTERN_FNV_PRIME 0x100000001b3ull

/* splitmix64's output function. */
uint64_t pattern_mix(uint64_t x);

/* Word k of a region filled with seed. */
uint64_t pattern_word(uint64_t seed, uint64_t k);

/* FNV-1a over len bytes, continuing from hash. */
uint64_t pattern_fnv1a(uint64_t hash, const void *buf, size_t len);

/* Checksum of the first length bytes of a region filled with seed (length need
 * not be a multiple of 8). length 0 gives the offset basis. */
uint64_t pattern_checksum(uint64_t seed, uint64_t length);

/* Fill len bytes at buf as the region's bytes starting at byte 0. */
void pattern_fill(void *buf, size_t len, uint64_t seed);
