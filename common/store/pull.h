/* What pull.c and pull-chain.c share. Library-internal. */
#pragma once

#include "store/cache.h"
#include "store/manifest.h"
#include "store/transport.h"

/* manifests/<id>.json from t, parsed; its id must be id. */
struct manifest *pull_fetch_manifest(struct transport *t, const char *id, GError **error);

/* Whether dir holds snapshot id. */
bool pull_has_snapshot(const char *dir, const char *id);

/* The snapshots a pull of m needs first and the cache's snapshots/ lacks
 * (its parent, unless parent_dir holds it, and its disks' parent
 * snapshots, with theirs), each after those it needs: ids, m's own not
 * among them. A store's manifests are walked, not trusted: a parent that
 * leads back to a snapshot on the way (m naming itself, a loop) is refused,
 * and so is a chain deeper than the format's (SNAP_MAX_CHAIN) or a pull
 * needing more snapshots than that in all (a store inventing parents), the
 * error naming the limit. Only ids are kept, and nothing is held open:
 * pulling them costs the same fds at any depth. */
GPtrArray *pull_chain_plan(struct transport *t, const struct manifest *m, const char *parent_dir,
                           struct store_cache *cache, GError **error);
