/* Microbenchmark: restore-merge (dense image in /dev/shm, O(RAM)) against
 * on-demand setup (open chain + page index + userfaultfd registration, flat)
 * and against on-demand time until a 64 MiB working set is back, at 512 MiB and
 * 2 GiB of RAM (and on demand alone at 8 GiB). A base with a 64 MiB working set plus a 16 MiB diff; one JSON
 * object per line appended to the file named by argv[1]
 * (default bench/results.jsonl), and printed. */
#include "helpers.h"

#include "ram-snapshot/restore.h"
#include "ram-snapshot/uffd.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define WORKING_SET (64ull << 20)
#define DIFF_SET (16ull << 20)
#define REPEATS 3

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Working set at the start of RAM past 16 MiB, as the test guest fills it. */
static void make_chain(const char *dir, uint64_t ram_size, char *paths[2])
{
    uint8_t *ram = test_ram_new(ram_size, NULL);
    const uint64_t first = (16ull << 20) / TEST_PAGE;
    test_fill(ram, first, WORKING_SET / TEST_PAGE, 1);
    struct snap_ram r = { .host = ram, .size = ram_size, .fd = -1 };
    snap_id ids[2];
    snap_id_random(&ids[0]);
    snap_id_random(&ids[1]);
    paths[0] = g_build_filename(dir, "base", NULL);
    paths[1] = g_build_filename(dir, "diff", NULL);
    g_autoptr(GError) error = NULL;
    if (!snap_save_full(paths[0], &r, &ids[0], NULL, &error))
        g_error("%s", error->message);
    g_autofree uint64_t *dirty = test_bitmap_new(ram_size);
    test_fill(ram, first, DIFF_SET / TEST_PAGE, 2);
    test_bitmap_set(dirty, first, DIFF_SET / TEST_PAGE);
    if (!snap_save_diff(paths[1], &r, dirty, &ids[1], &ids[0], NULL, &error))
        g_error("%s", error->message);
    test_ram_free(ram, ram_size, -1);
}

static volatile uint64_t sink; /* keeps the reads from being optimised away */

static void touch_working_set(const uint8_t *ram)
{
    uint64_t sum = 0;
    const uint64_t first = 16ull << 20;
    for (uint64_t off = first; off < first + WORKING_SET; off += TEST_PAGE)
        sum += ((const volatile uint8_t *)ram)[off];
    sink = sum;
}

static double bench_merge(char *paths[2], double *to_ws)
{
    double t0 = now_s();
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_chain) c = snap_chain_open((const char *const *)paths, 2, 0, &error);
    struct snap_merged_ram m;
    if (!c || !snap_restore_merge(c, NULL, &m, &error))
        g_error("%s", error->message);
    double setup = now_s() - t0;
    touch_working_set(m.host);
    *to_ws = now_s() - t0;
    snap_merged_ram_release(&m);
    return setup;
}

static double bench_uffd(char *paths[2], uint64_t ram_size, uint64_t block, double *to_ws)
{
    uint8_t *ram = test_ram_new(ram_size, NULL);
    double t0 = now_s();
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_chain) c = snap_chain_open((const char *const *)paths, 2, 0, &error);
    struct snap_uffd_config cfg = { .chain = c, .host = ram, .size = ram_size, .block_size = block };
    struct snap_uffd *u = c ? snap_uffd_start(&cfg, &error) : NULL;
    if (!u)
        g_error("%s", error->message);
    double setup = now_s() - t0;
    touch_working_set(ram);
    *to_ws = now_s() - t0;
    snap_uffd_stop(u);
    test_ram_free(ram, ram_size, -1);
    return setup;
}

static void emit(FILE *out, const char *mode, uint64_t ram_size, uint64_t block, double setup,
                 double to_ws)
{
    char line[512];
    snprintf(line, sizeof line,
             "{\"bench\":\"layers\",\"mode\":\"%s\",\"ram_mib\":%" G_GUINT64_FORMAT
             ",\"working_set_mib\":64,\"block_kib\":%" G_GUINT64_FORMAT
             ",\"restore_setup_s\":%.6f,\"restore_to_working_set_s\":%.6f}",
             mode, ram_size >> 20, block >> 10, setup, to_ws);
    puts(line);
    if (out)
        fprintf(out, "%s\n", line);
}

static double best_of(double a, double b)
{
    return a < b ? a : b;
}

int main(int argc, char **argv)
{
    const char *out_path = argc > 1 ? argv[1] : "bench/results.jsonl";
    g_autofree char *out_dir = g_path_get_dirname(out_path);
    g_mkdir_with_parents(out_dir, 0755);
    FILE *out = fopen(out_path, "a");
    if (!out)
        g_warning("cannot append to %s: printing only", out_path);
    /* Smoke mode (the bench-smoke suite): one repeat at 512 MiB and 1 GiB, the
     * "8 GiB" on-demand step at 1 GiB too; the ratio line says so. */
    const bool smoke = g_strcmp0(g_getenv("VSNAP_BENCH_SMOKE"), "1") == 0;
    const int repeats = smoke ? 1 : REPEATS;
    const uint64_t sizes[] = { 512ull << 20, (smoke ? 1024ull : 2048ull) << 20 };
    double merge_setup[2], uffd_setup[2], merge_ws[2], uffd_ws[2];
    for (unsigned i = 0; i < 2; i++) {
        g_autofree char *dir = test_tmpdir();
        char *paths[2];
        make_chain(dir, sizes[i], paths);
        double ms = 1e9, mw = 1e9, us = 1e9, uw = 1e9;
        for (int r = 0; r < repeats; r++) {
            double w, s = bench_merge(paths, &w);
            ms = best_of(ms, s), mw = best_of(mw, w);
            s = bench_uffd(paths, sizes[i], 2 << 20, &w);
            us = best_of(us, s), uw = best_of(uw, w);
        }
        emit(out, "merge", sizes[i], 0, ms, mw);
        emit(out, "ondemand", sizes[i], 2 << 20, us, uw);
        merge_setup[i] = ms;
        uffd_setup[i] = us;
        merge_ws[i] = mw;
        uffd_ws[i] = uw;
        test_rmtree(dir);
        g_free(paths[0]);
        g_free(paths[1]);
    }
    /* on demand only at 8 GiB: a merge there writes 8 GiB to /dev/shm */
    const uint64_t big = smoke ? 1ull << 30 : 8ull << 30;
    g_autofree char *dir = test_tmpdir();
    char *paths[2];
    make_chain(dir, big, paths);
    double us8 = 1e9, uw8 = 1e9;
    for (int r = 0; r < repeats; r++) {
        double w, s = bench_uffd(paths, big, 2 << 20, &w);
        us8 = best_of(us8, s), uw8 = best_of(uw8, w);
    }
    emit(out, "ondemand", big, 2 << 20, us8, uw8);
    test_rmtree(dir);
    g_free(paths[0]);
    g_free(paths[1]);

    char line[512];
    snprintf(line, sizeof line,
             "{\"bench\":\"layers-ratios\",\"ondemand_8g_over_512m\":%.2f,"
             "\"to_working_set_ondemand_8g_over_512m\":%.2f,\"merge_2g_over_512m\":%.2f,"
             "\"ondemand_2g_over_512m\":%.2f,\"merge_2g_over_ondemand_2g\":%.1f,"
             "\"to_working_set_merge_2g_over_ondemand_2g\":%.1f%s}",
             us8 / uffd_setup[0], uw8 / uffd_ws[0],
             merge_setup[1] / merge_setup[0], uffd_setup[1] / uffd_setup[0],
             merge_setup[1] / uffd_setup[1], merge_ws[1] / uffd_ws[1],
             smoke ? ",\"smoke\":\"1 GiB for 2 and 8 GiB\"" : "");
    puts(line);
    if (out) {
        fprintf(out, "%s\n", line);
        fclose(out);
    }
    return 0;
}
