/* object_import against the file:// transport: frames finished out of
 * order by several workers, from many ranges on several connections, come
 * out as the file they were and digested in order (the digest is the
 * SHA-256 of the source), with a hashing window smaller than the object and
 * ranges held back by the import's budget; a damaged frame in the middle
 * ends it with that frame's error, not a hang. */
#include "store/object.h"
#include "store/store.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* larger than the hashing window (16 MiB at least), so frames wait for it */
#define OBJECT_BYTES (40u << 20)

struct fixture {
    char *dir, *url, *src, *dst;
    int src_fd;
    char digest[65];
    struct store_options o;
    struct transport *t;
    struct object_info info;
};

/* Random bytes, runs of zeros (frames the import does not write) and a
 * repeating pattern, so frames differ in size and content. */
static void fill_source(struct fixture *f)
{
    g_autofree guint8 *buf = g_malloc(OBJECT_BYTES);
    guint32 x = 4242;
    for (gsize i = 0; i < OBJECT_BYTES; i++) {
        x = x * 1103515245u + 12345u;
        gsize mib = i >> 20;
        buf[i] = mib % 5 == 1 ? 0 : mib % 5 == 3 ? (guint8)(i % 251) : (guint8)(x >> 24);
    }
    g_assert_cmpint(write(f->src_fd, buf, OBJECT_BYTES), ==, (gssize)OBJECT_BYTES);
    g_autofree char *sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, buf, OBJECT_BYTES);
    g_strlcpy(f->digest, sum, sizeof(f->digest));
}

static void setup(struct fixture *f, gconstpointer data)
{
    g_autoptr(GError) error = NULL;
    f->dir = g_dir_make_tmp("store-import-XXXXXX", &error);
    g_assert_no_error(error);
    f->url = g_strdup_printf("file://%s", f->dir);
    f->src = g_build_filename(f->dir, "source", NULL);
    f->dst = g_build_filename(f->dir, "copy", NULL);
    f->src_fd = open(f->src, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    g_assert_cmpint(f->src_fd, >=, 0);
    fill_source(f);
    store_options_init(&f->o);
    f->o.frame_size = 256u << 10;
    f->o.level = 1;
    f->o.threads = 3;
    f->t = transport_open(f->url, &f->o, &error);
    g_assert_no_error(error);
    struct progress pg;
    progress_begin(&pg, "push", OBJECT_BYTES, false);
    g_assert_true(object_export(f->t, "objects/x.zst", f->src_fd, f->src, OBJECT_BYTES, &pg, &f->info,
                                &error));
    progress_end(&pg);
    g_assert_no_error(error);
}

static void teardown(struct fixture *f, gconstpointer data)
{
    transport_free(f->t);
    close(f->src_fd);
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", f->dir);
    g_assert_cmpint(system(cmd), ==, 0);
    g_free(f->src);
    g_free(f->dst);
    g_free(f->url);
    g_free(f->dir);
}

static bool import(struct fixture *f, guint connections, guint64 range_size, char digest[65],
                   GError **error)
{
    f->o.connections = connections;
    f->o.range_size = range_size;
    struct seekable_table table;
    if (!object_fetch_table(f->t, "objects/x.zst", f->info.object_size, OBJECT_BYTES, f->info.frames,
                            f->info.table_sha256, &table, error))
        return false;
    unlink(f->dst);
    int fd = open(f->dst, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, OBJECT_BYTES), ==, 0);
    struct progress pg;
    progress_begin(&pg, "pull", OBJECT_BYTES, false);
    bool ok = object_import(f->t, "objects/x.zst", &table, fd, f->dst, &pg, digest, error);
    progress_end(&pg);
    seekable_table_clear(&table);
    close(fd);
    return ok;
}

static void check_copy(struct fixture *f)
{
    g_autofree char *a = NULL, *b = NULL;
    gsize la, lb;
    g_assert_true(g_file_get_contents(f->src, &a, &la, NULL));
    g_assert_true(g_file_get_contents(f->dst, &b, &lb, NULL));
    g_assert_cmpmem(a, la, b, lb);
}

/* Ranges of one frame on 4 connections (the budget holds 8 of them), of
 * three frames, and one range for the whole object. */
static void test_out_of_order(struct fixture *f, gconstpointer data)
{
    static const struct {
        guint connections;
        guint64 range_size;
    } runs[] = { { 4, 1 }, { 4, 3 * (256u << 10) }, { 2, 1ull << 40 } };
    for (guint i = 0; i < G_N_ELEMENTS(runs); i++) {
        g_autoptr(GError) error = NULL;
        char digest[65] = "";
        g_assert_true(import(f, runs[i].connections, runs[i].range_size, digest, &error));
        g_assert_no_error(error);
        g_assert_cmpstr(digest, ==, f->digest);
        check_copy(f);
    }
}

/* A byte flipped in a frame halfway: the import ends with that frame's
 * error (the hashing stage and the workers stop; nothing waits forever). */
static void test_damaged_frame(struct fixture *f, gconstpointer data)
{
    struct seekable_table table;
    g_autoptr(GError) error = NULL;
    g_assert_true(object_fetch_table(f->t, "objects/x.zst", f->info.object_size, OBJECT_BYTES,
                                     f->info.frames, f->info.table_sha256, &table, &error));
    const struct seekable_frame *mid = &table.frames[table.nframes / 2];
    g_autofree char *obj = g_build_filename(f->dir, "objects", "x.zst", NULL);
    int fd = open(obj, O_RDWR | O_CLOEXEC);
    guint8 b;
    g_assert_cmpint(pread(fd, &b, 1, mid->offset + mid->size / 2), ==, 1);
    b ^= 0x10;
    g_assert_cmpint(pwrite(fd, &b, 1, mid->offset + mid->size / 2), ==, 1);
    close(fd);
    g_autofree char *frame = g_strdup_printf("frame %u ", table.nframes / 2);
    seekable_table_clear(&table);
    char digest[65];
    gint64 t0 = g_get_monotonic_time();
    g_assert_false(import(f, 4, 1, digest, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
    g_assert_nonnull(strstr(error->message, frame));
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 30 * G_USEC_PER_SEC);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add("/store/import/out-of-order", struct fixture, NULL, setup, test_out_of_order, teardown);
    g_test_add("/store/import/damaged-frame", struct fixture, NULL, setup, test_damaged_frame, teardown);
    return g_test_run();
}
