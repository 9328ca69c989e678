#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

char *test_tmpdir(void)
{
    g_autoptr(GError) error = NULL;
    char *dir = g_dir_make_tmp("vsnap-snap-XXXXXX", &error);
    g_assert_no_error(error);
    return dir;
}

void test_rmtree(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d)
        return;
    const char *name;
    while ((name = g_dir_read_name(d))) {
        g_autofree char *p = g_build_filename(dir, name, NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR) && !g_file_test(p, G_FILE_TEST_IS_SYMLINK))
            test_rmtree(p);
        else
            unlink(p);
    }
    g_dir_close(d);
    rmdir(dir);
}

uint8_t *test_ram_new(uint64_t size, int *fd)
{
    void *p;
    if (fd) {
        *fd = memfd_create("test-ram", MFD_CLOEXEC);
        g_assert_cmpint(*fd, >=, 0);
        g_assert_cmpint(ftruncate(*fd, (off_t)size), ==, 0);
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, *fd, 0);
    } else {
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    g_assert_true(p != MAP_FAILED);
    return p;
}

void test_ram_free(uint8_t *ram, uint64_t size, int fd)
{
    munmap(ram, size);
    if (fd >= 0)
        close(fd);
}

uint64_t test_resident_pages(const uint8_t *ram, uint64_t size)
{
    uint64_t n = size / TEST_PAGE, count = 0;
    g_autofree unsigned char *vec = g_malloc(n);
    g_assert_cmpint(mincore((void *)ram, size, vec), ==, 0);
    for (uint64_t i = 0; i < n; i++)
        count += vec[i] & 1;
    return count;
}

static uint64_t mix(uint64_t x)
{
    uint64_t z = x + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void test_fill(uint8_t *ram, uint64_t first_page, uint64_t npages, uint64_t seed)
{
    uint64_t *w = (uint64_t *)(ram + first_page * TEST_PAGE);
    uint64_t k0 = first_page * (TEST_PAGE / 8);
    for (uint64_t k = 0; k < npages * (TEST_PAGE / 8); k++)
        w[k] = mix(seed ^ (k0 + k)) | 1;
}

uint64_t *test_bitmap_new(uint64_t ram_size)
{
    return g_new0(uint64_t, (ram_size / TEST_PAGE + 63) / 64);
}

void test_bitmap_set(uint64_t *bm, uint64_t first, uint64_t n)
{
    for (uint64_t p = first; p < first + n; p++)
        bm[p / 64] |= 1ull << (p % 64);
}

void test_assert_ram_equal(const uint8_t *got, const uint8_t *want, uint64_t size, const char *what)
{
    if (memcmp(got, want, size) == 0)
        return;
    for (uint64_t p = 0; p < size / TEST_PAGE; p++)
        if (memcmp(got + p * TEST_PAGE, want + p * TEST_PAGE, TEST_PAGE) != 0)
            g_error("%s: RAM differs from the expected image first at page %" G_GUINT64_FORMAT, what, p);
}

void test_flip_byte(const char *path, uint64_t offset)
{
    int fd = open(path, O_RDWR);
    g_assert_cmpint(fd, >=, 0);
    uint8_t b;
    g_assert_cmpint(pread(fd, &b, 1, (off_t)offset), ==, 1);
    b ^= 0x40;
    g_assert_cmpint(pwrite(fd, &b, 1, (off_t)offset), ==, 1);
    close(fd);
}

void test_truncate(const char *path, uint64_t size)
{
    g_assert_cmpint(truncate(path, (off_t)size), ==, 0);
}

uint64_t test_file_size(const char *path)
{
    struct stat st;
    g_assert_cmpint(stat(path, &st), ==, 0);
    return (uint64_t)st.st_size;
}

static void save_full(struct test_scenario *s, const struct snap_ram *ram)
{
    g_autoptr(GError) error = NULL;
    snap_id_random(&s->ids[0]);
    g_assert_true(snap_save_full(s->paths[0], ram, &s->ids[0], NULL, &error));
    g_assert_no_error(error);
}

static void save_diff(struct test_scenario *s, const struct snap_ram *ram, int i, uint64_t *dirty)
{
    g_autoptr(GError) error = NULL;
    snap_id_random(&s->ids[i]);
    g_assert_true(snap_save_diff(s->paths[i], ram, dirty, &s->ids[i], &s->ids[i - 1], NULL, &error));
    g_assert_no_error(error);
    memset(dirty, 0, (s->size / TEST_PAGE + 63) / 64 * 8);
}

/* The writes between snapshots overwrite pages of earlier layers, zero
 * non-zero pages and touch both ends of RAM. */
void test_scenario_build(struct test_scenario *s, uint64_t size, bool use_fd)
{
    uint64_t last = size / TEST_PAGE - 1;
    memset(s, 0, sizeof *s);
    s->dir = test_tmpdir();
    s->size = size;
    for (int i = 0; i < 3; i++)
        s->paths[i] = g_strdup_printf("%s/layer%d", s->dir, i);
    int fd = -1;
    uint8_t *ram = test_ram_new(size, use_fd ? &fd : NULL);
    struct snap_ram r = { .host = ram, .size = size, .fd = fd };
    g_autofree uint64_t *dirty = test_bitmap_new(size);

    test_fill(ram, 16, 2048, 1);
    test_fill(ram, 5000, 100, 2);
    test_fill(ram, last, 1, 9);
    memset(ram + 7000 * TEST_PAGE, 0, 8 * TEST_PAGE); /* touched but zero: not stored */
    save_full(s, &r);
    s->expected[0] = g_memdup2(ram, size);

    test_fill(ram, 3000, 500, 3);
    test_fill(ram, 500, 200, 4);
    memset(ram + 1000 * TEST_PAGE, 0, 100 * TEST_PAGE);
    test_bitmap_set(dirty, 3000, 500);
    test_bitmap_set(dirty, 500, 200);
    test_bitmap_set(dirty, 1000, 100);
    test_bitmap_set(dirty, 9000, 4); /* dirty, still zero */
    save_diff(s, &r, 1, dirty);
    s->expected[1] = g_memdup2(ram, size);

    test_fill(ram, 3100, 100, 5);
    memset(ram + 5000 * TEST_PAGE, 0, 50 * TEST_PAGE);
    test_fill(ram, 0, 4, 6);
    test_fill(ram, last, 1, 10);
    test_bitmap_set(dirty, 3100, 100);
    test_bitmap_set(dirty, 5000, 50);
    test_bitmap_set(dirty, 0, 4);
    test_bitmap_set(dirty, last, 1);
    save_diff(s, &r, 2, dirty);
    s->expected[2] = g_memdup2(ram, size);
    test_ram_free(ram, size, fd);
}

void test_scenario_free(struct test_scenario *s)
{
    test_rmtree(s->dir);
    for (int i = 0; i < 3; i++) {
        g_free(s->paths[i]);
        g_free(s->expected[i]);
    }
    g_free(s->dir);
}

struct snap_chain *test_open_chain(char *const *paths, unsigned n)
{
    g_autoptr(GError) error = NULL;
    struct snap_chain *c = snap_chain_open((const char *const *)paths, n, SNAP_CHAIN_DEFAULT, &error);
    g_assert_no_error(error);
    g_assert_nonnull(c);
    return c;
}
