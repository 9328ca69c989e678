/* Store URLs for vm.snapshot and vm.restore: settings, import through the
 * cache, push of a written snapshot (store-refs.h). */
#define G_LOG_DOMAIN "vsnap-shim"

#include "api/store-refs.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "config/shim-error.h"
#include "sandbox/confine.h"
#include "snapshot/directory.h"

bool api_store_init(struct api_store *s, const char *config_path, const char *cache_dir, GError **error)
{
    memset(s, 0, sizeof(*s));
    store_options_init(&s->options);
    s->cache_size = STORE_DEFAULT_CACHE_SIZE;
    if (config_path && !store_options_load(&s->options, config_path, NULL, &s->cache_dir, &s->cache_size, error)) {
        g_prefix_error(error, "--store-config: ");
        return false;
    }
    if (cache_dir) {
        g_free(s->cache_dir);
        s->cache_dir = g_strdup(cache_dir);
    }
    if (!s->cache_dir)
        s->cache_dir = store_cache_default_dir();
    return true;
}

void api_store_clear(struct api_store *s)
{
    g_clear_pointer(&s->cache_dir, g_free);
    store_options_clear(&s->options);
}

bool api_store_is_store_url(const char *url)
{
    return url && (g_str_has_prefix(url, "http://") || g_str_has_prefix(url, "https://") ||
                   g_str_has_prefix(url, "s3://"));
}

bool api_store_check_reachable(const char *field, const char *url, GError **error)
{
    if (!sandbox_is_confined())
        return true;
    bool restore = g_str_equal(field, "source_url");
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_UNSUPPORTED,
                "%s: %s is a store URL, which a confined shim (--confine) does not reach: its jail holds "
                "no layer cache and its system call filter no sockets that reach a store; %s", field, url,
                restore ? "import the snapshot first (vsnap-store pull, or virtvsnapd) and give its local "
                          "file:// directory"
                        : "snapshot to a local file:// directory and push that (vsnap-store push, or "
                          "virtvsnapd)");
    return false;
}

/* A store's error as the API answers it: a missing object or manifest is
 * 404, a bad argument 400, everything else 500; the message (which names
 * the object) is kept. */
static void to_shim_error(GError **error, const char *what)
{
    if (!*error || (*error)->domain == SHIM_ERROR)
        return;
    int code = SHIM_ERROR_FAILED;
    if ((*error)->domain == STORE_ERROR && (*error)->code == STORE_ERROR_NOT_FOUND)
        code = SHIM_ERROR_NOT_FOUND;
    else if ((*error)->domain == STORE_ERROR && (*error)->code == STORE_ERROR_INVALID)
        code = SHIM_ERROR_INVALID;
    GError *shim = g_error_new(SHIM_ERROR, code, "%s: %s", what, (*error)->message);
    g_clear_error(error);
    *error = shim;
}

static char *new_dir_under(const char *base, const char *prefix, GError **error)
{
    if (g_mkdir_with_parents(base, 0700) != 0) {
        int e = errno;
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "cannot create %s: %s", base, g_strerror(e));
        return NULL;
    }
    g_autofree char *name = g_strdup_printf("%s-XXXXXX", prefix);
    char *dir = g_build_filename(base, name, NULL);
    if (!g_mkdtemp_full(dir, 0700)) {
        int e = errno;
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "cannot create a directory in %s: %s", base,
                    g_strerror(e));
        g_free(dir);
        return NULL;
    }
    return dir;
}

char *api_store_local_dir(const struct api_store *s, const char *base, const char *what, GError **error)
{
    g_autofree char *beside_cache = g_build_filename(s->cache_dir, "shim", NULL);
    return new_dir_under(base ? base : beside_cache, what, error);
}

/* The directory a pull makes must not exist: it goes inside a new one, so
 * two restores of one snapshot into one work directory do not collide. */
char *api_store_import(const struct api_store *s, const char *ref, const char *base, GError **error)
{
    g_autofree char *url = NULL, *id = NULL;
    if (!store_split_ref(ref, &url, &id, error)) {
        to_shim_error(error, "source_url");
        return NULL;
    }
    g_autofree char *prefix = g_strdup_printf("store-%.12s", id);
    g_autofree char *holder = api_store_local_dir(s, base, prefix, error);
    if (!holder)
        return NULL;
    g_autofree char *dest = g_build_filename(holder, id, NULL);
    struct store_cache *cache = store_cache_open(s->cache_dir, s->cache_size, error);
    struct store_pull_result r = { 0 };
    gint64 t0 = g_get_monotonic_time();
    bool ok = cache && store_pull(url, id, dest, cache, &s->options, &r, error);
    if (cache)
        store_cache_close(cache);
    if (!ok) {
        g_autofree char *what = g_strdup_printf("cannot import %s (cache %s)", ref, s->cache_dir);
        to_shim_error(error, what);
        snap_dir_remove(holder, NULL);
        return NULL;
    }
    g_info("imported %s into %s: %u layers from the store (%" G_GUINT64_FORMAT " bytes), %u from the cache, "
           "%.3f s", ref, dest, r.layers_fetched, r.bytes_received, r.layers_cached,
           (g_get_monotonic_time() - t0) / 1e6);
    return g_steal_pointer(&dest);
}

bool api_store_push(const struct api_store *s, const char *dir, const char *url, char **id,
                    struct store_push_result *result, GError **error)
{
    struct store_push_args a = { .dir = dir, .url = url };
    gint64 t0 = g_get_monotonic_time();
    if (!store_push(&a, &s->options, result, error)) {
        g_autofree char *what = g_strdup_printf("cannot push the snapshot at file://%s to %s", dir, url);
        to_shim_error(error, what);
        return false;
    }
    g_info("pushed %s to %s as %s: %u objects sent (%" G_GUINT64_FORMAT " bytes), %u there already, %.3f s", dir,
           url, result->id, result->objects_sent, result->bytes_sent, result->objects_skipped,
           (g_get_monotonic_time() - t0) / 1e6);
    *id = g_strdup(result->id);
    return true;
}
