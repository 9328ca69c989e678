/* Restores by copy and merge of every prefix of a chain, a 64-layer chain in
 * all three modes, and compaction (library and tool) checked by restoring. */
#include "helpers.h"

#include "ram-snapshot/restore.h"
#include "ram-snapshot/uffd.h"
#include "snapshot/compact.h"

#include <string.h>

#define RAM (64ull << 20)

static void check_copy(char *const *paths, unsigned n, const uint8_t *want, uint64_t size)
{
    g_autoptr(snap_chain) c = test_open_chain(paths, n);
    g_autoptr(GError) error = NULL;
    uint8_t *ram = test_ram_new(size, NULL);
    g_assert_true(snap_restore_copy(c, ram, size, &error));
    g_assert_no_error(error);
    test_assert_ram_equal(ram, want, size, "copy");
    test_ram_free(ram, size, -1);
}

static void check_merge(char *const *paths, unsigned n, const uint8_t *want, uint64_t size)
{
    g_autoptr(snap_chain) c = test_open_chain(paths, n);
    g_autoptr(GError) error = NULL;
    struct snap_merged_ram m;
    g_assert_true(snap_restore_merge(c, NULL, &m, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(m.size, ==, size);
    g_assert_cmpint(m.fd, >=, 0);
    test_assert_ram_equal(m.host, want, size, "merge");
    snap_merged_ram_release(&m);
}

static void check_uffd(char *const *paths, unsigned n, const uint8_t *want, uint64_t size,
                       uint64_t block)
{
    g_autoptr(snap_chain) c = test_open_chain(paths, n);
    g_autoptr(GError) error = NULL;
    uint8_t *ram = test_ram_new(size, NULL);
    struct snap_uffd_config cfg = { .chain = c, .host = ram, .size = size, .block_size = block };
    struct snap_uffd *u = snap_uffd_start(&cfg, &error);
    g_assert_no_error(error);
    test_assert_ram_equal(ram, want, size, "ondemand");
    snap_uffd_stop(u);
    test_ram_free(ram, size, -1);
}

static void test_copy_each_depth(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    for (unsigned n = 1; n <= 3; n++)
        check_copy(s.paths, n, s.expected[n - 1], RAM);
    test_scenario_free(&s);
}

static void test_merge_each_depth(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, true); /* memfd RAM: the SEEK_DATA path of the writer */
    for (unsigned n = 1; n <= 3; n++)
        check_merge(s.paths, n, s.expected[n - 1], RAM);
    test_scenario_free(&s);
}

static void test_copy_leaves_zero_ram_untouched(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    g_autoptr(snap_chain) c = test_open_chain(s.paths, 3);
    g_autoptr(GError) error = NULL;
    uint8_t *ram = test_ram_new(RAM, NULL);
    g_assert_true(snap_restore_copy(c, ram, RAM, &error));
    /* stored pages only: 2048 + 100 + 1 + 500 + 4 (+ overlaps), far below 16384 */
    g_assert_cmpuint(test_resident_pages(ram, RAM), <, 3000);
    test_ram_free(ram, RAM, -1);
    test_scenario_free(&s);
}

#define LONG_RAM (16ull << 20)
#define LONG_LAYERS 64

/* base + 63 diffs; each diff writes a few pages, some over earlier diffs, and
 * zeroes one page written two diffs before. */
struct long_chain {
    char *dir;
    char *paths[LONG_LAYERS];
    snap_id ids[LONG_LAYERS];
    uint8_t *expected;
};

static void build_long_chain(struct long_chain *lc)
{
    lc->dir = test_tmpdir();
    uint8_t *ram = test_ram_new(LONG_RAM, NULL);
    struct snap_ram r = { .host = ram, .size = LONG_RAM, .fd = -1 };
    g_autofree uint64_t *dirty = test_bitmap_new(LONG_RAM);
    g_autoptr(GError) error = NULL;
    test_fill(ram, 0, 256, 1000);
    for (unsigned i = 0; i < LONG_LAYERS; i++) {
        lc->paths[i] = g_strdup_printf("%s/l%02u", lc->dir, i);
        snap_id_random(&lc->ids[i]);
        if (i == 0) {
            g_assert_true(snap_save_full(lc->paths[0], &r, &lc->ids[0], NULL, &error));
        } else {
            g_assert_true(snap_save_diff(lc->paths[i], &r, dirty, &lc->ids[i], &lc->ids[i - 1], NULL,
                                         &error));
            memset(dirty, 0, (LONG_RAM / TEST_PAGE + 63) / 64 * 8);
        }
        g_assert_no_error(error);
        uint64_t first = (i * 37) % 3800;
        test_fill(ram, first, 7 + i % 5, 2000 + i);
        test_bitmap_set(dirty, first, 7 + i % 5);
        if (i >= 2) {
            uint64_t z = ((i - 2) * 37) % 3800 + 1;
            memset(ram + z * TEST_PAGE, 0, TEST_PAGE);
            test_bitmap_set(dirty, z, 1);
        }
    }
    /* the last diff was saved before the last writes: expected is its state */
    test_ram_free(ram, LONG_RAM, -1);
    g_autoptr(snap_chain) c = test_open_chain(lc->paths, LONG_LAYERS);
    lc->expected = g_malloc0(LONG_RAM);
    g_assert_true(snap_restore_copy(c, lc->expected, LONG_RAM, &error));
}

static void free_long_chain(struct long_chain *lc)
{
    test_rmtree(lc->dir);
    for (unsigned i = 0; i < LONG_LAYERS; i++)
        g_free(lc->paths[i]);
    g_free(lc->expected);
    g_free(lc->dir);
}

/* The expected image of the long chain must not come from the code under
 * test alone: rebuild it by replaying the writes, independently. */
static void replay_long_chain(uint8_t *img)
{
    test_fill(img, 0, 256, 1000);
    for (unsigned i = 0; i + 1 < LONG_LAYERS; i++) {
        uint64_t first = (i * 37) % 3800;
        test_fill(img, first, 7 + i % 5, 2000 + i);
        if (i >= 2)
            memset(img + (((i - 2) * 37) % 3800 + 1) * TEST_PAGE, 0, TEST_PAGE);
    }
}

static unsigned open_fds(void)
{
    g_autoptr(GDir) d = g_dir_open("/proc/self/fd", 0, NULL);
    unsigned n = 0;
    while (g_dir_read_name(d))
        n++;
    return n;
}

static void test_long_chain(void)
{
    struct long_chain lc;
    build_long_chain(&lc);
    unsigned fds = open_fds();
    g_autoptr(snap_chain) held = test_open_chain(lc.paths, LONG_LAYERS);
    g_assert_cmpuint(open_fds(), ==, fds); /* layers hold mappings, not descriptors */
    g_autofree uint8_t *replayed = g_malloc0(LONG_RAM);
    replay_long_chain(replayed);
    test_assert_ram_equal(lc.expected, replayed, LONG_RAM, "64-layer copy");
    check_merge(lc.paths, LONG_LAYERS, replayed, LONG_RAM);
    check_uffd(lc.paths, LONG_LAYERS, replayed, LONG_RAM, 64 << 10);
    free_long_chain(&lc);
}

static void test_compact_library(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    g_autofree char *out = g_build_filename(s.dir, "compacted", NULL);
    g_autoptr(GError) error = NULL;
    {
        g_autoptr(snap_chain) c = test_open_chain(s.paths, 3);
        g_assert_true(snap_compact_chain(c, out, NULL, &error));
        g_assert_no_error(error);
    }
    g_autoptr(snap_chain) c = test_open_chain(&out, 1);
    g_assert_true(snap_layer_is_full(c->layers[0]));
    g_assert_true(snap_id_equal(&c->layers[0]->hdr.id, &s.ids[2])); /* keeps the top's id */
    check_copy(&out, 1, s.expected[2], RAM);
    test_scenario_free(&s);
}

static void test_compact_tool(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    const char *tool = g_getenv("VSNAP_COMPACT");
    g_assert_nonnull(tool);
    g_autofree char *out = g_build_filename(s.dir, "compacted", NULL);
    g_autofree char *cmd = g_strdup_printf("%s -o %s %s %s %s", tool, out, s.paths[0], s.paths[1],
                                           s.paths[2]);
    int status = -1;
    g_autofree char *serr = NULL;
    g_assert_true(g_spawn_command_line_sync(cmd, NULL, &serr, &status, NULL));
    g_assert_cmpint(status, ==, 0);
    check_copy(&out, 1, s.expected[2], RAM);

    /* a broken chain: non-zero exit, message naming the layer, no output */
    g_autofree char *out2 = g_build_filename(s.dir, "compacted2", NULL);
    g_autofree char *bad = g_strdup_printf("%s -o %s %s %s", tool, out2, s.paths[0], s.paths[2]);
    g_clear_pointer(&serr, g_free);
    g_assert_true(g_spawn_command_line_sync(bad, NULL, &serr, &status, NULL));
    g_assert_cmpint(status, !=, 0);
    g_assert_nonnull(strstr(serr, s.paths[2]));
    g_assert_false(g_file_test(out2, G_FILE_TEST_EXISTS));
    test_scenario_free(&s);
}

static int run_tool(const char *args, char **out, char **err)
{
    g_autofree char *cmd = g_strdup_printf("%s %s", g_getenv("VSNAP_COMPACT"), args);
    int status = -1;
    g_assert_true(g_spawn_command_line_sync(cmd, out, err, &status, NULL));
    return status;
}

static void test_tool_fold_and_info(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    g_autofree char *args = g_strdup_printf("--fold %s %s", s.paths[1], s.paths[2]);
    g_assert_cmpint(run_tool(args, NULL, NULL), ==, 0);
    char *rest[] = { s.paths[0], s.paths[2] };
    check_copy(rest, 2, s.expected[2], RAM);

    g_autofree char *info_args = g_strdup_printf("--info %s %s", s.paths[0], s.paths[2]);
    g_autofree char *out = NULL, *err = NULL;
    g_assert_cmpint(run_tool(info_args, &out, &err), ==, 0);
    char id[37];
    snap_id_to_string(&s.ids[2], id);
    g_assert_nonnull(strstr(out, id));
    g_assert_nonnull(strstr(out, "full layer"));
    g_assert_nonnull(strstr(out, "diff layer"));

    /* --info reads all data: a flipped data byte is reported */
    test_flip_byte(s.paths[0], SNAP_LAYER_DATA_OFFSET + 10);
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    g_assert_cmpint(run_tool(info_args, &out, &err), !=, 0);
    g_assert_nonnull(strstr(err, "checksum"));
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    g_assert_cmpint(run_tool("--fold onlyone", &out, &err), !=, 0);
    g_assert_nonnull(strstr(err, "usage"));
    test_scenario_free(&s);
}

static void test_fold(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    g_autoptr(GError) error = NULL;
    /* inner diff d1 into d2: the chain becomes [base, d2'] */
    g_assert_true(snap_compact_fold(s.paths[1], s.paths[2], &error));
    g_assert_no_error(error);
    char *without_d1[] = { s.paths[0], s.paths[2] };
    g_autoptr(snap_chain) c = test_open_chain(without_d1, 2);
    g_assert_true(snap_id_equal(&c->layers[1]->hdr.id, &s.ids[2]));
    g_assert_true(snap_id_equal(&c->layers[1]->hdr.parent_id, &s.ids[0]));
    check_copy(without_d1, 2, s.expected[2], RAM);
    /* base into d2': d2 becomes a full layer that keeps its id */
    g_assert_true(snap_compact_fold(s.paths[0], s.paths[2], &error));
    g_assert_no_error(error);
    check_copy(&s.paths[2], 1, s.expected[2], RAM);
    /* wrong pair: refused, child untouched */
    uint64_t before = test_file_size(s.paths[2]);
    g_assert_false(snap_compact_fold(s.paths[1], s.paths[2], &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN);
    g_assert_cmpuint(test_file_size(s.paths[2]), ==, before);
    test_scenario_free(&s);
}

static void test_fold_in_long_chain(void)
{
    struct long_chain lc;
    build_long_chain(&lc);
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_compact_fold(lc.paths[30], lc.paths[31], &error));
    g_assert_no_error(error);
    char *rest[LONG_LAYERS - 1];
    for (unsigned i = 0, j = 0; i < LONG_LAYERS; i++)
        if (i != 30)
            rest[j++] = lc.paths[i];
    check_copy(rest, LONG_LAYERS - 1, lc.expected, LONG_RAM);
    free_long_chain(&lc);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/snapshot/restore/copy", test_copy_each_depth);
    g_test_add_func("/snapshot/restore/merge", test_merge_each_depth);
    g_test_add_func("/snapshot/restore/copy-sparse", test_copy_leaves_zero_ram_untouched);
    g_test_add_func("/snapshot/restore/64-layers", test_long_chain);
    g_test_add_func("/snapshot/compact/library", test_compact_library);
    g_test_add_func("/snapshot/compact/tool", test_compact_tool);
    g_test_add_func("/snapshot/compact/fold", test_fold);
    g_test_add_func("/snapshot/compact/tool-fold-info", test_tool_fold_and_info);
    g_test_add_func("/snapshot/compact/fold-64", test_fold_in_long_chain);
    return g_test_run();
}
