/* Writing layers from RAM: sparse RAM costs what it uses, zero pages cost
 * nothing, a full destination is a clear error with nothing left behind. */
#include "helpers.h"

#include "ram-snapshot/restore.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#define BIG_RAM (8ull << 30)
#define USED_CHUNKS 64           /* 64 x 1 MiB, spread over all of RAM */
#define CHUNK_PAGES 256ull

static uint64_t chunk_page(unsigned i)
{
    return (uint64_t)i * (BIG_RAM / TEST_PAGE / USED_CHUNKS) + 3;
}

static void check_sparse(bool memfd)
{
    g_autofree char *dir = test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "base", NULL);
    int fd = -1;
    uint8_t *ram = test_ram_new(BIG_RAM, memfd ? &fd : NULL);
    for (unsigned i = 0; i < USED_CHUNKS; i++)
        test_fill(ram, chunk_page(i), CHUNK_PAGES, i);
    uint64_t resident_before = test_resident_pages(ram, BIG_RAM);
    struct snap_ram r = { .host = ram, .size = BIG_RAM, .fd = fd };
    snap_id id;
    snap_id_random(&id);
    struct snap_save_stats st;
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_save_full(path, &r, &id, &st, &error));
    g_assert_no_error(error);
    uint64_t size = test_file_size(path);
    g_test_message("%s: 8 GiB RAM with 64 MiB used -> layer of %.1f MiB in %.3f s (%" G_GUINT64_FORMAT
                   " pages scanned)", memfd ? "memfd" : "anonymous", size / 1048576.0,
                   st.elapsed_ns / 1e9, st.scanned_pages);
    g_assert_cmpuint(st.data_pages, ==, USED_CHUNKS * CHUNK_PAGES);
    g_assert_cmpuint(size, >=, 64ull << 20);
    g_assert_cmpuint(size, <, (64ull << 20) + (1ull << 20));
    g_assert_cmpuint(st.elapsed_ns, <, 10ull * 1000000000ull);
    /* nothing untouched was faulted in by the scan */
    g_assert_cmpuint(test_resident_pages(ram, BIG_RAM), <=, resident_before);

    /* and it restores: copy into fresh 8 GiB, compare the chunks with the original */
    g_autoptr(snap_chain) c = test_open_chain(&path, 1);
    uint8_t *back = test_ram_new(BIG_RAM, NULL);
    g_assert_true(snap_restore_copy(c, back, BIG_RAM, &error));
    g_assert_no_error(error);
    for (unsigned i = 0; i < USED_CHUNKS; i++)
        g_assert_cmpmem(back + chunk_page(i) * TEST_PAGE, CHUNK_PAGES * TEST_PAGE,
                        ram + chunk_page(i) * TEST_PAGE, CHUNK_PAGES * TEST_PAGE);
    test_ram_free(ram, BIG_RAM, fd);
    g_assert_cmpuint(test_resident_pages(back, BIG_RAM), ==, USED_CHUNKS * CHUNK_PAGES);
    test_ram_free(back, BIG_RAM, -1);
    test_rmtree(dir);
}

static void test_sparse_anonymous(void)
{
    check_sparse(false);
}

static void test_sparse_memfd(void)
{
    check_sparse(true);
}

/* Touched pages that read as zero are not stored in a full layer; in a diff
 * they become zero runs that hide the parent's data. */
static void test_zero_pages(void)
{
    g_autofree char *dir = test_tmpdir();
    g_autofree char *base = g_build_filename(dir, "base", NULL);
    g_autofree char *diff = g_build_filename(dir, "diff", NULL);
    const uint64_t size = 16 << 20;
    uint8_t *ram = test_ram_new(size, NULL);
    test_fill(ram, 0, 100, 5);
    memset(ram + 50 * TEST_PAGE, 0, 10 * TEST_PAGE);
    memset(ram + 1000 * TEST_PAGE, 0, 100 * TEST_PAGE); /* touched, zero */
    struct snap_ram r = { .host = ram, .size = size, .fd = -1 };
    snap_id ids[2];
    snap_id_random(&ids[0]);
    snap_id_random(&ids[1]);
    struct snap_save_stats st;
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_save_full(base, &r, &ids[0], &st, &error));
    g_assert_cmpuint(st.data_pages, ==, 90);
    g_assert_cmpuint(st.zero_pages, ==, 110);

    g_autofree uint64_t *dirty = test_bitmap_new(size);
    memset(ram + 10 * TEST_PAGE, 0, 5 * TEST_PAGE);
    test_bitmap_set(dirty, 10, 5);
    g_assert_true(snap_save_diff(diff, &r, dirty, &ids[1], &ids[0], &st, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(st.data_pages, ==, 0);
    g_assert_cmpuint(st.zero_pages, ==, 5);
    g_assert_cmpuint(test_file_size(diff), ==, 4096 + 16 + 0);
    char *paths[] = { base, diff };
    g_autoptr(snap_chain) c = test_open_chain(paths, 2);
    uint8_t *back = test_ram_new(size, NULL);
    g_assert_true(snap_restore_copy(c, back, size, &error));
    test_assert_ram_equal(back, ram, size, "zero pages");
    test_ram_free(back, size, -1);
    test_ram_free(ram, size, -1);
    g_assert_false(snap_save_diff(diff, &r, dirty, &ids[1], NULL, NULL, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_INVALID);
    test_rmtree(dir);
}

static unsigned count_entries(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    unsigned n = 0;
    while (g_dir_read_name(d))
        n++;
    return n;
}

/* Destination on a full 1 MiB tmpfs: NO_SPACE, temp file removed, the older
 * layer at the same name and other files untouched. */
static void test_destination_full(void)
{
    g_autofree char *mnt = test_tmpdir();
    /* A private mount namespace: the tmpfs goes away with this process even if
     * an assertion fails before the umount. */
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("vsnap-test", mnt, "tmpfs", 0, "size=1M") < 0) {
        g_autofree char *why = g_strdup_printf("cannot mount a tmpfs (%s): needs root", g_strerror(errno));
        g_test_skip(why);
        rmdir(mnt);
        return;
    }
    g_autofree char *path = g_build_filename(mnt, "layer", NULL);
    g_autofree char *other = g_build_filename(mnt, "other", NULL);
    g_assert_true(g_file_set_contents(other, "keep me", 7, NULL));
    const uint64_t size = 16 << 20;
    uint8_t *ram = test_ram_new(size, NULL);
    test_fill(ram, 0, 64, 1); /* 256 KiB: fits */
    struct snap_ram r = { .host = ram, .size = size, .fd = -1 };
    snap_id id;
    snap_id_random(&id);
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_save_full(path, &r, &id, NULL, &error));
    g_assert_no_error(error);
    uint64_t old_size = test_file_size(path);

    test_fill(ram, 1000, 512, 2); /* 2 MiB more: does not fit */
    snap_id id2;
    snap_id_random(&id2);
    g_assert_false(snap_save_full(path, &r, &id2, NULL, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_NO_SPACE);
    g_test_message("full: %s", error->message);
    g_assert_nonnull(strstr(error->message, path));
    g_assert_nonnull(strstr(error->message, "full"));
    g_clear_error(&error);
    g_assert_cmpuint(count_entries(mnt), ==, 2); /* no temporary left */
    g_assert_cmpuint(test_file_size(path), ==, old_size);
    g_autoptr(snap_layer) l = snap_layer_open(path, &error);
    g_assert_no_error(error);
    g_assert_true(snap_id_equal(&l->hdr.id, &id)); /* still the old layer */
    g_autofree char *kept = NULL;
    g_assert_true(g_file_get_contents(other, &kept, NULL, NULL));
    g_assert_cmpstr(kept, ==, "keep me");
    g_clear_pointer(&l, snap_layer_close);
    test_ram_free(ram, size, -1);
    g_assert_cmpint(umount(mnt), ==, 0);
    rmdir(mnt);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/snapshot/save/sparse-8g-anonymous", test_sparse_anonymous);
    g_test_add_func("/snapshot/save/sparse-8g-memfd", test_sparse_memfd);
    g_test_add_func("/snapshot/save/zero-pages", test_zero_pages);
    g_test_add_func("/snapshot/save/destination-full", test_destination_full);
    return g_test_run();
}
