/* Shared helpers of the snapshot layer tests: temp dirs, RAM mappings, page
 * patterns, and a three-snapshot scenario (base, d1, d2) with the RAM image
 * expected at each snapshot, computed independently of the layer code. */
#pragma once

#include "ram-snapshot/save.h"
#include "snapshot/chain.h"

#include <stdint.h>

#define TEST_PAGE 4096ull

char *test_tmpdir(void);
void test_rmtree(const char *dir);

/* MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, or a MAP_SHARED memfd when fd != NULL. */
uint8_t *test_ram_new(uint64_t size, int *fd);
void test_ram_free(uint8_t *ram, uint64_t size, int fd);
/* Pages of [ram, ram + size) resident now (mincore). */
uint64_t test_resident_pages(const uint8_t *ram, uint64_t size);

/* Word k of page p filled with seed s holds mix(s ^ (p * 512 + k)), never 0. */
void test_fill(uint8_t *ram, uint64_t first_page, uint64_t npages, uint64_t seed);
uint64_t *test_bitmap_new(uint64_t ram_size);
void test_bitmap_set(uint64_t *bitmap, uint64_t first_page, uint64_t npages);

/* Assert two RAM images are equal; the message names the first differing page. */
void test_assert_ram_equal(const uint8_t *got, const uint8_t *want, uint64_t size, const char *what);

void test_flip_byte(const char *path, uint64_t offset);
void test_truncate(const char *path, uint64_t size);
uint64_t test_file_size(const char *path);

/* base, d1, d2 over RAM of size bytes (anonymous RAM, or memfd if use_fd). */
struct test_scenario {
    char *dir;
    uint64_t size;
    char *paths[3];
    snap_id ids[3];
    uint8_t *expected[3]; /* g_malloc'd images at each snapshot */
};

void test_scenario_build(struct test_scenario *s, uint64_t size, bool use_fd);
void test_scenario_free(struct test_scenario *s);
struct snap_chain *test_open_chain(char *const *paths, unsigned n);
