/* Store URLs for vm.snapshot and vm.restore: settings, import through the
 * cache, push of a written snapshot (store-refs.h). */
#define G_LOG_DOMAIN "vsnap-shim"

#include "api/store-refs.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "config/shim-error.h"
#include "store-push-job.h"
#include "sandbox/confine.h"
#include "snapshot/directory.h"

/* A holder's lock file: held by the shim that pulled into the holder, for
 * as long as it lives; missing once a snapshot names the pull. */
#define PULL_LOCK "shim.lock"

struct api_store_pulled {
    char *holder; /* store-<id>-XXXXXX, the pulled snapshot inside */
    int lock_fd;  /* holder/PULL_LOCK, LOCK_EX */
};

static void pulled_free(gpointer data)
{
    struct api_store_pulled *p = data;
    if (p->lock_fd >= 0)
        close(p->lock_fd);
    g_free(p->holder);
    g_free(p);
}

bool api_store_init(struct api_store *s, const char *config_path, const char *cache_dir, GError **error)
{
    memset(s, 0, sizeof(*s));
    s->pulled = g_ptr_array_new_with_free_func(pulled_free);
    store_options_init(&s->options);
    s->cache_size = STORE_DEFAULT_CACHE_SIZE;
    s->options.timeout_s = API_STORE_TIMEOUT_S;
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
    if (s->push) /* the shim's exit: the push stops, its client hears nothing */
        api_push_job_end_now(s->push);
    g_clear_pointer(&s->pulled, g_ptr_array_unref);
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
 * 404, a bad argument 400, a deadline that passed 504, everything else
 * 500; the message (which names the object) is kept. */
static void to_shim_error(GError **error, const char *what)
{
    if (!*error || (*error)->domain == SHIM_ERROR)
        return;
    int code = SHIM_ERROR_FAILED;
    if ((*error)->domain == STORE_ERROR && (*error)->code == STORE_ERROR_NOT_FOUND)
        code = SHIM_ERROR_NOT_FOUND;
    else if ((*error)->domain == STORE_ERROR && (*error)->code == STORE_ERROR_INVALID)
        code = SHIM_ERROR_INVALID;
    else if ((*error)->domain == STORE_ERROR && (*error)->code == STORE_ERROR_TIMEOUT)
        code = SHIM_ERROR_TIMEOUT;
    else if ((*error)->domain == STORE_ERROR && (*error)->code == STORE_ERROR_CANCELLED)
        code = SHIM_ERROR_CANCELLED;
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

static char *base_dir(const struct api_store *s, const char *base)
{
    return base ? g_strdup(base) : g_build_filename(s->cache_dir, "shim", NULL);
}

char *api_store_local_dir(const struct api_store *s, const char *base, const char *what, GError **error)
{
    g_autofree char *dir = base_dir(s, base);
    return new_dir_under(dir, what, error);
}

static void remove_holder(const char *holder)
{
    g_autoptr(GError) e = NULL;
    if (!snap_dir_remove(holder, &e))
        g_warning("cannot remove the pulled snapshot %s: %s", holder, e->message);
}

/* The lock is taken before the file has its name, so a scan never finds a
 * live pull's lock file free. */
static int lock_holder(const char *holder, GError **error)
{
    g_autofree char *tmp = g_build_filename(holder, PULL_LOCK ".new", NULL);
    g_autofree char *path = g_build_filename(holder, PULL_LOCK, NULL);
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "cannot make the lock file %s: %s", path, g_strerror(e));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Holders under base whose lock file nobody holds: pulled by a shim that
 * died without removing them (kill -9). Those of live shims are locked;
 * those a snapshot names have no lock file; a vm.snapshot's local copies
 * (store-snapshot-*) are never pulls. */
static void remove_stale_pulls(const char *base)
{
    g_autoptr(GDir) dir = g_dir_open(base, 0, NULL);
    for (const char *name; dir && (name = g_dir_read_name(dir));) {
        if (!g_str_has_prefix(name, "store-") || g_str_has_prefix(name, "store-snapshot-"))
            continue;
        g_autofree char *holder = g_build_filename(base, name, NULL);
        g_autofree char *lock = g_build_filename(holder, PULL_LOCK, NULL);
        int fd = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            g_info("removing %s: pulled by a shim that is gone", holder);
            remove_holder(holder);
        }
        close(fd);
    }
}

/* The directory a pull makes must not exist: it goes inside a new one, so
 * two restores of one snapshot into one work directory do not collide. */
char *api_store_import(struct api_store *s, const char *ref, const char *base, GError **error)
{
    g_autofree char *url = NULL, *id = NULL;
    if (!store_split_ref(ref, &url, &id, error)) {
        to_shim_error(error, "source_url");
        return NULL;
    }
    g_autofree char *under = base_dir(s, base);
    remove_stale_pulls(under);
    g_autofree char *prefix = g_strdup_printf("store-%.12s", id);
    g_autofree char *holder = new_dir_under(under, prefix, error);
    if (!holder)
        return NULL;
    int lock_fd = lock_holder(holder, error);
    if (lock_fd < 0) {
        remove_holder(holder);
        return NULL;
    }
    g_autofree char *dest = g_build_filename(holder, id, NULL);
    struct store_cache *cache = store_cache_open(s->cache_dir, s->cache_size, error);
    struct store_pull_result r = { 0 };
    gint64 t0 = g_get_monotonic_time();
    struct store_options o = s->options; /* shares the strings: not cleared */
    store_options_start_deadline(&o);
    bool ok = cache && store_pull(url, id, dest, cache, &o, &r, error);
    if (cache)
        store_cache_close(cache);
    if (!ok) {
        g_autofree char *what = g_strdup_printf("cannot import %s (cache %s)", ref, s->cache_dir);
        to_shim_error(error, what);
        remove_holder(holder);
        close(lock_fd);
        return NULL;
    }
    g_info("imported %s into %s: %u layers from the store (%" G_GUINT64_FORMAT " bytes), %u from the cache, "
           "%.3f s", ref, dest, r.layers_fetched, r.bytes_received, r.layers_cached,
           (g_get_monotonic_time() - t0) / 1e6);
    struct api_store_pulled *p = g_new0(struct api_store_pulled, 1);
    p->holder = g_steal_pointer(&holder);
    p->lock_fd = lock_fd;
    g_ptr_array_add(s->pulled, p);
    return g_steal_pointer(&dest);
}

void api_store_discard_import(struct api_store *s, const char *dir)
{
    g_autofree char *holder = g_path_get_dirname(dir);
    for (guint i = 0; i < s->pulled->len; i++) {
        struct api_store_pulled *p = s->pulled->pdata[i];
        if (strcmp(p->holder, holder) == 0) {
            remove_holder(p->holder);
            g_ptr_array_remove_index_fast(s->pulled, i);
            return;
        }
    }
}

void api_store_keep_pulled(struct api_store *s)
{
    for (guint i = 0; i < s->pulled->len; i++) {
        struct api_store_pulled *p = s->pulled->pdata[i];
        g_autofree char *lock = g_build_filename(p->holder, PULL_LOCK, NULL);
        if (unlink(lock) != 0 && errno != ENOENT)
            g_warning("cannot remove %s: %s", lock, g_strerror(errno));
        g_info("keeping %s: a snapshot of the VM restored from it names it", p->holder);
    }
    g_ptr_array_remove_range(s->pulled, 0, s->pulled->len);
}

void api_store_remove_pulled(struct api_store *s)
{
    for (guint i = 0; s->pulled && i < s->pulled->len; i++) {
        struct api_store_pulled *p = s->pulled->pdata[i];
        g_info("removing %s: the VM restored from it is gone", p->holder);
        remove_holder(p->holder);
    }
    if (s->pulled)
        g_ptr_array_remove_range(s->pulled, 0, s->pulled->len);
}

bool api_store_push(const struct api_store *s, const struct api_push_args *args, char **id,
                    struct store_push_result *result, GError **error)
{
    const char *dir = args->dir, *url = args->url;
    struct store_push_args a = { .dir = dir, .url = url };
    gint64 t0 = g_get_monotonic_time();
    struct store_options o = s->options; /* shares the strings: not cleared */
    o.cancel = args->cancel;
    o.on_progress = args->on_progress;
    o.progress_data = args->progress_data;
    store_options_start_deadline(&o);
    if (!store_push(&a, &o, result, error)) {
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
