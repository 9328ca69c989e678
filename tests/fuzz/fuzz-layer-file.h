/* Memory layer files (common/snapshot/layer.h) from fuzz input, shared by
 * the layer and chain targets. A record is
 *
 *   [struct snap_layer_header][flags: 1 byte][tail]
 *
 * and becomes a file in one of two ways. Raw: the header at offset 0, zeros
 * up to the data area (offset 4096), then the tail. Laid out
 * (FUZZ_LAYER_LAYOUT): page_count and run_count are taken modulo 64 and the
 * section offsets, block count and file size made consistent with them; the
 * data pages are filled from the tail's first byte, then come the runs and
 * the block checksums from the tail. Then, as the flags ask, the header,
 * index and block checksums are made right, so the fuzzer gets past them
 * to everything they guard. */
#pragma once

#include <stddef.h>
#include <stdint.h>

enum fuzz_layer_flags {
    FUZZ_LAYER_LAYOUT = 1 << 0,
    FUZZ_LAYER_FIX_BLOCKS = 1 << 1,   /* laid out only */
    FUZZ_LAYER_FIX_INDEX = 1 << 2,
    FUZZ_LAYER_FIX_HEADER = 1 << 3,
};

#define FUZZ_LAYER_MAX_PAGES 64u
#define FUZZ_LAYER_MAX_RUNS 64u

/* Write the record's file to path. */
void fuzz_layer_write(const char *path, const uint8_t *rec, size_t len);

/* Use an open layer as its readers do: look pages up, verify the data of
 * every block, read what verified. */
struct snap_layer;
void fuzz_layer_exercise(struct snap_layer *layer);
