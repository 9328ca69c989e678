/* Dirty bitmaps in RAM-offset space and restore mode names. */
#include "ram-snapshot/dirty-bitmap.h"
#include "ram-snapshot/restore-mode.h"
#include "snapshot/layer.h"

#include <string.h>

#define RAM (4ull << 30)

static void test_or_slot(void)
{
    g_autofree uint64_t *bm = snap_dirty_bitmap_new(RAM);
    /* slot 1: RAM [0, 3 GiB): pages 0, 63, 64 and its last page */
    const uint64_t low_pages = (3ull << 30) / 4096;
    g_autofree uint64_t *low = g_new0(uint64_t, low_pages / 64);
    low[0] = 1 | 1ull << 63;
    low[1] = 1;
    low[low_pages / 64 - 1] = 1ull << 63;
    snap_dirty_bitmap_or_slot(bm, 0, low, low_pages);
    /* slot 2 at an offset that is not a multiple of 64 pages: 70 pages, bits
     * 0, 5, 69 set and a stray bit past the slot's end that must be ignored */
    uint64_t slot2[2] = { 1 | 1ull << 5, 1ull << 5 | 1ull << 7 };
    const uint64_t at = (3ull << 30) + 10 * 4096;
    snap_dirty_bitmap_or_slot(bm, at, slot2, 70);
    const uint64_t base = at / 4096;
    uint64_t want[] = { 0, 63, 64, low_pages - 1, base, base + 5, base + 69 };
    for (unsigned i = 0; i < G_N_ELEMENTS(want); i++)
        g_assert_true(snap_dirty_bitmap_test(bm, want[i]));
    g_assert_false(snap_dirty_bitmap_test(bm, base + 71));
    g_assert_cmpuint(snap_dirty_bitmap_count(bm, RAM), ==, G_N_ELEMENTS(want));
}

static void test_mark(void)
{
    g_autofree uint64_t *bm = snap_dirty_bitmap_new(RAM);
    snap_dirty_bitmap_mark(bm, 4095, 2);      /* straddles pages 0 and 1 */
    snap_dirty_bitmap_mark(bm, 100 * 4096, 4096);
    snap_dirty_bitmap_mark(bm, 200 * 4096, 0); /* nothing */
    g_assert_true(snap_dirty_bitmap_test(bm, 0));
    g_assert_true(snap_dirty_bitmap_test(bm, 1));
    g_assert_true(snap_dirty_bitmap_test(bm, 100));
    g_assert_cmpuint(snap_dirty_bitmap_count(bm, RAM), ==, 3);
}

static void test_restore_mode(void)
{
    enum snap_restore_mode m;
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_restore_mode_parse(NULL, &m, &error));
    g_assert_cmpint(m, ==, SNAP_RESTORE_COPY);
    g_assert_true(snap_restore_mode_parse("ondemand", &m, &error));
    g_assert_cmpint(m, ==, SNAP_RESTORE_ONDEMAND);
    g_assert_true(snap_restore_mode_parse("merge", &m, &error));
    g_assert_cmpstr(snap_restore_mode_name(m), ==, "merge");
    g_assert_false(snap_restore_mode_parse("lazy", &m, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "lazy"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/snapshot/dirty/or-slot", test_or_slot);
    g_test_add_func("/snapshot/dirty/mark", test_mark);
    g_test_add_func("/snapshot/restore-mode", test_restore_mode);
    return g_test_run();
}
