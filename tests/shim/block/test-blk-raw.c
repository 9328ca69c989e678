/* The raw image backend (block/blk-raw.c) on files of its own: scattered
 * transfers, reads past a file that shrank, O_DIRECT with buffers it does not
 * allow (the bounce path), discard and write zeroes, and its refusals. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "block/blk-backend.h"

static char *dir;

static char *make_image(const char *name, size_t size, uint8_t seed)
{
    char *path = g_build_filename(dir, name, NULL);
    uint8_t *data = g_malloc(size);
    for (size_t i = 0; i < size; i++)
        data[i] = (uint8_t)(seed + i * 13 + i / 4096);
    g_assert_true(g_file_set_contents(path, (const char *)data, (gssize)size, NULL));
    g_free(data);
    return path;
}

static void read_file_at(const char *path, uint64_t offset, void *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, buf, len, (off_t)offset), ==, (ssize_t)len);
    close(fd);
}

static struct blk_backend *open_raw(const char *path, bool readonly, bool direct, bool sparse)
{
    struct blk_raw_options opts = { .path = path, .readonly = readonly, .direct = direct, .sparse = sparse };
    g_autoptr(GError) error = NULL;
    struct blk_backend *b = blk_raw_open(&opts, &error);
    g_assert_no_error(error);
    return b;
}

static void test_transfers(void)
{
    g_autofree char *path = make_image("plain.img", (1 << 20) + 100, 1);
    struct blk_backend *b = open_raw(path, false, false, true);
    g_assert_cmpuint(b->capacity, ==, 1 << 20); /* the partial sector is not the guest's */
    g_assert_cmpuint(b->block_size, ==, 512);
    g_assert_false(b->readonly);
    g_assert_true(b->can_discard);

    uint8_t a[700], c[1348], want[2048], got[2048];
    memset(a, 0xa1, sizeof a);
    memset(c, 0xc3, sizeof c);
    struct iovec iov[2] = { { a, sizeof a }, { c, sizeof c } };
    g_assert_cmpint(blk_backend_writev(b, 4096, iov, 2), ==, 0);
    read_file_at(path, 4096, got, sizeof got);
    memcpy(want, a, sizeof a);
    memcpy(want + sizeof a, c, sizeof c);
    g_assert_cmpmem(got, sizeof got, want, sizeof want);
    memset(a, 0, sizeof a);
    memset(c, 0, sizeof c);
    g_assert_cmpint(blk_backend_readv(b, 4096, iov, 2), ==, 0);
    g_assert_cmpmem(a, sizeof a, want, sizeof a);
    g_assert_cmpmem(c, sizeof c, want + sizeof a, sizeof c);
    g_assert_cmpint(blk_backend_flush(b), ==, 0);

    /* The file shrank under the disk: what is gone reads as zeros. */
    g_assert_cmpint(truncate(path, 4096 + 512), ==, 0);
    memset(got, 0xff, sizeof got);
    struct iovec one = { got, sizeof got };
    g_assert_cmpint(blk_backend_readv(b, 4096, &one, 1), ==, 0);
    g_assert_cmpmem(got, 512, want, 512);
    for (size_t i = 512; i < sizeof got; i++)
        g_assert_cmpuint(got[i], ==, 0);
    blk_backend_close(b);
}

static uint64_t allocated(const char *path)
{
    struct stat st;
    g_assert_cmpint(stat(path, &st), ==, 0);
    return (uint64_t)st.st_blocks * 512;
}

static void test_discard_and_zeroes(void)
{
    g_autofree char *path = make_image("sparse.img", 4 << 20, 2);
    struct blk_backend *b = open_raw(path, false, false, true);
    uint64_t before = allocated(path);
    uint8_t got[65536];
    g_assert_cmpint(blk_backend_discard(b, 1 << 20, 1 << 20), ==, 0);
    g_assert_cmpuint(allocated(path), <, before);
    read_file_at(path, 1 << 20, got, sizeof got);
    for (size_t i = 0; i < sizeof got; i++)
        g_assert_cmpuint(got[i], ==, 0);
    g_assert_cmpint(blk_backend_write_zeroes(b, 3 << 20, 65536, false), ==, 0);
    read_file_at(path, 3 << 20, got, sizeof got);
    for (size_t i = 0; i < sizeof got; i++)
        g_assert_cmpuint(got[i], ==, 0);
    read_file_at(path, (3 << 20) + 65536, got, 512);
    g_assert_cmpuint(got[1], !=, 0); /* only the range */
    blk_backend_close(b);

    g_autofree char *full = make_image("full.img", 1 << 20, 3);
    b = open_raw(full, false, false, false);
    g_assert_false(b->can_discard); /* sparse=false: no DISCARD offered */
    before = allocated(full);
    g_assert_cmpint(blk_backend_write_zeroes(b, 0, 1 << 20, true), ==, 0);
    g_assert_cmpuint(allocated(full), ==, before); /* no unmapping on a non-sparse disk */
    read_file_at(full, 0, got, sizeof got);
    for (size_t i = 0; i < sizeof got; i++)
        g_assert_cmpuint(got[i], ==, 0);
    blk_backend_close(b);
}

/* O_DIRECT with buffers at odd addresses and odd cuts goes through the bounce
 * buffer and gives the same bytes as a plain transfer would. */
static void test_direct(void)
{
    g_autofree char *path = make_image("direct.img", 2 << 20, 4);
    struct blk_backend *b = open_raw(path, false, true, true);
    g_assert_cmpuint(b->block_size % 512, ==, 0);
    uint8_t *raw = g_malloc(3 << 20);
    uint8_t *odd = raw + 1; /* never aligned */
    for (size_t i = 0; i < (1 << 20) + 1536; i++)
        odd[i] = (uint8_t)(i * 31);
    struct iovec iov[2] = { { odd, 1536 }, { odd + 1536, 1 << 20 } };
    uint64_t offset = b->block_size * 3;
    g_assert_cmpint(blk_backend_writev(b, offset, iov, 2), ==, 0);
    uint8_t *check = g_malloc((1 << 20) + 1536);
    read_file_at(path, offset, check, (1 << 20) + 1536);
    g_assert_cmpmem(check, (1 << 20) + 1536, odd, (1 << 20) + 1536);
    /* The bytes around the written range are untouched. */
    uint8_t edge[512];
    read_file_at(path, offset - 512, edge, 512);
    g_assert_cmpuint(edge[0], ==, (uint8_t)(4 + (offset - 512) * 13 + (offset - 512) / 4096));
    memset(odd, 0, (1 << 20) + 1536);
    g_assert_cmpint(blk_backend_readv(b, offset, iov, 2), ==, 0);
    g_assert_cmpmem(odd, (1 << 20) + 1536, check, (1 << 20) + 1536);
    g_free(check);
    g_free(raw);
    blk_backend_close(b);
}

static void test_refusals(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *missing = g_build_filename(dir, "missing.img", NULL);
    struct blk_raw_options opts = { .path = missing };
    g_assert_null(blk_raw_open(&opts, &error));
    g_assert_nonnull(strstr(error->message, missing));
    g_assert_nonnull(strstr(error->message, "No such file"));
    g_clear_error(&error);
    opts.path = dir;
    opts.readonly = true;
    g_assert_null(blk_raw_open(&opts, &error));
    g_assert_nonnull(strstr(error->message, "not a regular file or a block device"));
    g_clear_error(&error);
    g_autofree char *tiny = make_image("tiny.img", 100, 5);
    opts.path = tiny;
    g_assert_null(blk_raw_open(&opts, &error));
    g_assert_nonnull(strstr(error->message, "less than one"));
    g_clear_error(&error);

    g_autofree char *ro = make_image("ro.img", 8192, 6);
    struct blk_backend *b = open_raw(ro, true, false, true);
    g_assert_true(b->readonly);
    g_assert_false(b->can_discard);
    g_assert_cmpint(blk_backend_flush(b), ==, 0);
    blk_backend_close(b);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    dir = g_dir_make_tmp("vsnap-blk-raw-XXXXXX", NULL);
    g_test_add_func("/blk-raw/transfers", test_transfers);
    g_test_add_func("/blk-raw/discard-and-zeroes", test_discard_and_zeroes);
    g_test_add_func("/blk-raw/direct", test_direct);
    g_test_add_func("/blk-raw/refusals", test_refusals);
    int rc = g_test_run();
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    if (system(cmd) != 0)
        g_warning("could not remove %s", dir);
    g_free(dir);
    return rc;
}
