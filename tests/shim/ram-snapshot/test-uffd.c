/* On-demand restore with real userfaultfd on process memory: threads touching
 * the registered mapping fault exactly like vCPUs do. */
#include "helpers.h"

#include "ram-snapshot/uffd.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define RAM (64ull << 20)

static struct test_scenario scenario; /* built once: every test reads it */

struct restored {
    struct snap_chain *chain;
    uint8_t *ram;
    int fd;
    struct snap_uffd *u;
};

static void restore_start_ra(struct restored *r, uint64_t block, bool memfd, snap_uffd_error_fn cb,
                             void *opaque, enum snap_uffd_open mode, bool readahead)
{
    r->chain = test_open_chain(scenario.paths, 3);
    r->fd = -1;
    r->ram = test_ram_new(RAM, memfd ? &r->fd : NULL);
    struct snap_uffd_config cfg = { .chain = r->chain, .host = r->ram, .size = RAM,
                                    .block_size = block, .readahead = readahead, .on_error = cb,
                                    .opaque = opaque, .open_mode = mode };
    g_autoptr(GError) error = NULL;
    r->u = snap_uffd_start(&cfg, &error);
    g_assert_no_error(error);
    g_assert_nonnull(r->u);
}

static void restore_start(struct restored *r, uint64_t block, bool memfd, snap_uffd_error_fn cb,
                          void *opaque, enum snap_uffd_open mode)
{
    restore_start_ra(r, block, memfd, cb, opaque, mode, false);
}

static void restore_end(struct restored *r)
{
    snap_uffd_stop(r->u);
    test_ram_free(r->ram, RAM, r->fd);
    snap_chain_free(r->chain);
}

/* Compare from a second thread, like a vCPU reading its RAM. */
struct reader {
    const uint8_t *ram;
    bool equal;
};

static void *read_all(void *arg)
{
    struct reader *rd = arg;
    rd->equal = memcmp(rd->ram, scenario.expected[2], RAM) == 0;
    return NULL;
}

static uint64_t check_block_size(uint64_t block, bool memfd)
{
    struct restored r;
    restore_start(&r, block, memfd, NULL, NULL, SNAP_UFFD_OPEN_AUTO);
    g_assert_cmpuint(test_resident_pages(r.ram, RAM), ==, 0); /* nothing read up front */
    struct reader rd = { .ram = r.ram };
    pthread_t t;
    pthread_create(&t, NULL, read_all, &rd);
    pthread_join(t, NULL);
    g_assert_true(rd.equal);
    test_assert_ram_equal(r.ram, scenario.expected[2], RAM, "ondemand");
    struct snap_uffd_stats st;
    snap_uffd_get_stats(r.u, &st);
    g_test_message("block %" G_GUINT64_FORMAT " KiB: %" G_GUINT64_FORMAT " faults, %" G_GUINT64_FORMAT
                   " pages copied, %" G_GUINT64_FORMAT " zero", block >> 10, st.faults,
                   st.pages_copied, st.pages_zeroed);
    g_assert_cmpuint(st.pages_copied + st.pages_zeroed + st.pages_unregistered, ==, RAM / TEST_PAGE);
    g_assert_cmpuint(st.faults, <=, RAM / block);
    g_assert_false(st.failed);
    restore_end(&r);
    return st.faults;
}

static void test_block_sizes(void)
{
    uint64_t f4k = check_block_size(4 << 10, false);
    uint64_t f64k = check_block_size(64 << 10, false);
    uint64_t f2m = check_block_size(2 << 20, false);
    g_assert_cmpuint(f4k, >, f64k);
    g_assert_cmpuint(f64k, >, f2m);
    g_assert_cmpuint(f2m, <=, RAM / (2 << 20)); /* only blocks holding data fault: zero runs are unregistered */
}

static void test_memfd_ram(void)
{
    check_block_size(64 << 10, true);
}

static void test_device_path(void)
{
    if (access("/dev/userfaultfd", R_OK | W_OK) != 0) {
        g_test_skip("/dev/userfaultfd is not available");
        return;
    }
    struct restored r;
    restore_start(&r, 64 << 10, false, NULL, NULL, SNAP_UFFD_OPEN_DEVICE);
    test_assert_ram_equal(r.ram, scenario.expected[2], RAM, "ondemand via /dev/userfaultfd");
    restore_end(&r);
}

static void wait_prefetch(struct snap_uffd *u)
{
    struct snap_uffd_stats st;
    for (int i = 0; i < 2000; i++) {
        snap_uffd_get_stats(u, &st);
        if (st.prefetch_done)
            return;
        g_usleep(5000);
    }
    g_error("prefetch did not finish in 10 s");
}

static uint64_t data_pages(const struct snap_chain *c)
{
    uint64_t n = 0;
    for (uint64_t p = 0; p < c->npages; p++)
        n += snap_chain_page_has_data(c, p);
    return n;
}

/* Once every data page is served the server can go: what is left is zero. */
static void check_complete_then_stop(struct restored *r)
{
    struct snap_uffd_stats st;
    snap_uffd_get_stats(r->u, &st);
    g_assert_true(st.complete);
    g_assert_cmpuint(test_resident_pages(r->ram, RAM), ==, data_pages(r->chain));
    snap_uffd_stop(r->u);
    r->u = NULL;
    test_assert_ram_equal(r->ram, scenario.expected[2], RAM, "after the server stopped");
}

static void test_prefetch(void)
{
    struct restored r;
    restore_start(&r, 2 << 20, false, NULL, NULL, SNAP_UFFD_OPEN_AUTO);
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_uffd_start_prefetch(r.u, &error));
    wait_prefetch(r.u);
    struct snap_uffd_stats st;
    snap_uffd_get_stats(r.u, &st);
    g_assert_cmpuint(st.blocks_prefetched, >, 0);
    g_assert_cmpuint(st.faults, ==, 0);
    check_complete_then_stop(&r);
    restore_end(&r);
}

/* Reader going backwards while prefetch goes forwards: they meet in the middle
 * and race on the same blocks. */
static void *read_backwards(void *arg)
{
    struct reader *rd = arg;
    rd->equal = true;
    for (uint64_t p = RAM / TEST_PAGE; p-- > 0;)
        if (memcmp(rd->ram + p * TEST_PAGE, scenario.expected[2] + p * TEST_PAGE, TEST_PAGE))
            rd->equal = false;
    return NULL;
}

static void test_prefetch_races_faults(void)
{
    for (int round = 0; round < 4; round++) {
        struct restored r;
        restore_start_ra(&r, 4 << 10, false, NULL, NULL, SNAP_UFFD_OPEN_AUTO, round % 2);
        struct reader rd = { .ram = r.ram };
        pthread_t t;
        pthread_create(&t, NULL, read_backwards, &rd);
        g_autoptr(GError) error = NULL;
        g_assert_true(snap_uffd_start_prefetch(r.u, &error));
        pthread_join(t, NULL);
        g_assert_true(rd.equal);
        wait_prefetch(r.u);
        test_assert_ram_equal(r.ram, scenario.expected[2], RAM, "prefetch + faults");
        restore_end(&r);
    }
}

static void test_fill_all(void)
{
    struct restored r;
    restore_start(&r, 64 << 10, true, NULL, NULL, SNAP_UFFD_OPEN_AUTO);
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_uffd_fill_all(r.u, &error));
    struct snap_uffd_stats st;
    snap_uffd_get_stats(r.u, &st);
    g_assert_cmpuint(st.faults, ==, 0);
    g_assert_cmpuint(st.pages_zeroed, ==, 0);
    check_complete_then_stop(&r);
    restore_end(&r);
}

/* ---- a corrupt block: the callback fires, the toucher never gets data ---- */

struct failure {
    GMutex lock;
    GCond cond;
    int calls;
    char *message;
};

static void on_error(void *opaque, const GError *error)
{
    struct failure *f = opaque;
    g_mutex_lock(&f->lock);
    f->calls++;
    f->message = g_strdup(error->message);
    g_cond_signal(&f->cond);
    g_mutex_unlock(&f->lock);
}

/* A server on a private copy of the scenario with one flipped byte in d1's
 * data block 0, which holds RAM pages 500..515 (still topmost at d2); 4 KiB
 * fault blocks. */
struct bad_restore {
    char *dir;
    char *paths[3];
    struct failure f;
    struct snap_chain *chain;
    uint8_t *ram;
    struct snap_uffd *u;
};

static void bad_restore_start(struct bad_restore *b, bool readahead)
{
    *b = (struct bad_restore){ .dir = test_tmpdir() };
    for (int i = 0; i < 3; i++) {
        b->paths[i] = g_build_filename(b->dir, strrchr(scenario.paths[i], '/') + 1, NULL);
        g_autofree char *data = NULL;
        gsize len;
        g_assert_true(g_file_get_contents(scenario.paths[i], &data, &len, NULL));
        g_assert_true(g_file_set_contents(b->paths[i], data, len, NULL));
    }
    test_flip_byte(b->paths[1], SNAP_LAYER_DATA_OFFSET + 3 * TEST_PAGE + 9);
    g_mutex_init(&b->f.lock);
    g_cond_init(&b->f.cond);
    b->chain = test_open_chain(b->paths, 3);
    b->ram = test_ram_new(RAM, NULL);
    struct snap_uffd_config cfg = { .chain = b->chain, .host = b->ram, .size = RAM, .block_size = 4 << 10,
                                    .readahead = readahead, .on_error = on_error, .opaque = &b->f };
    g_autoptr(GError) error = NULL;
    b->u = snap_uffd_start(&cfg, &error);
    g_assert_no_error(error);
}

static void bad_restore_end(struct bad_restore *b)
{
    snap_uffd_stop(b->u);
    test_ram_free(b->ram, RAM, -1);
    snap_chain_free(b->chain);
    g_free(b->f.message);
    test_rmtree(b->dir);
    g_free(b->dir);
    for (int i = 0; i < 3; i++)
        g_free(b->paths[i]);
}

static __thread sigjmp_buf toucher_escape;

static void escape_handler(int sig)
{
    siglongjmp(toucher_escape, 1);
}

struct toucher {
    volatile const uint8_t *page;
    volatile int got_data; /* 1: the read returned, 2: escaped by signal */
    uint8_t value;
};

static void *touch_page(void *arg)
{
    struct toucher *t = arg;
    if (sigsetjmp(toucher_escape, 1) == 0) {
        t->value = t->page[77];
        t->got_data = 1;
    } else {
        t->got_data = 2;
    }
    return NULL;
}

/* A thread touches the bad page: the callback names the layer and the
 * checksum, the thread is never handed data and never mapped the page. */
static void touch_bad_page(struct bad_restore *b)
{
    struct sigaction sa = { .sa_handler = escape_handler };
    sigaction(SIGUSR1, &sa, NULL);
    struct toucher t = { .page = b->ram + 503 * TEST_PAGE };
    pthread_t th;
    pthread_create(&th, NULL, touch_page, &t);
    g_mutex_lock(&b->f.lock);
    gint64 deadline = g_get_monotonic_time() + 10 * G_TIME_SPAN_SECOND;
    while (!b->f.calls)
        g_assert_true(g_cond_wait_until(&b->f.cond, &b->f.lock, deadline));
    g_mutex_unlock(&b->f.lock);
    g_test_message("callback: %s", b->f.message);
    g_assert_nonnull(strstr(b->f.message, b->paths[1]));
    g_assert_nonnull(strstr(b->f.message, "checksum"));
    g_usleep(50000);
    g_assert_cmpint(t.got_data, ==, 0); /* still blocked: never handed bad data */
    /* only a signal whose handler never returns releases it (a returning
     * one faults again; the shim ends the process instead: uffd.h) */
    while (t.got_data == 0) {
        pthread_kill(th, SIGUSR1);
        g_usleep(1000);
    }
    pthread_join(th, NULL);
    g_assert_cmpint(t.got_data, ==, 2);
    unsigned char vec = 0;
    mincore(b->ram + 503 * TEST_PAGE, TEST_PAGE, &vec);
    g_assert_cmpint(vec & 1, ==, 0); /* the bad page was never mapped */
}

static void test_corrupt_block(void)
{
    struct bad_restore b;
    bad_restore_start(&b, false);
    /* a good page first: served */
    g_assert_cmpmem(b.ram + 3000 * TEST_PAGE, TEST_PAGE, scenario.expected[2] + 3000 * TEST_PAGE, TEST_PAGE);
    touch_bad_page(&b);
    /* after a failure, fill_all refuses too */
    g_autoptr(GError) error = NULL;
    g_assert_false(snap_uffd_fill_all(b.u, &error));
    g_assert_nonnull(error);
    struct snap_uffd_stats st;
    snap_uffd_get_stats(b.u, &st);
    g_assert_true(st.failed);
    g_assert_cmpint(b.f.calls, ==, 1);
    bad_restore_end(&b);
}

/* fill_all meets the bad block on its caller's thread: it returns the error
 * and serving stops, but on_error (for server threads) is not called. */
static void test_corrupt_block_fill_all(void)
{
    struct bad_restore b;
    bad_restore_start(&b, false);
    g_autoptr(GError) error = NULL;
    g_assert_false(snap_uffd_fill_all(b.u, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_CHECKSUM);
    g_assert_nonnull(strstr(error->message, b.paths[1]));
    struct snap_uffd_stats st;
    snap_uffd_get_stats(b.u, &st);
    g_assert_true(st.failed);
    g_assert_false(st.complete);
    g_assert_cmpint(b.f.calls, ==, 0);
    bad_restore_end(&b);
}

/* A long zero run of the chain is never registered: touching it costs no
 * fault and reads zero; a data page still faults and is served. */
static void test_zero_runs_unregistered(void)
{
    struct restored r;
    restore_start(&r, 64 << 10, true, NULL, NULL, SNAP_UFFD_OPEN_AUTO);
    uint64_t zero = UINT64_MAX, data = UINT64_MAX;
    for (uint64_t p = 8; p + 8 < RAM / TEST_PAGE && (zero == UINT64_MAX || data == UINT64_MAX); p++) {
        bool all_zero = true;
        for (uint64_t q = p - 8; q < p + 8; q++)
            all_zero = all_zero && !snap_chain_page_has_data(r.chain, q);
        if (all_zero && zero == UINT64_MAX)
            zero = p;
        if (snap_chain_page_has_data(r.chain, p) && data == UINT64_MAX)
            data = p;
    }
    g_assert_cmpuint(zero, !=, UINT64_MAX);
    g_assert_cmpuint(data, !=, UINT64_MAX);
    struct snap_uffd_stats st;
    snap_uffd_get_stats(r.u, &st);
    g_assert_cmpuint(st.pages_unregistered, >, 0);
    static const uint8_t zeros[TEST_PAGE];
    g_assert_cmpmem(r.ram + zero * TEST_PAGE, TEST_PAGE, zeros, TEST_PAGE);
    snap_uffd_get_stats(r.u, &st);
    g_assert_cmpuint(st.faults, ==, 0);
    g_assert_cmpmem(r.ram + data * TEST_PAGE, TEST_PAGE, scenario.expected[2] + data * TEST_PAGE, TEST_PAGE);
    snap_uffd_get_stats(r.u, &st);
    g_assert_cmpuint(st.faults, ==, 1);
    test_assert_ram_equal(r.ram, scenario.expected[2], RAM, "zero runs unregistered");
    restore_end(&r);
}

/* ---- readahead ---- */

/* A reader like a vCPU on a shadow-paging host: each first touch of a page
 * costs it some microseconds, so a handler reading ahead stays in front. */
static void *read_slowly_in_order(void *arg)
{
    struct reader *rd = arg;
    rd->equal = true;
    for (uint64_t p = 0; p < RAM / TEST_PAGE; p++) {
        gint64 until = g_get_monotonic_time() + 10;
        if (memcmp(rd->ram + p * TEST_PAGE, scenario.expected[2] + p * TEST_PAGE, TEST_PAGE))
            rd->equal = false;
        while (g_get_monotonic_time() < until)
            ;
    }
    return NULL;
}

static struct snap_uffd_stats read_in_order(bool readahead)
{
    struct restored r;
    restore_start_ra(&r, 64 << 10, true, NULL, NULL, SNAP_UFFD_OPEN_AUTO, readahead);
    struct reader rd = { .ram = r.ram };
    pthread_t t;
    pthread_create(&t, NULL, read_slowly_in_order, &rd);
    pthread_join(t, NULL);
    g_assert_true(rd.equal);
    test_assert_ram_equal(r.ram, scenario.expected[2], RAM, "read in order");
    struct snap_uffd_stats st;
    snap_uffd_get_stats(r.u, &st);
    g_test_message("readahead %d: %" G_GUINT64_FORMAT " faults, %" G_GUINT64_FORMAT " blocks read ahead, %"
                   G_GUINT64_FORMAT " + %" G_GUINT64_FORMAT " pages", readahead, st.faults, st.blocks_read_ahead,
                   st.pages_copied, st.pages_zeroed);
    g_assert_false(st.failed);
    restore_end(&r);
    return st;
}

/* Reading RAM in order takes a fault per 64 KiB block holding data without
 * readahead and a handful with it: the window doubles up to 16 MiB. */
static void test_readahead_in_order(void)
{
    struct snap_uffd_stats off = read_in_order(false), on = read_in_order(true);
    g_assert_cmpuint(off.faults, >=, 100); /* a fault per 64 KiB block holding data */
    g_assert_cmpuint(off.blocks_read_ahead, ==, 0);
    g_assert_cmpuint(on.faults, <=, off.faults / 8);
    g_assert_cmpuint(on.blocks_read_ahead, >=, off.faults / 2);
    g_assert_cmpuint(on.pages_copied + on.pages_zeroed, <=, RAM / TEST_PAGE);
}

/* A jump (a fault with no stream before it) brings in the snapshot data of
 * the aligned 2 MiB around it, and none of its zero pages before the fault. */
static void test_readahead_around_a_jump(void)
{
    struct restored r;
    restore_start_ra(&r, 64 << 10, false, NULL, NULL, SNAP_UFFD_OPEN_AUTO, true);
    const uint64_t region = (2 << 20) / TEST_PAGE;
    uint64_t best = 0, best_data = 0;
    for (uint64_t first = 0; first < RAM / TEST_PAGE; first += region) { /* the region with most data */
        uint64_t n = 0;
        for (uint64_t p = first; p < first + region; p++)
            n += snap_chain_page_has_data(r.chain, p);
        if (n > best_data)
            best = first, best_data = n;
    }
    uint64_t touched = best + region / 2;
    g_assert_cmpmem(r.ram + touched * TEST_PAGE, TEST_PAGE, scenario.expected[2] + touched * TEST_PAGE, TEST_PAGE);
    g_usleep(200000);
    for (uint64_t p = best; p < best + region; p++) {
        unsigned char vec = 0;
        mincore(r.ram + p * TEST_PAGE, TEST_PAGE, &vec);
        if (snap_chain_page_has_data(r.chain, p))
            g_assert_cmpint(vec & 1, ==, 1);
        else if (p < touched - touched % 16)
            g_assert_cmpint(vec & 1, ==, 0);
    }
    test_assert_ram_equal(r.ram, scenario.expected[2], RAM, "after a jump");
    struct snap_uffd_stats st;
    snap_uffd_get_stats(r.u, &st);
    g_test_message("%" G_GUINT64_FORMAT " data pages in the region, %" G_GUINT64_FORMAT " blocks read ahead",
                   best_data, st.blocks_read_ahead);
    g_assert_cmpuint(best_data, >, 0);
    restore_end(&r);
}

/* Readahead meets a bad block the guest has not touched: nothing is
 * reported and the block stays unmapped; touching it then is reported as
 * without readahead. */
static void test_readahead_leaves_a_bad_block_to_its_fault(void)
{
    struct bad_restore b;
    bad_restore_start(&b, true);
    /* page 496 is good; readahead around it and after it meets the bad block (500..515) */
    g_assert_cmpmem(b.ram + 496 * TEST_PAGE, TEST_PAGE, scenario.expected[2] + 496 * TEST_PAGE, TEST_PAGE);
    g_usleep(100000);
    unsigned char vec = 1;
    mincore(b.ram + 503 * TEST_PAGE, TEST_PAGE, &vec);
    g_assert_cmpint(vec & 1, ==, 0);
    g_assert_cmpint(b.f.calls, ==, 0);
    struct snap_uffd_stats st;
    snap_uffd_get_stats(b.u, &st);
    g_assert_false(st.failed);
    g_assert_cmpuint(st.blocks_read_ahead, >=, 3);
    touch_bad_page(&b);
    g_assert_cmpint(b.f.calls, ==, 1);
    bad_restore_end(&b);
}

static void test_bad_config(void)
{
    struct snap_chain *chain = test_open_chain(scenario.paths, 3);
    uint8_t *ram = test_ram_new(RAM, NULL);
    uint64_t bad_blocks[] = { 3000, 8192 + 4096, 4 << 20 };
    for (unsigned i = 0; i < G_N_ELEMENTS(bad_blocks); i++) {
        struct snap_uffd_config cfg = { .chain = chain, .host = ram, .size = RAM, .block_size = bad_blocks[i] };
        g_autoptr(GError) error = NULL;
        g_assert_null(snap_uffd_start(&cfg, &error));
        g_assert_error(error, SNAP_ERROR, SNAP_ERROR_INVALID);
    }
    struct snap_uffd_config cfg = { .chain = chain, .host = ram, .size = RAM / 2 };
    g_autoptr(GError) error = NULL;
    g_assert_null(snap_uffd_start(&cfg, &error));
    g_assert_error(error, SNAP_ERROR, SNAP_ERROR_INVALID);
    test_ram_free(ram, RAM, -1);
    snap_chain_free(chain);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    test_scenario_build(&scenario, RAM, false);
    g_test_add_func("/snapshot/uffd/block-sizes", test_block_sizes);
    g_test_add_func("/snapshot/uffd/memfd", test_memfd_ram);
    g_test_add_func("/snapshot/uffd/dev-userfaultfd", test_device_path);
    g_test_add_func("/snapshot/uffd/prefetch", test_prefetch);
    g_test_add_func("/snapshot/uffd/prefetch-races-faults", test_prefetch_races_faults);
    g_test_add_func("/snapshot/uffd/fill-all", test_fill_all);
    g_test_add_func("/snapshot/uffd/corrupt-block", test_corrupt_block);
    g_test_add_func("/snapshot/uffd/corrupt-block-fill-all", test_corrupt_block_fill_all);
    g_test_add_func("/snapshot/uffd/zero-runs-unregistered", test_zero_runs_unregistered);
    g_test_add_func("/snapshot/uffd/readahead-in-order", test_readahead_in_order);
    g_test_add_func("/snapshot/uffd/readahead-around-a-jump", test_readahead_around_a_jump);
    g_test_add_func("/snapshot/uffd/readahead-bad-block", test_readahead_leaves_a_bad_block_to_its_fault);
    g_test_add_func("/snapshot/uffd/bad-config", test_bad_config);
    int rc = g_test_run();
    test_scenario_free(&scenario);
    return rc;
}
