/* Store URLs in vm.restore's source_url and vm.snapshot's destination_url
 * (vsnap extension, docs/cloud-hypervisor-api.md): the snapshot store of
 * common/store, through this host's layer cache.
 *
 *   http://host/prefix/ID, https://..., s3://bucket/prefix/ID
 *       a snapshot in a store (restore), or a store prefix (snapshot);
 *   file:///dir (or a plain path)
 *       a local snapshot directory, as without a store.
 *
 * A file:// store is not reachable through the shim: its refs look exactly
 * like local directories (pull it with vsnap-store first). */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "store/store.h"

/* A transfer inside an API request (an import for vm.restore, a push for
 * vm.snapshot) ends within this, whatever the store does, unless
 * --store-config's [store] timeout says otherwise (0: only the store's
 * per-request bounds): well inside the 30 s clients such as virtvsnapd give
 * a request, so the answer (504) arrives before they give up. */
#define API_STORE_TIMEOUT_S 25u

/* The shim's store settings: --store-config's [store] and [s3] groups,
 * --store-cache-dir over its cache_dir, the host default cache otherwise;
 * and the directories this shim's restores pulled, which are its own to
 * remove. */
struct api_store {
    char *cache_dir;
    guint64 cache_size;
    struct store_options options;
    GPtrArray *pulled; /* struct api_store_pulled * */
    struct api_push_job *push; /* the push under way (shim/api/store-push-job.h), or NULL */
};

/* config_path and cache_dir may be NULL. Errors name the file. */
bool api_store_init(struct api_store *s, const char *config_path, const char *cache_dir, GError **error);
void api_store_clear(struct api_store *s);

bool api_store_is_store_url(const char *url);

/* SHIM_ERROR_UNSUPPORTED (400) when this shim cannot reach a store: a
 * confined one (its jail has no cache, its filter no network sockets). */
bool api_store_check_reachable(const char *field, const char *url, GError **error);

/* Pull ref (URL/ID) through the cache into a new directory under base;
 * returns that directory. Errors are SHIM_ERRORs naming the object.
 *
 * The directory (store-<id>-XXXXXX/<ID>: hard links to the cached layers,
 * so removing it costs nothing and never touches the cache) is this
 * shim's: it goes when the VM restored from it does (api_store_remove_pulled)
 * unless a snapshot may name it (api_store_keep_pulled). Its holder has a
 * lock file (shim.lock) this shim holds while it lives: an import into the
 * same base removes the holders whose shim died (kill -9) first. */
char *api_store_import(struct api_store *s, const char *ref, const char *base, GError **error);
/* Both, and api_store_push: the options' timeout_s bounds the whole
 * transfer; a store that does not finish in time is SHIM_ERROR_TIMEOUT
 * (504) naming the request it was in. */

/* The restore from dir (what api_store_import returned) was refused: dir
 * goes now. */
void api_store_discard_import(struct api_store *s, const char *dir);

/* The VM restored from the pulled directories took a snapshot, which names
 * them (its memory's parent, its disks' chain): they stay, as any snapshot
 * directory does (their lock files go, so no later shim removes them). */
void api_store_keep_pulled(struct api_store *s);

/* The VM is gone (vm.delete, the shim's exit): no VM maps or reads the
 * pulled directories any more; they are removed. */
void api_store_remove_pulled(struct api_store *s);

/* A new empty directory under base (NULL: beside the cache) for a snapshot
 * that is pushed once written. */
char *api_store_local_dir(const struct api_store *s, const char *base, const char *what, GError **error);

/* Push the snapshot directory dir (and its parents) to url; *id gets the
 * manifest id. cancel and on_progress as store_options' (may be NULL); a
 * cancelled push is SHIM_ERROR_CANCELLED. */
struct api_push_args {
    const char *dir, *url;
    gint *cancel;
    void (*on_progress)(void *data, guint64 done, guint64 total);
    void *progress_data;
};
bool api_store_push(const struct api_store *s, const struct api_push_args *args, char **id,
                    struct store_push_result *result, GError **error);
