/* The walk the eager restores share (ram-snapshot internal): every run of
 * pages the chain holds as data, its blocks checked first. */
#pragma once

#include "snapshot/chain.h"

/* Pages [page, page + n) come from src (n pages of layer l's data). */
typedef bool (*snap_data_run_fn)(void *opaque, struct snap_layer *l, uint64_t page, uint64_t n,
                                 const uint8_t *src, GError **error);

/* fn for each data run of the chain, in RAM order, each checked by
 * snap_layer_verify_data before; zero and absent runs are skipped. */
bool snap_chain_each_data_run(struct snap_chain *c, snap_data_run_fn fn, void *opaque, GError **error);
