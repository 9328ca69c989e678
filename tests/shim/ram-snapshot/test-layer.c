/* The layer format: checksums, ids, round trip, and every kind of bad layer
 * refused with a message naming the file. */
#include "helpers.h"

#include "ram-snapshot/restore.h"
#include "snapshot/compact.h"
#include "snapshot/crc32c.h"
#include "snapshot/layer-internal.h"
#include "snapshot/layer-write.h"
#include "snapshot/mapped-read.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define RAM (64ull << 20)

static void test_crc32c(void)
{
    g_assert_cmphex(crc32c(0, "123456789", 9), ==, 0xe3069283); /* the standard check value */
    g_assert_cmphex(crc32c_portable(0, "123456789", 9), ==, 0xe3069283);
    g_autofree uint8_t *buf = g_malloc(100003);
    for (size_t i = 0; i < 100003; i++)
        buf[i] = (uint8_t)(i * 131 + (i >> 7));
    for (size_t len = 0; len < 100003; len = len * 3 + 1)
        g_assert_cmphex(crc32c(0, buf + 1, len), ==, crc32c_portable(0, buf + 1, len));
    /* incremental == one shot */
    g_assert_cmphex(crc32c(crc32c(0, buf, 777), buf + 777, 5000), ==, crc32c(0, buf, 5777));
}

static void test_ids(void)
{
    snap_id a, b, parsed;
    snap_id_random(&a);
    snap_id_random(&b);
    g_assert_false(snap_id_equal(&a, &b));
    g_assert_false(snap_id_is_nil(&a));
    char text[37];
    snap_id_to_string(&a, text);
    g_assert_cmpuint(strlen(text), ==, 36);
    g_assert_true(snap_id_parse(text, &parsed));
    g_assert_true(snap_id_equal(&a, &parsed));
    g_assert_false(snap_id_parse("not-an-id", &parsed));
    g_assert_false(snap_id_parse("0123456789abcdef0123456789abcdef0123", &parsed));
}

/* Write runs by hand, read them back through the index. */
static void test_round_trip(void)
{
    g_autofree char *dir = test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "l", NULL);
    snap_id id, parent;
    snap_id_random(&id);
    snap_id_random(&parent);
    g_autoptr(GError) error = NULL;
    struct snap_layer_writer *w = snap_layer_writer_new(path, RAM, &id, &parent, &error);
    g_assert_no_error(error);
    g_autofree uint8_t *pages = g_malloc(40 * TEST_PAGE);
    test_fill(pages, 0, 40, 77);
    g_assert_true(snap_layer_writer_add(w, 10, 3, pages, &error));
    g_assert_true(snap_layer_writer_add(w, 13, 2, NULL, &error));
    g_assert_true(snap_layer_writer_add(w, 20, 37, pages + 3 * TEST_PAGE, &error));
    g_assert_false(snap_layer_writer_add(w, 5, 1, pages, &error)); /* out of order */
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_INVALID);
    g_clear_error(&error);
    g_assert_true(snap_layer_writer_commit(w, &error));
    g_assert_no_error(error);

    g_autoptr(snap_layer) l = snap_layer_open(path, &error);
    g_assert_no_error(error);
    g_assert_true(snap_id_equal(&l->hdr.id, &id));
    g_assert_true(snap_id_equal(&l->hdr.parent_id, &parent));
    g_assert_false(snap_layer_is_full(l));
    g_assert_cmpuint(l->hdr.page_count, ==, 40);
    g_assert_cmpuint(l->hdr.block_count, ==, 3);
    g_assert_cmpuint(test_file_size(path), ==, l->hdr.file_size);
    uint64_t dp = 99;
    g_assert_cmpint(snap_layer_find(l, 9, &dp), ==, SNAP_PAGE_KIND_ABSENT);
    g_assert_cmpint(snap_layer_find(l, 14, &dp), ==, SNAP_PAGE_KIND_ZERO);
    g_assert_cmpint(snap_layer_find(l, 12, &dp), ==, SNAP_PAGE_KIND_DATA);
    g_assert_cmpuint(dp, ==, 2);
    g_assert_cmpint(snap_layer_find(l, 56, &dp), ==, SNAP_PAGE_KIND_DATA);
    g_assert_cmpuint(dp, ==, 39);
    g_assert_cmpint(snap_layer_find(l, 57, &dp), ==, SNAP_PAGE_KIND_ABSENT);
    g_assert_true(snap_layer_verify_data(l, 0, 40, &error));
    g_assert_cmpmem(snap_layer_data_page(l, 0), 40 * TEST_PAGE, pages, 40 * TEST_PAGE);
    test_rmtree(dir);
}

/* Expect opening chain paths[0..n) to fail with `code` and a message naming
 * `culprit` and containing `words`. */
static void expect_refused(char **paths, unsigned n, int code, const char *culprit, const char *words)
{
    g_autoptr(GError) error = NULL;
    struct snap_chain *c = snap_chain_open((const char *const *)paths, n, SNAP_CHAIN_DEFAULT, &error);
    g_assert_null(c);
    g_assert_error(error, SNAP_ERROR, code);
    g_test_message("refused: %s", error->message);
    g_assert_nonnull(strstr(error->message, culprit));
    g_assert_nonnull(strstr(error->message, words));
}

static void test_missing_and_junk(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    g_autofree char *missing = g_build_filename(s.dir, "nope", NULL);
    char *chain[] = { s.paths[0], missing };
    expect_refused(chain, 2, SNAP_ERROR_IO, missing, "No such file");
    g_autofree char *junk = g_build_filename(s.dir, "junk", NULL);
    g_autofree char *zeros = g_malloc0(8192);
    g_assert_true(g_file_set_contents(junk, zeros, 8192, NULL));
    expect_refused(&junk, 1, SNAP_ERROR_FORMAT, junk, "bad magic");
    g_assert_true(g_file_set_contents(junk, "short", 5, NULL));
    expect_refused(&junk, 1, SNAP_ERROR_FORMAT, junk, "truncated");
    expect_refused(&s.dir, 1, SNAP_ERROR_FORMAT, s.dir, "not a regular file");
    test_scenario_free(&s);
}

static void test_truncated(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    uint64_t size = test_file_size(s.paths[1]);
    uint64_t cuts[] = { size - 1, size - 100, size / 2, 4096 + 10, 100 };
    for (unsigned i = 0; i < G_N_ELEMENTS(cuts); i++) {
        test_truncate(s.paths[1], cuts[i]);
        expect_refused(s.paths, 3, SNAP_ERROR_FORMAT, s.paths[1], "truncated");
    }
    test_scenario_free(&s);
}

/* A layer truncated after it was opened: its mapping past the new end
 * faults (SIGBUS). Checking, copying and comparing through the mapping fail
 * with an error naming the file instead; restores by copy and merge too. A
 * fault anywhere else still ends the process. */
static void test_truncated_while_open(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    g_autoptr(snap_chain) c = test_open_chain(s.paths, 3);
    struct snap_layer *base = c->layers[0];
    g_assert_cmpuint(base->hdr.page_count, >, 3 * SNAP_BLOCK_PAGES);
    g_assert_true(snap_layer_verify_data(base, 0, SNAP_BLOCK_PAGES, NULL)); /* block 0: checked */
    test_truncate(s.paths[0], SNAP_LAYER_DATA_OFFSET + SNAP_BLOCK_PAGES * TEST_PAGE + TEST_PAGE);

    g_autoptr(GError) error = NULL;
    g_assert_false(snap_layer_verify_data(base, 2 * SNAP_BLOCK_PAGES, 1, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT);
    g_assert_nonnull(strstr(error->message, s.paths[0]));
    g_assert_nonnull(strstr(error->message, "truncated while in use"));
    g_clear_error(&error);
    uint8_t page[TEST_PAGE];
    const uint8_t *gone = snap_layer_data_page(base, 2 * SNAP_BLOCK_PAGES);
    bool equal = true;
    uint32_t crc = 0;
    g_assert_false(snap_mapped_copy(page, gone, TEST_PAGE));
    g_assert_false(snap_mapped_equal(gone, page, TEST_PAGE, &equal));
    g_assert_false(snap_mapped_crc32c(gone, TEST_PAGE, &crc));
    /* What is still in the file reads as before. */
    g_assert_true(snap_mapped_copy(page, snap_layer_data_page(base, 0), TEST_PAGE));
    g_assert_true(snap_mapped_equal(snap_layer_data_page(base, 0), page, TEST_PAGE, &equal) && equal);

    uint8_t *ram = test_ram_new(RAM, NULL);
    g_assert_false(snap_restore_copy(c, ram, RAM, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT);
    g_assert_nonnull(strstr(error->message, "truncated while in use"));
    g_clear_error(&error);
    test_ram_free(ram, RAM, -1);
    struct snap_merged_ram merged;
    g_assert_false(snap_restore_merge(c, s.dir, &merged, &error));
    g_clear_error(&error);

    /* A read of the lost part outside these functions is still a SIGBUS. */
    pid_t child = fork();
    if (child == 0) {
        volatile uint8_t byte = gone[0];
        (void)byte;
        _exit(0);
    }
    int status = 0;
    g_assert_cmpint(waitpid(child, &status, 0), ==, child);
    /* (Under AddressSanitizer, its own SIGBUS handler reports and exits 1.) */
    g_assert_true((WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) ||
                  (WIFEXITED(status) && WEXITSTATUS(status) != 0));
    test_scenario_free(&s);
}

/* A fold over layers whose blocks were checked earlier (so no checksum is
 * read again) and one of which is then truncated fails with an error naming
 * the file; it must not end the process with SIGBUS. */
static void test_fold_truncated_after_check(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    g_autoptr(snap_chain) c = test_open_chain(s.paths, 3);
    struct snap_layer *base = c->layers[0];
    g_assert_true(snap_layer_verify_data(base, 0, base->hdr.page_count, NULL));
    test_truncate(s.paths[0], SNAP_LAYER_DATA_OFFSET + SNAP_BLOCK_PAGES * TEST_PAGE);
    g_autofree char *out = g_build_filename(s.dir, "folded", NULL);
    g_autoptr(GError) error = NULL;
    g_assert_false(snap_compact_chain(c, out, NULL, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_IO);
    g_assert_nonnull(strstr(error->message, s.paths[0]));
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
    test_scenario_free(&s);
}

static void test_flipped_header_and_index(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    test_flip_byte(s.paths[2], 40); /* inside the ids */
    expect_refused(s.paths, 3, SNAP_ERROR_CHECKSUM, s.paths[2], "header checksum");
    test_flip_byte(s.paths[2], 40);
    g_autoptr(snap_chain) ok = test_open_chain(s.paths, 3);
    uint64_t index_at = ok->layers[2]->hdr.index_offset;
    test_flip_byte(s.paths[2], index_at + 3);
    expect_refused(s.paths, 3, SNAP_ERROR_CHECKSUM, s.paths[2], "index checksum");
    test_flip_byte(s.paths[2], test_file_size(s.paths[2]) - 2); /* checksum table */
    expect_refused(s.paths, 3, SNAP_ERROR_CHECKSUM, s.paths[2], "index checksum");
    test_scenario_free(&s);
}

/* A flipped data byte passes open (data is checked lazily) but copy and merge
 * fail before the RAM is used. */
static void test_flipped_data(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    test_flip_byte(s.paths[1], SNAP_LAYER_DATA_OFFSET + 5 * TEST_PAGE + 123);
    g_autoptr(snap_chain) c = test_open_chain(s.paths, 3);
    g_autoptr(GError) error = NULL;
    uint8_t *ram = test_ram_new(RAM, NULL);
    g_assert_false(snap_restore_copy(c, ram, RAM, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_CHECKSUM);
    g_assert_nonnull(strstr(error->message, s.paths[1]));
    g_assert_nonnull(strstr(error->message, "block 0"));
    g_clear_error(&error);
    test_ram_free(ram, RAM, -1);

    g_autoptr(snap_chain) c2 = test_open_chain(s.paths, 3);
    struct snap_merged_ram merged;
    g_assert_false(snap_restore_merge(c2, s.dir, &merged, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_CHECKSUM);
    g_assert_null(merged.host);
    /* the merge image is never left behind */
    g_autoptr(GDir) d = g_dir_open(s.dir, 0, NULL);
    unsigned files = 0;
    while (g_dir_read_name(d))
        files++;
    g_assert_cmpuint(files, ==, 3);
    test_scenario_free(&s);
}

static void test_wrong_chain(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    char *skip[] = { s.paths[0], s.paths[2] };
    expect_refused(skip, 2, SNAP_ERROR_CHAIN, s.paths[2], "wrong parent");
    char *diff_first[] = { s.paths[1], s.paths[2] };
    expect_refused(diff_first, 2, SNAP_ERROR_CHAIN, s.paths[1], "base layer");
    char *two_bases[] = { s.paths[0], s.paths[0] };
    expect_refused(two_bases, 2, SNAP_ERROR_CHAIN, s.paths[0], "wrong parent");

    /* same ids but a different RAM size */
    g_autofree char *other = g_build_filename(s.dir, "other", NULL);
    g_autoptr(GError) error = NULL;
    struct snap_layer_writer *w = snap_layer_writer_new(other, RAM * 2, &s.ids[2], &s.ids[1], &error);
    g_assert_true(snap_layer_writer_commit(w, &error));
    char *sized[] = { s.paths[0], s.paths[1], other };
    expect_refused(sized, 3, SNAP_ERROR_CHAIN, other, "RAM size");
    test_scenario_free(&s);
}

/* Every single byte of the header, flipped, is caught (and nothing crashes);
 * so is every byte of a small layer's index and checksum table. */
static void test_every_metadata_byte(void)
{
    struct test_scenario s;
    test_scenario_build(&s, RAM, false);
    for (uint64_t off = 0; off < sizeof(struct snap_layer_header); off++) {
        test_flip_byte(s.paths[1], off);
        g_autoptr(GError) error = NULL;
        g_autoptr(snap_layer) l = snap_layer_open(s.paths[1], &error);
        g_assert_null(l);
        g_assert_nonnull(strstr(error->message, s.paths[1]));
        test_flip_byte(s.paths[1], off);
    }
    uint64_t size = test_file_size(s.paths[1]);
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_layer) good = snap_layer_open(s.paths[1], &error);
    g_assert_no_error(error);
    for (uint64_t off = good->hdr.index_offset; off < size; off++) {
        test_flip_byte(s.paths[1], off);
        g_autoptr(snap_layer) l = snap_layer_open(s.paths[1], &error);
        g_assert_null(l);
        g_assert_error(error, SNAP_ERROR, SNAP_ERROR_CHECKSUM);
        g_clear_error(&error);
        test_flip_byte(s.paths[1], off);
    }
    test_scenario_free(&s);
}

/* RAM sizes no VM has are refused by the writer and the reader: a layer of
 * a few KiB whose header claims 16 TiB once made a chain allocate an 8 GiB
 * page index (found by tests/fuzz chain). */
static void test_ram_size_bounded(void)
{
    g_autofree char *dir = test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "l", NULL);
    snap_id id;
    snap_id_random(&id);
    g_autoptr(GError) error = NULL;
    g_assert_null(snap_layer_writer_new(path, SNAP_MAX_RAM_SIZE + TEST_PAGE, &id, NULL, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_INVALID);
    g_clear_error(&error);

    /* The largest VM's layer opens; the same header claiming 16 TiB (with a
     * right checksum) does not. */
    struct snap_layer_writer *w = snap_layer_writer_new(path, SNAP_MAX_RAM_SIZE, &id, NULL, &error);
    g_assert_no_error(error);
    g_autofree uint8_t *page = g_malloc0(TEST_PAGE);
    g_assert_true(snap_layer_writer_add(w, 7, 1, page, &error));
    g_assert_true(snap_layer_writer_commit(w, &error));
    g_autoptr(snap_layer) ok = snap_layer_open(path, &error);
    g_assert_no_error(error);
    struct snap_layer_header h = ok->hdr;
    h.ram_size = 1ull << 44;
    h.header_crc = snap_layer_header_crc(&h);
    int fd = open(path, O_WRONLY);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pwrite(fd, &h, sizeof h, 0), ==, (ssize_t)sizeof h);
    close(fd);
    g_autoptr(snap_layer) big = snap_layer_open(path, &error);
    g_assert_null(big);
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT);
    g_assert_nonnull(strstr(error->message, "invalid RAM size"));
    test_rmtree(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/snapshot/layer/ram-size-bounded", test_ram_size_bounded);
    g_test_add_func("/snapshot/layer/crc32c", test_crc32c);
    g_test_add_func("/snapshot/layer/ids", test_ids);
    g_test_add_func("/snapshot/layer/round-trip", test_round_trip);
    g_test_add_func("/snapshot/layer/missing-and-junk", test_missing_and_junk);
    g_test_add_func("/snapshot/layer/truncated", test_truncated);
    g_test_add_func("/snapshot/layer/truncated-while-open", test_truncated_while_open);
    g_test_add_func("/snapshot/layer/fold-truncated-after-check", test_fold_truncated_after_check);
    g_test_add_func("/snapshot/layer/flipped-header-index", test_flipped_header_and_index);
    g_test_add_func("/snapshot/layer/flipped-data", test_flipped_data);
    g_test_add_func("/snapshot/layer/wrong-chain", test_wrong_chain);
    g_test_add_func("/snapshot/layer/every-metadata-byte", test_every_metadata_byte);
    return g_test_run();
}
