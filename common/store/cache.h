/* The cache's inside, for pull (cache.c; the public part is in store.h).
 *
 *   <dir>/layers/<sha256>      decompressed layers, by digest
 *   <dir>/used/<sha256>        its mtime is the layer's last use (LRU)
 *   <dir>/locks/<sha256>       held (flock) while that layer is imported
 *   <dir>/tmp/<sha256>.XXXXXX  an import in progress (flock'ed by its process)
 *   <dir>/snapshots/<id>/      pulled parent snapshots (hard links into layers/)
 *   <dir>/lock                 held while entries are added or evicted
 */
#pragma once

#include "store/store.h"

/* Fill fd (already size bytes long, reading as zero) with the layer. */
typedef bool (*cache_fill_fn)(void *ctx, int fd, const char *path, GError **error);

/* The layer digest of size bytes, from the cache or, when it is not there,
 * imported by fill into a temporary file that enters the cache only when
 * fill succeeded. Two processes asking for one digest at once make one
 * import: the second waits for the first and then hits. *pin_fd holds the
 * layer (no eviction) until closed; *hit says whether it was cached. The
 * wait for another import stops at o's cancel (o may be NULL). */
bool cache_get_layer(struct store_cache *c, const char *digest, guint64 size, cache_fill_fn fill,
                     void *ctx, const struct store_options *o, char **path, int *pin_fd,
                     bool *hit, GError **error);

/* Hold <dir>/locks/snapshot-<id> (returns its fd) while a parent snapshot is
 * pulled into snapshots/, so two pulls make it once. Both waits for another
 * process's import end by o's deadline (store_options.deadline; none: an
 * hour) and at its cancel. */
int cache_lock_snapshot(struct store_cache *c, const char *id, const struct store_options *o,
                        GError **error);

/* <dir>/snapshots/<id> */
char *cache_snapshot_dir(struct store_cache *c, const char *id);

/* The layers (digests) a pull that failed imported leave the cache again,
 * but those some process pins or maps by now (another pull that hit them).
 * Best effort: a layer that cannot be removed is a whole, checked entry,
 * evicted by size later like any other. */
void cache_drop_layers(struct store_cache *c, GPtrArray *digests);
