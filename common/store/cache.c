/* The per-host cache of decompressed layers (cache.h, store.h): bounded in
 * bytes, least recently used evicted first, file locks for several
 * processes, layers that a process maps or pins never evicted. */
#include "store/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/directory.h"

struct store_cache {
    char *dir;
    guint64 max_bytes;
};

static bool fail_errno(GError **error, int err, const char *what, const char *path)
{
    g_set_error(error, STORE_ERROR, err == ENOSPC || err == EDQUOT ? STORE_ERROR_NO_SPACE
                                                                   : STORE_ERROR_IO,
                "%s %s: %s", what, path, g_strerror(err));
    return false;
}

static char *sub(const struct store_cache *c, const char *kind, const char *name)
{
    return g_build_filename(c->dir, kind, name, NULL);
}

char *store_cache_default_dir(void)
{
    if (geteuid() == 0)
        return g_strdup("/var/cache/vsnap");
    return g_build_filename(g_get_user_cache_dir(), "vsnap", NULL);
}

struct store_cache *store_cache_open(const char *dir, guint64 max_bytes, GError **error)
{
    static const char *const subdirs[] = { "layers", "used", "verified", "locks", "tmp", "snapshots" };
    for (guint i = 0; i < G_N_ELEMENTS(subdirs); i++) {
        g_autofree char *p = g_build_filename(dir, subdirs[i], NULL);
        if (g_mkdir_with_parents(p, 0700) != 0) {
            fail_errno(error, errno, "create cache directory", p);
            return NULL;
        }
    }
    struct store_cache *c = g_new0(struct store_cache, 1);
    /* absolute: pulled snapshots name their parents in it by file:// URL */
    c->dir = g_canonicalize_filename(dir, NULL);
    c->max_bytes = max_bytes;
    return c;
}

void store_cache_close(struct store_cache *c)
{
    if (!c)
        return;
    g_free(c->dir);
    g_free(c);
}

const char *store_cache_dir(const struct store_cache *c)
{
    return c->dir;
}

char *cache_snapshot_dir(struct store_cache *c, const char *id)
{
    return sub(c, "snapshots", id);
}

/* flock with a deadline, so no lock waits forever: o's (store_options.
 * deadline, STORE_ERROR_TIMEOUT), else an hour; a wait for another import
 * stops at o's cancel (o may be NULL). */
static bool lock_fd(int fd, int op, const char *path, const struct store_options *o,
                    GError **error)
{
    gint64 deadline = o ? o->deadline : 0;
    gint64 end = deadline ? deadline : g_get_monotonic_time() + (gint64)3600 * G_USEC_PER_SEC;
    while (flock(fd, op | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR)
            return fail_errno(error, errno, "lock", path);
        if (store_cancelled(o, error)) {
            g_prefix_error(error, "waiting for %s: ", path);
            return false;
        }
        if (g_get_monotonic_time() > end) {
            if (deadline)
                g_set_error(error, STORE_ERROR, STORE_ERROR_TIMEOUT, "lock %s: still held (another process "
                            "imports the same layer) when the operation's deadline passed", path);
            else
                g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "lock %s: still held after an hour", path);
            return false;
        }
        g_usleep(5000);
    }
    return true;
}

static int open_locked(const char *path, int op, const struct store_options *o, GError **error)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        fail_errno(error, errno, "open", path);
        return -1;
    }
    if (!lock_fd(fd, op, path, o, error)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void touch_used(struct store_cache *c, const char *digest)
{
    g_autofree char *p = sub(c, "used", digest);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
        futimens(fd, NULL);
        close(fd);
    }
}

/* ---- in use: pinned (a shared flock on the layer) or mapped by a process ---- */

/* Inodes of every file some process maps (those /proc lets us read). */
static GHashTable *mapped_inodes(void)
{
    GHashTable *set = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    DIR *proc = opendir("/proc");
    if (!proc)
        return set;
    for (struct dirent *d; (d = readdir(proc));) {
        if (!g_ascii_isdigit(d->d_name[0]))
            continue;
        char path[300];
        snprintf(path, sizeof(path), "/proc/%s/maps", d->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        char line[4096];
        while (fgets(line, sizeof(line), f)) {
            unsigned long long ino = 0;
            if (sscanf(line, "%*s %*s %*s %*s %llu", &ino) == 1 && ino) {
                gint64 *k = g_new(gint64, 1);
                *k = (gint64)ino;
                g_hash_table_add(set, k);
            }
        }
        fclose(f);
    }
    closedir(proc);
    return set;
}

static bool layer_in_use(const char *path, const struct stat *st, GHashTable *mapped)
{
    gint64 ino = (gint64)st->st_ino;
    if (g_hash_table_contains(mapped, &ino))
        return true;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool pinned = flock(fd, LOCK_EX | LOCK_NB) != 0;
    close(fd);
    return pinned;
}

/* ---- listing ---- */

static gint64 used_ns(struct store_cache *c, const char *digest, const struct stat *layer)
{
    g_autofree char *p = sub(c, "used", digest);
    struct stat st;
    const struct stat *s = stat(p, &st) == 0 ? &st : layer;
    return (gint64)s->st_mtim.tv_sec * 1000000000 + s->st_mtim.tv_nsec;
}

static gint by_use(gconstpointer a, gconstpointer b)
{
    const struct store_cache_entry *x = a, *y = b;
    return x->used_ns < y->used_ns ? -1 : x->used_ns > y->used_ns;
}

static GArray *list_entries(struct store_cache *c, GHashTable *mapped, GError **error)
{
    g_autofree char *dir = g_build_filename(c->dir, "layers", NULL);
    g_autoptr(GError) e = NULL;
    GDir *d = g_dir_open(dir, 0, &e);
    if (!d) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "%s", e->message);
        return NULL;
    }
    GArray *a = g_array_new(FALSE, TRUE, sizeof(struct store_cache_entry));
    for (const char *n; (n = g_dir_read_name(d));) {
        g_autofree char *p = g_build_filename(dir, n, NULL);
        struct stat st;
        if (strlen(n) != 64 || stat(p, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        struct store_cache_entry en = { .size = st.st_size, .disk_bytes = (guint64)st.st_blocks * 512,
                                        .used_ns = used_ns(c, n, &st) };
        g_strlcpy(en.digest, n, sizeof(en.digest));
        en.in_use = mapped && layer_in_use(p, &st, mapped);
        g_array_append_val(a, en);
    }
    g_dir_close(d);
    g_array_sort(a, by_use);
    return a;
}

GArray *store_cache_list(struct store_cache *c, GError **error)
{
    g_autoptr(GHashTable) mapped = mapped_inodes();
    return list_entries(c, mapped, error);
}

guint64 store_cache_bytes(struct store_cache *c, GError **error)
{
    GArray *a = list_entries(c, NULL, error);
    guint64 total = 0;
    for (guint i = 0; a && i < a->len; i++)
        total += g_array_index(a, struct store_cache_entry, i).disk_bytes;
    if (a)
        g_array_unref(a);
    return total;
}

/* ---- eviction (with the cache lock held) ---- */

/* Pulled parent snapshots whose layer is the evicted one go with it. */
static void remove_snapshots_using(struct store_cache *c, ino_t ino)
{
    g_autofree char *dir = g_build_filename(c->dir, "snapshots", NULL);
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d)
        return;
    for (const char *n; (n = g_dir_read_name(d));) {
        g_autofree char *snap = g_build_filename(dir, n, NULL);
        GDir *sd = g_dir_open(snap, 0, NULL);
        bool uses = false;
        for (const char *f; sd && !uses && (f = g_dir_read_name(sd));) {
            g_autofree char *p = g_build_filename(snap, f, NULL);
            struct stat st;
            uses = lstat(p, &st) == 0 && st.st_ino == ino;
        }
        if (sd)
            g_dir_close(sd);
        if (uses)
            snap_dir_remove(snap, NULL);
    }
    g_dir_close(d);
}

static bool evict(struct store_cache *c, const struct store_cache_entry *en, GError **error)
{
    g_autofree char *p = sub(c, "layers", en->digest);
    g_autofree char *used = sub(c, "used", en->digest);
    g_autofree char *verified = sub(c, "verified", en->digest);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || fail_errno(error, errno, "open", p);
    struct stat st;
    bool ok = true;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ok = false;   /* pinned since it was listed: kept */
    } else if (fstat(fd, &st) == 0) {
        if (unlink(p) != 0 && errno != ENOENT)
            ok = fail_errno(error, errno, "unlink", p);
        unlink(used);
        unlink(verified);
        remove_snapshots_using(c, st.st_ino);
    }
    close(fd);
    return ok;
}

/* Whether the cached layer of en is in use; mapped (every process's mapped
 * inodes) is read at the first question only: reading every process's maps
 * takes tens of milliseconds on a busy host, and a pull that needs no room
 * asks none. */
static bool entry_in_use(struct store_cache *c, const struct store_cache_entry *en,
                         GHashTable **mapped)
{
    g_autofree char *p = sub(c, "layers", en->digest);
    struct stat st;
    if (stat(p, &st) != 0)
        return false;
    if (!*mapped)
        *mapped = mapped_inodes();
    return layer_in_use(p, &st, *mapped);
}

static bool cache_full(struct store_cache *c, guint64 need, guint64 in_use, GError **error)
{
    g_set_error(error, STORE_ERROR, STORE_ERROR_FULL,
                "cache %s (%" G_GUINT64_FORMAT " bytes) cannot hold %" G_GUINT64_FORMAT
                " more bytes: %" G_GUINT64_FORMAT " bytes are in use and cannot be evicted",
                c->dir, c->max_bytes, need, in_use);
    return false;
}

/* The least recently used entries of a (total bytes in all) to evict for
 * need more bytes to fit, none of them keep or in use; NULL when even
 * all of those would not make room (*in_use: what cannot go). */
static GPtrArray *pick_victims(struct store_cache *c, GArray *a, guint64 total, guint64 need,
                               const char *keep, guint64 *in_use)
{
    g_autoptr(GHashTable) mapped = NULL;
    GPtrArray *victims = g_ptr_array_new();
    *in_use = 0;
    for (guint i = 0; i < a->len && total + need > c->max_bytes; i++) {
        struct store_cache_entry *en = &g_array_index(a, struct store_cache_entry, i);
        if ((keep && strcmp(en->digest, keep) == 0) || entry_in_use(c, en, &mapped)) {
            *in_use += en->disk_bytes;
            continue;
        }
        g_ptr_array_add(victims, en);
        total -= en->disk_bytes;
    }
    if (total + need > c->max_bytes)
        g_clear_pointer(&victims, g_ptr_array_unref);
    return victims;
}

/* Evict until need more bytes fit; keep is never evicted. Nothing is
 * evicted unless that makes room: a claim larger than the cache (a
 * manifest's 2^62-byte layer) or than what is not in use fails first. */
static bool make_room(struct store_cache *c, guint64 need, const char *keep, GError **error)
{
    if (need > c->max_bytes) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_FULL,
                    "cache %s (%" G_GUINT64_FORMAT " bytes) cannot hold a layer of %" G_GUINT64_FORMAT
                    " bytes: refused before evicting anything", c->dir, c->max_bytes, need);
        return false;
    }
    GArray *a = list_entries(c, NULL, error);
    if (!a)
        return false;
    guint64 total = 0, in_use = 0;
    for (guint i = 0; i < a->len; i++)
        total += g_array_index(a, struct store_cache_entry, i).disk_bytes;
    GPtrArray *victims = total + need > c->max_bytes ? pick_victims(c, a, total, need, keep, &in_use)
                                                      : g_ptr_array_new();
    bool ok = victims != NULL || cache_full(c, need, in_use, error);
    for (guint i = 0; ok && victims && i < victims->len; i++) {
        const struct store_cache_entry *en = victims->pdata[i];
        g_autoptr(GError) e = NULL;
        if (evict(c, en, &e)) {
            total -= en->disk_bytes;
        } else if (e) {
            g_propagate_error(error, g_steal_pointer(&e));
            ok = false;
        } else {
            in_use += en->disk_bytes;   /* pinned since it was listed */
        }
    }
    if (ok && total + need > c->max_bytes)
        ok = cache_full(c, need, in_use, error);
    if (victims)
        g_ptr_array_unref(victims);
    g_array_unref(a);
    return ok;
}

static int lock_cache(struct store_cache *c, GError **error)
{
    g_autofree char *p = g_build_filename(c->dir, "lock", NULL);
    return open_locked(p, LOCK_EX, NULL, error);   /* held briefly: no cancel needed */
}

/* Temporary files of imports whose process died (their lock is free). */
static void remove_dead_imports(struct store_cache *c)
{
    g_autofree char *dir = g_build_filename(c->dir, "tmp", NULL);
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d)
        return;
    for (const char *n; (n = g_dir_read_name(d));) {
        g_autofree char *p = g_build_filename(dir, n, NULL);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlink(p);
        if (fd >= 0)
            close(fd);
    }
    g_dir_close(d);
}

bool store_cache_gc(struct store_cache *c, GError **error)
{
    int lock = lock_cache(c, error);
    if (lock < 0)
        return false;
    remove_dead_imports(c);
    g_autoptr(GError) e = NULL;
    bool ok = make_room(c, 0, NULL, &e);
    close(lock);
    if (!ok && !g_error_matches(e, STORE_ERROR, STORE_ERROR_FULL)) {
        g_propagate_error(error, g_steal_pointer(&e));
        return false;
    }
    return true;
}

void cache_drop_layers(struct store_cache *c, GPtrArray *digests)
{
    if (digests->len == 0)
        return;
    int lock = lock_cache(c, NULL);
    if (lock < 0)
        return;
    g_autoptr(GHashTable) mapped = NULL;
    for (guint i = 0; i < digests->len; i++) {
        struct store_cache_entry en = { 0 };
        g_strlcpy(en.digest, digests->pdata[i], sizeof(en.digest));
        if (!entry_in_use(c, &en, &mapped))   /* one gone already: evict finds nothing */
            evict(c, &en, NULL);
    }
    close(lock);
}

int cache_lock_snapshot(struct store_cache *c, const char *id, const struct store_options *o,
                        GError **error)
{
    g_autofree char *name = g_strdup_printf("snapshot-%s", id);
    g_autofree char *p = sub(c, "locks", name);
    return open_locked(p, LOCK_EX, o, error);
}

/* ---- getting a layer ---- */

/* The cached layer, pinned (a shared lock), or -1 when it is not there. */
static int pin_cached(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat a, b;
    if (flock(fd, LOCK_SH) != 0 || fstat(fd, &a) != 0 || stat(path, &b) != 0 ||
        a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
        close(fd);   /* evicted meanwhile */
        return -1;
    }
    return fd;
}

/* ---- what a layer was when it entered the cache ---- */

/* verified/<sha256>: the layer's digest, size, inode and modification time
 * right after its bytes were compared with the digest, as it entered
 * layers/ (a use changes none of these: links change the ctime only). */
static char *record_text(const char *digest, const struct stat *st)
{
    return g_strdup_printf("sha256 %s size %llu inode %llu mtime %lld.%09ld\n", digest,
                           (unsigned long long)st->st_size, (unsigned long long)st->st_ino,
                           (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

static bool write_record(struct store_cache *c, const char *digest, int fd, GError **error)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return fail_errno(error, errno, "stat", digest);
    g_autofree char *text = record_text(digest, &st);
    g_autofree char *p = sub(c, "verified", digest);
    g_autoptr(GError) e = NULL;
    if (!g_file_set_contents_full(p, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &e)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "%s", e->message);
        return false;
    }
    return true;
}

/* Whether the layer open at fd is the one recorded when it entered the
 * cache and holds size bytes: a hit then costs no read of it. A layer
 * cached without a record (by a vsnap that did not compare digests: it may
 * hold another store's bytes), changed or replaced since, or of another
 * size than asked for is no hit: it is imported again. */
static bool record_matches(struct store_cache *c, const char *digest, int fd, guint64 size)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || (guint64)st.st_size != size)
        return false;
    g_autofree char *p = sub(c, "verified", digest);
    g_autofree char *have = NULL;
    g_autofree char *want = record_text(digest, &st);
    return g_file_get_contents(p, &have, NULL, NULL) && strcmp(have, want) == 0;
}

/* The cached layer of digest and size, pinned, or -1 when it is not there
 * as it was recorded. */
static int pin_verified(struct store_cache *c, const char *digest, guint64 size, const char *path)
{
    int fd = pin_cached(path);
    if (fd >= 0 && !record_matches(c, digest, fd, size)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static int create_import_file(struct store_cache *c, const char *digest, guint64 size, char **tmp,
                              GError **error)
{
    *tmp = g_strdup_printf("%s/tmp/%s.XXXXXX", c->dir, digest);
    int fd = g_mkstemp_full(*tmp, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        fail_errno(error, errno, "create", *tmp);
        return -1;
    }
    flock(fd, LOCK_EX);
    /* Reserve the blocks now: a full cache fails here, not halfway through. */
    int r = posix_fallocate(fd, 0, (off_t)size);
    if (r == EOPNOTSUPP || r == EINVAL)
        r = ftruncate(fd, (off_t)size) == 0 ? 0 : errno;
    if (r != 0) {
        fail_errno(error, r, "allocate", *tmp);
        close(fd);
        unlink(*tmp);
        return -1;
    }
    return fd;
}

static bool import_layer(struct store_cache *c, const char *digest, guint64 size, cache_fill_fn fill,
                         void *ctx, const char *path, GError **error)
{
    int lock = lock_cache(c, error);
    if (lock < 0)
        return false;
    bool ok = make_room(c, size, NULL, error);
    close(lock);
    if (!ok)
        return false;
    g_autofree char *tmp = NULL;
    int fd = create_import_file(c, digest, size, &tmp, error);
    if (fd < 0)
        return false;
    ok = fill(ctx, fd, tmp, error);
    if (ok && fsync(fd) != 0)
        ok = fail_errno(error, errno, "fsync", tmp);
    if (ok && fchmod(fd, 0600) != 0)
        ok = fail_errno(error, errno, "chmod", tmp);
    if (ok) {
        lock = lock_cache(c, error);
        /* others may have added layers meanwhile */
        ok = lock >= 0 && make_room(c, size, NULL, error) && write_record(c, digest, fd, error);
        /* over a layer of that name not recorded: the new one is */
        if (ok && rename(tmp, path) != 0)
            ok = fail_errno(error, errno, "rename", tmp);
        if (ok) {
            g_autofree char *dir = g_path_get_dirname(path);
            int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dfd >= 0) {
                fsync(dfd);
                close(dfd);
            }
        }
        if (lock >= 0)
            close(lock);
    }
    if (!ok)
        unlink(tmp);
    close(fd);
    return ok;
}

bool cache_get_layer(struct store_cache *c, const char *digest, guint64 size, cache_fill_fn fill,
                     void *ctx, const struct store_options *o, char **out_path, int *pin_fd,
                     bool *hit, GError **error)
{
    g_autofree char *path = sub(c, "layers", digest);
    g_autofree char *lock_path = sub(c, "locks", digest);
    *pin_fd = pin_verified(c, digest, size, path);
    *hit = *pin_fd >= 0;
    if (!*hit) {
        int lock = open_locked(lock_path, LOCK_EX, o, error);
        if (lock < 0)
            return false;
        *pin_fd = pin_verified(c, digest, size, path);   /* imported by another process meanwhile */
        *hit = *pin_fd >= 0;
        bool ok = *hit || import_layer(c, digest, size, fill, ctx, path, error);
        if (ok && !*hit)
            *pin_fd = pin_verified(c, digest, size, path);
        close(lock);
        if (!ok)
            return false;
        if (*pin_fd < 0) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_IO, "layer %s left the cache at once", path);
            return false;
        }
    }
    touch_used(c, digest);
    *out_path = g_steal_pointer(&path);
    return true;
}
