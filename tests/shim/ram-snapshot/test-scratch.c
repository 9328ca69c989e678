/* A live snapshot's scratch image: the last copy of a page wins, a full
 * layer written from it holds exactly RAM as of the last copy (and no page
 * never copied), a diff exactly its bitmap's pages; populated pages are
 * found without touching the others; in memory or in a directory. */
#include "helpers.h"

#include "ram-snapshot/dirty-bitmap.h"
#include "ram-snapshot/restore.h"
#include "ram-snapshot/scratch.h"

#include <string.h>

#define RAM_SIZE (64ull << 20)
#define NPAGES (RAM_SIZE / TEST_PAGE)

/* Copy everything populated, rewrite some pages (two of them newly
 * populated) and copy those again, change RAM once more without copying: the
 * layer is RAM as of the second copy. */
static void check_last_copy_wins(bool in_memory)
{
    g_autofree char *dir = test_tmpdir();
    int fd = -1;
    uint8_t *ram = test_ram_new(RAM_SIZE, &fd);
    test_fill(ram, 10, 100, 1);
    test_fill(ram, 5000, 50, 2);
    struct snap_ram r = { .host = ram, .size = RAM_SIZE, .fd = fd };
    g_autoptr(GError) error = NULL;
    struct snap_scratch *s = snap_scratch_new(in_memory ? NULL : dir, RAM_SIZE, &error);
    g_assert_no_error(error);
    g_autofree uint64_t *pass1 = snap_dirty_bitmap_new(RAM_SIZE);
    g_assert_true(snap_ram_populated(&r, pass1, &error));
    g_assert_cmpuint(snap_dirty_bitmap_count(pass1, RAM_SIZE), ==, 150);
    uint64_t copied = 0;
    g_assert_true(snap_scratch_copy(s, &r, pass1, &copied, &error));
    g_assert_cmpuint(copied, ==, 150);

    test_fill(ram, 20, 10, 3);     /* rewritten */
    test_fill(ram, 9000, 2, 4);    /* populated after pass 1 */
    g_autofree uint64_t *pass2 = test_bitmap_new(RAM_SIZE);
    test_bitmap_set(pass2, 20, 10);
    test_bitmap_set(pass2, 9000, 2);
    g_assert_true(snap_scratch_copy(s, &r, pass2, &copied, &error));
    g_assert_cmpuint(copied, ==, 12);
    g_autofree uint8_t *want = g_malloc(RAM_SIZE);
    memcpy(want, ram, RAM_SIZE);
    test_fill(ram, 30, 5, 5);      /* after the last copy: not in the snapshot */

    struct snap_ram image;
    g_assert_true(snap_scratch_ram(s, &image, &error));
    g_autofree char *path = g_build_filename(dir, "full", NULL);
    snap_id id;
    snap_id_random(&id);
    struct snap_save_stats st;
    g_assert_true(snap_save_full(path, &image, &id, &st, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(st.data_pages, ==, 152);
    g_autoptr(snap_chain) c = test_open_chain(&path, 1);
    uint8_t *back = test_ram_new(RAM_SIZE, NULL);
    g_assert_true(snap_restore_copy(c, back, RAM_SIZE, &error));
    test_assert_ram_equal(back, want, RAM_SIZE, "the full layer from the scratch image");

    /* A diff from the same image: exactly the second pass's pages. */
    g_autofree char *diff = g_build_filename(dir, "diff", NULL);
    snap_id did;
    snap_id_random(&did);
    g_assert_true(snap_save_diff(diff, &image, pass2, &did, &id, &st, &error));
    g_assert_cmpuint(st.data_pages, ==, 12);
    snap_scratch_free(s);
    test_ram_free(back, RAM_SIZE, -1);
    test_ram_free(ram, RAM_SIZE, fd);
    test_rmtree(dir);
}

static void test_in_memory(void)
{
    check_last_copy_wins(true);
}

static void test_in_directory(void)
{
    check_last_copy_wins(false);
}

/* Anonymous RAM: populated pages by mincore, the rest left alone. */
static void test_populated_anonymous(void)
{
    uint8_t *ram = test_ram_new(RAM_SIZE, NULL);
    test_fill(ram, 7, 3, 1);
    struct snap_ram r = { .host = ram, .size = RAM_SIZE, .fd = -1 };
    g_autofree uint64_t *b = snap_dirty_bitmap_new(RAM_SIZE);
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_ram_populated(&r, b, &error));
    g_assert_cmpuint(snap_dirty_bitmap_count(b, RAM_SIZE), ==, 3);
    g_assert_true(snap_dirty_bitmap_test(b, 7) && snap_dirty_bitmap_test(b, 9));
    g_assert_cmpuint(test_resident_pages(ram, RAM_SIZE), ==, 3);
    test_ram_free(ram, RAM_SIZE, -1);
}

/* A directory that cannot hold it: a clear error naming it. */
static void test_bad_directory(void)
{
    g_autoptr(GError) error = NULL;
    g_assert_null(snap_scratch_new("/nonexistent-vsnap-dir", RAM_SIZE, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_IO);
    g_assert_nonnull(strstr(error->message, "/nonexistent-vsnap-dir"));
}

/* A range copies its pages only: a run across either end is cut there, and
 * steps that cover RAM copy what one whole copy does. */
static void test_copy_range(void)
{
    int fd = -1;
    uint8_t *ram = test_ram_new(RAM_SIZE, &fd);
    test_fill(ram, 4000, 200, 6);
    struct snap_ram r = { .host = ram, .size = RAM_SIZE, .fd = fd };
    g_autoptr(GError) error = NULL;
    struct snap_scratch *s = snap_scratch_new(NULL, RAM_SIZE, &error);
    g_assert_no_error(error);
    g_autofree uint64_t *pages = test_bitmap_new(RAM_SIZE);
    test_bitmap_set(pages, 4000, 200);
    uint64_t copied = 0;
    g_assert_true(snap_scratch_copy_range(s, &r, pages, 4096, 4150, &copied, &error));
    g_assert_cmpuint(copied, ==, 54);
    struct snap_ram image;
    g_assert_true(snap_scratch_ram(s, &image, &error));
    g_assert_true(memcmp(image.host + 4096 * TEST_PAGE, ram + 4096 * TEST_PAGE, 54 * TEST_PAGE) == 0);
    static const uint8_t zero[TEST_PAGE];
    g_assert_true(memcmp(image.host + 4095 * TEST_PAGE, zero, TEST_PAGE) == 0);
    g_assert_true(memcmp(image.host + 4150 * TEST_PAGE, zero, TEST_PAGE) == 0);
    uint64_t total = 0;
    for (uint64_t first = 0; first < NPAGES; first += 4096) {
        g_assert_true(snap_scratch_copy_range(s, &r, pages, first, first + 4096, &copied, &error));
        total += copied;
    }
    g_assert_cmpuint(total, ==, 200);
    g_assert_true(memcmp(image.host + 4000 * TEST_PAGE, ram + 4000 * TEST_PAGE, 200 * TEST_PAGE) == 0);
    snap_scratch_free(s);
    test_ram_free(ram, RAM_SIZE, fd);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/snapshot/scratch/last-copy-wins-memory", test_in_memory);
    g_test_add_func("/snapshot/scratch/last-copy-wins-directory", test_in_directory);
    g_test_add_func("/snapshot/scratch/populated-anonymous", test_populated_anonymous);
    g_test_add_func("/snapshot/scratch/bad-directory", test_bad_directory);
    g_test_add_func("/snapshot/scratch/copy-range", test_copy_range);
    return g_test_run();
}
