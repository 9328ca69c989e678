/* store_options.cancel against the file:// transport: a fetch, an import
 * and an export stop at the flag (STORE_ERROR_CANCELLED), soon after it is
 * set, and an export stopped leaves no object and no temporary file. */
#include "store/object.h"
#include "store/store.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#define OBJECT_BYTES (16u << 20)
#define FRAME (64u << 10)

struct fixture {
    char *dir;        /* the store's directory, and the source file */
    char *url;
    char *src;
    int src_fd;
    gint cancel;
    struct store_options o;
    struct transport *t;
};

/* Bytes that do not compress to nothing, so the object has many frames. */
static void fill_source(int fd)
{
    g_autofree guint8 *buf = g_malloc(OBJECT_BYTES);
    guint32 x = 12345;
    for (gsize i = 0; i < OBJECT_BYTES; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (guint8)(x >> 24);
    }
    g_assert_cmpint(write(fd, buf, OBJECT_BYTES), ==, (gssize)OBJECT_BYTES);
}

static void setup(struct fixture *f, gconstpointer data)
{
    g_autoptr(GError) error = NULL;
    f->dir = g_dir_make_tmp("store-cancel-XXXXXX", &error);
    g_assert_no_error(error);
    f->url = g_strdup_printf("file://%s", f->dir);
    f->src = g_build_filename(f->dir, "source", NULL);
    f->src_fd = open(f->src, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    g_assert_cmpint(f->src_fd, >=, 0);
    fill_source(f->src_fd);
    store_options_init(&f->o);
    f->o.frame_size = FRAME;
    f->o.threads = 2;
    f->o.connections = 2;
    f->o.range_size = 4 * FRAME;
    f->o.cancel = &f->cancel;
    f->t = transport_open(f->url, &f->o, &error);
    g_assert_no_error(error);
}

static void teardown(struct fixture *f, gconstpointer data)
{
    transport_free(f->t);
    close(f->src_fd);
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", f->dir);
    g_assert_cmpint(system(cmd), ==, 0);
    g_free(f->src);
    g_free(f->url);
    g_free(f->dir);
}

static bool export_as(struct fixture *f, const char *name, struct object_info *info,
                      GError **error)
{
    struct progress pg;
    progress_begin(&pg, "push", OBJECT_BYTES, false);
    bool ok = object_export(f->t, name, f->src_fd, f->src, OBJECT_BYTES, &pg, info, error);
    progress_end(&pg);
    return ok;
}

/* store_options.on_progress: the first frame written sets the flag. */
static void cancel_at_first_frame(void *data, guint64 done, guint64 total)
{
    if (done)
        g_atomic_int_set((gint *)data, 1);
}

static bool import_into(struct fixture *f, const struct seekable_table *table, int fd,
                        bool cancel_midway, GError **error)
{
    struct progress pg;
    progress_begin(&pg, "pull", OBJECT_BYTES, false);
    if (cancel_midway)
        progress_watch(&pg, cancel_at_first_frame, &f->cancel);
    char digest[65];
    bool ok = object_import(f->t, "objects/x.zst", table, fd, "x", &pg, digest, error);
    progress_end(&pg);
    return ok;
}

static void export_object(struct fixture *f, struct object_info *info)
{
    g_autoptr(GError) error = NULL;
    g_assert_true(export_as(f, "objects/x.zst", info, &error));
    g_assert_no_error(error);
}

/* A consumer that sets the flag at its first bytes and counts what comes after. */
struct counting {
    gint *cancel;
    gint calls;
};

static bool counting_data(void *ctx, guint range, const guint8 *buf, gsize len, GError **error)
{
    struct counting *c = ctx;
    g_atomic_int_inc(&c->calls);
    g_atomic_int_set(c->cancel, 1);
    return true;
}

static guint64 counting_restart(void *ctx, guint range)
{
    g_assert_not_reached();
    return 0;
}

static void test_fetch(struct fixture *f, gconstpointer data)
{
    struct object_info info;
    export_object(f, &info);
    /* 16 ranges of 1 MiB, each read in 256 KiB chunks: 64 chunks without a cancel */
    struct fetch_range ranges[16];
    for (guint i = 0; i < G_N_ELEMENTS(ranges); i++)
        ranges[i] = (struct fetch_range){ i * (info.object_size / 16), (i + 1) * (info.object_size / 16) };
    struct counting c = { &f->cancel, 0 };
    struct fetch_consumer consumer = { counting_data, counting_restart, NULL, &c };
    g_autoptr(GError) error = NULL;
    g_assert_false(f->t->ops->fetch(f->t, "objects/x.zst", ranges, G_N_ELEMENTS(ranges), &consumer,
                                    &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CANCELLED);
    /* each reader stops before its next chunk: one chunk per connection at most */
    g_assert_cmpint(g_atomic_int_get(&c.calls), <=, (gint)f->o.connections);
}

struct later {
    gint *flag;
    guint delay_ms;
};

static gpointer cancel_later(gpointer data)
{
    struct later *l = data;
    g_usleep(l->delay_ms * 1000);
    g_atomic_int_set(l->flag, 1);
    return NULL;
}

static void test_import(struct fixture *f, gconstpointer data)
{
    struct object_info info;
    export_object(f, &info);
    struct seekable_table table;
    g_autoptr(GError) error = NULL;
    g_assert_true(object_fetch_table(f->t, "objects/x.zst", info.object_size, OBJECT_BYTES,
                                     info.frames, info.table_sha256, &table, &error));
    g_assert_no_error(error);
    g_autofree char *dest = g_build_filename(f->dir, "dest", NULL);
    int fd = open(dest, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    g_assert_cmpint(ftruncate(fd, OBJECT_BYTES), ==, 0);
    /* set before: nothing is written */
    g_atomic_int_set(&f->cancel, 1);
    g_assert_false(import_into(f, &table, fd, false, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CANCELLED);
    g_clear_error(&error);
    struct stat st;
    g_assert_cmpint(fstat(fd, &st), ==, 0);
    g_assert_cmpint(st.st_blocks, ==, 0);
    /* set while it runs (at its first frame): it ends, having written little
     * (the frames in flight are bounded) */
    g_atomic_int_set(&f->cancel, 0);
    f->o.threads = 1;
    g_assert_false(import_into(f, &table, fd, true, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CANCELLED);
    g_assert_cmpint(fstat(fd, &st), ==, 0);
    g_assert_cmpint(st.st_blocks * 512, <, OBJECT_BYTES / 2);
    seekable_table_clear(&table);
    close(fd);
}

static void test_export(struct fixture *f, gconstpointer data)
{
    struct later l = { &f->cancel, 5 };
    GThread *th = g_thread_new("cancel", cancel_later, &l);
    struct object_info info;
    g_autoptr(GError) error = NULL;
    f->o.threads = 1;
    f->o.level = 19;   /* slow: the flag comes while frames are compressed */
    bool ok = export_as(f, "objects/y.zst", &info, &error);
    g_thread_join(th);
    g_assert_false(ok);
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CANCELLED);
    guint64 size = 0;
    g_clear_error(&error);
    g_assert_true(f->t->ops->stat(f->t, "objects/y.zst", &size, &error));
    g_assert_cmpuint(size, ==, G_MAXUINT64);   /* no object */
    g_autofree char *objects = g_build_filename(f->dir, "objects", NULL);
    g_autoptr(GDir) d = g_dir_open(objects, 0, NULL);
    for (const char *n; d && (n = g_dir_read_name(d));)
        g_assert_false(g_str_has_prefix(n, "y.zst"));   /* no temporary file either */
}

static void test_digest(struct fixture *f, gconstpointer data)
{
    char digest[65];
    g_autoptr(GError) error = NULL;
    g_atomic_int_set(&f->cancel, 1);
    g_assert_false(object_digest(f->src_fd, f->src, OBJECT_BYTES, &f->o, digest, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CANCELLED);
    g_clear_error(&error);
    g_assert_true(object_digest(f->src_fd, f->src, OBJECT_BYTES, NULL, digest, &error));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add("/store/cancel/fetch", struct fixture, NULL, setup, test_fetch, teardown);
    g_test_add("/store/cancel/import", struct fixture, NULL, setup, test_import, teardown);
    g_test_add("/store/cancel/export", struct fixture, NULL, setup, test_export, teardown);
    g_test_add("/store/cancel/digest", struct fixture, NULL, setup, test_digest, teardown);
    return g_test_run();
}
