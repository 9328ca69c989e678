/* The seek table and single frames of common/store/seekable.c, the claims
 * a manifest makes about them (object-table.c), size parsing and the
 * configuration's floor and deadline: what the end-to-end store test cannot
 * aim at precisely. */
#include "store/object.h"
#include "store/seekable.h"
#include "store/store.h"

#include <string.h>
#include <unistd.h>
#include <zstd.h>

static void test_table_round_trip(void)
{
    struct seekable_frame frames[3] = {
        { .size = 100, .data_size = 4096, .checksum = 0x11111111 },
        { .size = 200, .data_size = 4096, .checksum = 0x22222222 },
        { .size = 50, .data_size = 10, .checksum = 0x33333333 },
    };
    g_autoptr(GBytes) table = seekable_table_encode(frames, 3);
    gsize len;
    const guint8 *p = g_bytes_get_data(table, &len);
    g_assert_cmpuint(len, ==, seekable_table_size(3));
    struct seekable_table t;
    g_autoptr(GError) error = NULL;
    g_assert_true(seekable_table_parse(p, len, 350 + len, "x", &t, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(t.nframes, ==, 3);
    g_assert_cmpuint(t.frames[2].offset, ==, 300);
    g_assert_cmpuint(t.frames[2].data_offset, ==, 8192);
    g_assert_cmpuint(t.frames[1].checksum, ==, 0x22222222);
    g_assert_cmpuint(t.data_size, ==, 8202);
    seekable_table_clear(&t);
    /* frames that do not fill the object exactly */
    g_assert_false(seekable_table_parse(p, len, 351 + len, "x", &t, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
}

static void test_table_damage(void)
{
    struct seekable_frame f = { .size = 10, .data_size = 20, .checksum = 1 };
    g_autoptr(GBytes) table = seekable_table_encode(&f, 1);
    gsize len;
    const guint8 *orig = g_bytes_get_data(table, &len);
    /* every single flipped byte of the frame header, the compressed size and
     * the footer is refused; the decompressed size and the checksum (bytes
     * 12-19) are checked against the manifest and the frame instead */
    for (gsize i = 0; i < len; i++) {
        if (i >= 12 && i < 20)
            continue;
        g_autofree guint8 *p = g_memdup2(orig, len);
        p[i] ^= 0x40;
        struct seekable_table t;
        g_autoptr(GError) error = NULL;
        g_assert_false(seekable_table_parse(p, len, 10 + len, "x", &t, &error));
        g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
    }
}

/* Parse a table of frames whose compressed sizes fill 1000 + table bytes. */
static bool parse_frames(struct seekable_frame *frames, guint n, GError **error)
{
    guint64 body = 0;
    for (guint i = 0; i < n; i++)
        body += frames[i].size;
    g_autoptr(GBytes) table = seekable_table_encode(frames, n);
    gsize len;
    const guint8 *p = g_bytes_get_data(table, &len);
    struct seekable_table t;
    bool ok = seekable_table_parse(p, len, body + len, "x", &t, error);
    if (ok)
        seekable_table_clear(&t);
    return ok;
}

/* What a table may claim: frames of at most 64 MiB (no buffer is sized by
 * a larger claim), compressed within zstd's bound for that, every frame
 * but the last at least 4 KiB and the last not empty. */
static void test_table_bounds(void)
{
    struct seekable_frame most[2] = { { .size = 100, .data_size = SEEKABLE_MAX_FRAME_DATA },
                                      { .size = 100, .data_size = 1 } };
    g_autoptr(GError) error = NULL;
    g_assert_true(parse_frames(most, 2, &error));
    g_assert_no_error(error);
    struct seekable_frame bomb = { .size = 100, .data_size = SEEKABLE_MAX_FRAME_DATA + 1 };
    g_assert_false(parse_frames(&bomb, 1, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
    g_assert_nonnull(strstr(error->message, "more than a frame may hold (64 MiB)"));
    g_clear_error(&error);
    struct seekable_frame fat = { .size = SEEKABLE_MAX_FRAME_SIZE + 1, .data_size = 4096 };
    g_assert_false(parse_frames(&fat, 1, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
    g_clear_error(&error);
    struct seekable_frame thin[2] = { { .size = 10, .data_size = SEEKABLE_MIN_FRAME_DATA - 1 },
                                      { .size = 10, .data_size = 4096 } };
    g_assert_false(parse_frames(thin, 2, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
    g_clear_error(&error);
    struct seekable_frame empty_last[2] = { { .size = 10, .data_size = 4096 }, { .size = 10, .data_size = 0 } };
    g_assert_false(parse_frames(empty_last, 2, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
    g_assert_cmpuint(seekable_max_frames(0), ==, 0);
    g_assert_cmpuint(seekable_max_frames(1), ==, 1);
    g_assert_cmpuint(seekable_max_frames(4096), ==, 1);
    g_assert_cmpuint(seekable_max_frames(4097), ==, 2);
}

/* A manifest's claims are checked before a table is fetched or parsed:
 * more frames than the data can hold (300 million for 1 MiB), a table
 * larger than the object. */
static void test_claims(void)
{
    g_autoptr(GError) error = NULL;
    struct seekable_table t;
    const char *sum = "0000000000000000000000000000000000000000000000000000000000000000";
    g_assert_false(object_check_table(NULL, 0, "x", 1ull << 40, 1u << 20, 300000000, sum, &t, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
    g_assert_nonnull(strstr(error->message, "300000000 frames for 1048576 bytes (at most 256"));
    g_clear_error(&error);
    g_assert_false(object_check_table(NULL, 0, "x", 100, 1u << 20, 256, sum, &t, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
}

static void test_frame(void)
{
    guint8 data[8192];
    for (gsize i = 0; i < sizeof(data); i++)
        data[i] = (guint8)(i * 7 / 13);
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_DCtx *d = ZSTD_createDCtx();
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) frame = seekable_compress_frame(c, data, sizeof(data), 3, &error);
    g_assert_no_error(error);
    gsize len;
    const guint8 *p = g_bytes_get_data(frame, &len);
    struct seekable_frame f = { .size = (guint32)len, .data_size = sizeof(data),
                                .checksum = seekable_frame_checksum(frame) };
    guint8 out[8192];
    g_assert_true(seekable_decompress_frame(d, &f, 0, p, out, "x", &error));
    g_assert_cmpmem(out, sizeof(out), data, sizeof(data));
    /* a table checksum that is not the frame's */
    struct seekable_frame wrong = f;
    wrong.checksum ^= 1;
    g_assert_false(seekable_decompress_frame(d, &wrong, 0, p, out, "x", &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
    g_clear_error(&error);
    /* a flipped byte inside the compressed data: zstd's checksum (or its
     * decoder) refuses it */
    g_autofree guint8 *bad = g_memdup2(p, len);
    bad[len / 2] ^= 0x01;
    g_assert_false(seekable_decompress_frame(d, &f, 0, bad, out, "x", &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
    ZSTD_freeCCtx(c);
    ZSTD_freeDCtx(d);
}

static void test_sizes(void)
{
    static const struct {
        const char *text;
        guint64 value;
    } good[] = { { "0", 0 }, { "4096", 4096 }, { "64K", 65536 }, { "1.5G", 3ull << 29 },
                 { "2T", 2ull << 40 }, { "8MiB", 8u << 20 }, { "16m", 16u << 20 } };
    for (guint i = 0; i < G_N_ELEMENTS(good); i++) {
        guint64 v = 0;
        g_autoptr(GError) error = NULL;
        g_assert_true(store_parse_size(good[i].text, &v, &error));
        g_assert_cmpuint(v, ==, good[i].value);
    }
    static const char *const bad[] = { "", "K", "12X", "-1", "1KK", "1 G" };
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        guint64 v;
        g_autoptr(GError) error = NULL;
        g_assert_false(store_parse_size(bad[i], &v, &error));
        g_assert_error(error, STORE_ERROR, STORE_ERROR_INVALID);
    }
}

static bool load_options(const char *text, struct store_options *o, GError **error)
{
    g_autofree char *path = NULL;
    int fd = g_file_open_tmp("store-options-XXXXXX", &path, NULL);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(write(fd, text, strlen(text)), ==, (gssize)strlen(text));
    close(fd);
    store_options_init(o);
    bool ok = store_options_load(o, path, NULL, NULL, NULL, error);
    unlink(path);
    return ok;
}

/* Every transfer has a floor and every operation a deadline by default;
 * the configuration sets them within bounds. */
static void test_options(void)
{
    struct store_options o;
    store_options_init(&o);
    g_assert_cmpuint(o.min_rate, ==, 4096);
    g_assert_cmpuint(o.min_rate_window_s, ==, 30);
    g_assert_cmpuint(o.timeout_s, ==, 3600);
    g_autoptr(GError) error = NULL;
    g_assert_true(load_options("[store]\nmin_rate = 1K\nmin_rate_window = 2s\ntimeout = 0\n", &o, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(o.min_rate, ==, 1024);
    g_assert_cmpuint(o.min_rate_window_s, ==, 2);
    g_assert_cmpuint(o.timeout_s, ==, 0);
    static const char *const bad[] = { "[store]\nmin_rate = 0\n", "[store]\nmin_rate_window = 0\n",
                                       "[store]\nmin_rate_window = 3601\n", "[store]\nmin_rate = fast\n" };
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_clear_error(&error);
        g_assert_false(load_options(bad[i], &o, &error));
        g_assert_error(error, STORE_ERROR, STORE_ERROR_INVALID);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/store/seek-table/round-trip", test_table_round_trip);
    g_test_add_func("/store/seek-table/damage", test_table_damage);
    g_test_add_func("/store/seek-table/bounds", test_table_bounds);
    g_test_add_func("/store/seek-table/claims", test_claims);
    g_test_add_func("/store/frame", test_frame);
    g_test_add_func("/store/sizes", test_sizes);
    g_test_add_func("/store/options", test_options);
    return g_test_run();
}
