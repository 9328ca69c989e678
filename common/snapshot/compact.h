/* Compaction: folding layers together, offline, crash-safely (the result is
 * written to a temporary name and renamed; inputs are untouched until then). */
#pragma once

#include "snapshot/chain.h"

/* Write one layer at out_path holding what the whole chain holds: from a full
 * chain a new full (base) layer, from a partial chain (SNAP_CHAIN_ALLOW_PARTIAL)
 * a diff naming the first layer's parent. id: the new layer's id; NULL keeps
 * the top layer's id, so diffs already taken on top of the chain still name it.
 * Every data block read is checked. */
bool snap_compact_chain(struct snap_chain *chain, const char *out_path, const snap_id *id,
                        GError **error);

/* Fold an inner layer into its child: child_path is rewritten (same id) to hold
 * both, naming the inner layer's parent (or none if the inner layer was a
 * base). Afterwards the inner layer file is no longer needed by the child
 * (libvirt's snapshot-delete of an inner snapshot). */
bool snap_compact_fold(const char *parent_path, const char *child_path, GError **error);
