/* Disks on snapshot layers (block/blk-chain.c, blk-overlay.c) on files of
 * their own, against a model of the disk kept in memory here: scattered,
 * unaligned and partial-block writes and reads through the overlay and the
 * chain; the overlay reopened after a flush, sealed into a layer and the disk
 * continued on the longer chain; refusals of an overlay that belongs
 * elsewhere; a corrupt layer block read as an I/O error. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <string.h>
#include <unistd.h>

#include "block/blk-backend.h"
#include "snapshot/disk.h"
#include "snapshot/layer-write.h"
#include "snapshot/overlay.h"

#define CAPACITY ((1u << 20) + 1536u) /* 256 blocks and a partial one */
#define LAYER_SIZE ((1u << 20) + 4096u)

static char *dir;
static uint8_t model[CAPACITY];

static char *path_of(const char *name)
{
    return g_build_filename(dir, name, NULL);
}

static char *make_image(void)
{
    char *path = path_of("image.raw");
    for (size_t i = 0; i < CAPACITY; i++)
        model[i] = (uint8_t)(i * 7 + i / 4096 + 1);
    g_assert_true(g_file_set_contents(path, (const char *)model, CAPACITY, NULL));
    return path;
}

/* The first layer over the image: empty, no parent. */
static char *first_layer(snap_id *id)
{
    char *path = path_of("l1.layer");
    g_autoptr(GError) error = NULL;
    snap_id_random(id);
    struct snap_layer_writer *w = snap_disk_layer_writer_new(path, LAYER_SIZE, id, NULL, &error);
    g_assert_true(snap_layer_writer_commit(w, &error));
    return path;
}

static struct blk_backend *open_disk(const char *image, const char *const *layers, unsigned n, const char *overlay,
                                     GError **error)
{
    struct blk_chain_options c = { .image = image, .layers = layers, .nlayers = n };
    struct blk_backend *lower = blk_chain_open(&c, error);
    struct blk_overlay_options o = { .path = overlay, .image = image };
    return lower ? blk_overlay_open(&o, lower, error) : NULL;
}

/* Write len bytes at off, in up to three pieces of odd sizes. */
static void write_at(struct blk_backend *b, uint64_t off, size_t len, uint8_t seed)
{
    g_autofree uint8_t *buf = g_malloc(len);
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(seed + i * 3);
    size_t cut1 = len > 1000 ? 700 : len, cut2 = len > 3000 ? 2345 : len;
    struct iovec iov[3] = { { buf, cut1 }, { buf + cut1, cut2 - cut1 }, { buf + cut2, len - cut2 } };
    g_assert_cmpint(blk_backend_writev(b, off, iov, 3), ==, 0);
    memcpy(model + off, buf, len);
}

static void check_range(struct blk_backend *b, uint64_t off, size_t len)
{
    g_autofree uint8_t *buf = g_malloc(len);
    size_t cut = len > 1536 ? 1536 : len;
    struct iovec iov[2] = { { buf, cut }, { buf + cut, len - cut } };
    g_assert_cmpint(blk_backend_readv(b, off, iov, 2), ==, 0);
    for (size_t i = 0; i < len; i++)
        if (buf[i] != model[off + i])
            g_error("byte %" G_GUINT64_FORMAT " reads %u, the model holds %u", off + i, buf[i], model[off + i]);
}

static void check_all(struct blk_backend *b)
{
    for (uint64_t off = 0; off < CAPACITY; off += 64 * 1024)
        check_range(b, off, MIN(64 * 1024, CAPACITY - off));
}

static void random_writes(struct blk_backend *b, GRand *rand, unsigned count)
{
    for (unsigned k = 0; k < count; k++) {
        uint64_t sectors = CAPACITY / 512;
        uint64_t off = (uint64_t)g_rand_int_range(rand, 0, (gint32)sectors) * 512;
        size_t len = (size_t)g_rand_int_range(rand, 1, 24) * 512;
        len = (size_t)MIN(len, CAPACITY - off);
        write_at(b, off, len, (uint8_t)k);
        uint64_t roff = (uint64_t)g_rand_int_range(rand, 0, (gint32)sectors) * 512;
        check_range(b, roff, (size_t)MIN(8192, CAPACITY - roff));
    }
}

static void test_writes_flush_seal_continue(void)
{
    g_autofree char *image = make_image();
    snap_id l1_id;
    g_autofree char *l1 = first_layer(&l1_id);
    g_autofree char *ov1 = path_of("o1.overlay");
    g_autoptr(GError) error = NULL;
    const char *chain1[] = { l1 };
    struct blk_backend *b = open_disk(image, chain1, 1, ov1, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(b->capacity, ==, CAPACITY);
    check_all(b); /* the image shows through */
    g_autoptr(GRand) rand = g_rand_new_with_seed(7);
    random_writes(b, rand, 200);
    write_at(b, CAPACITY - 1536, 1536, 9); /* the partial last block */
    memset(model + 8192 + 512, 0, 8192);
    g_assert_cmpint(blk_backend_write_zeroes(b, 8192 + 512, 8192, true), ==, 0);
    check_all(b);
    g_assert_cmpint(blk_backend_flush(b), ==, 0);
    g_assert_cmpint(blk_backend_discard(b, 0, 4096), ==, 0); /* a hint: changes nothing */
    check_all(b);
    blk_backend_close(b);

    /* Reopened as it was left: the same disk. */
    b = open_disk(image, chain1, 1, ov1, &error);
    g_assert_no_error(error);
    check_all(b);
    /* Sealed into a layer on l1; the disk goes on over both with a new overlay. */
    struct snap_overlay *file = blk_overlay_file(b);
    g_assert_nonnull(file);
    g_autofree char *l2 = path_of("l2.layer");
    snap_id l2_id;
    snap_id_random(&l2_id);
    g_assert_true(snap_overlay_seal(file, l2, &l2_id, NULL, &error));
    blk_backend_close(b);
    g_autofree char *ov2 = path_of("o2.overlay");
    const char *chain2[] = { l1, l2 };
    b = open_disk(image, chain2, 2, ov2, &error);
    g_assert_no_error(error);
    check_all(b);
    random_writes(b, rand, 100);
    check_all(b);
    blk_backend_close(b);

    /* Refusals, each naming the overlay: made on another layer, over another image. */
    g_assert_null(open_disk(image, chain1, 1, ov2, &error));
    g_assert_true(strstr(error->message, ov2) && strstr(error->message, "was made on disk layer"));
    g_clear_error(&error);
    int fd = open(image, O_WRONLY);
    g_assert_cmpint(pwrite(fd, "x", 1, 10), ==, 1);
    close(fd);
    g_assert_null(open_disk(image, chain2, 2, ov2, &error));
    g_assert_true(strstr(error->message, ov2) && strstr(error->message, image));
    g_clear_error(&error);
    model[10] = 'x';

    /* A corrupt block of l2: its reads are I/O errors, the rest reads on. */
    g_autoptr(snap_layer) l = snap_layer_open(l2, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(l->hdr.page_count, >, 0);
    uint64_t first_block = l->runs[0].kind == 0 ? l->runs[0].first_page : 0;
    g_assert_cmpuint(l->runs[0].kind, ==, 0);
    g_clear_pointer(&l, snap_layer_close);
    fd = open(l2, O_WRONLY);
    g_assert_cmpint(pwrite(fd, "\x55\xaa", 2, SNAP_LAYER_DATA_OFFSET + 100), ==, 2);
    close(fd);
    struct blk_chain_options c = { .image = image, .layers = chain2, .nlayers = 2 };
    struct blk_backend *chain = blk_chain_open(&c, &error);
    g_assert_no_error(error);
    uint8_t buf[4096];
    struct iovec iov = { buf, sizeof buf };
    g_test_expect_message("vsnap-shim", G_LOG_LEVEL_WARNING, "*l2.layer: data block 0*fails its checksum*");
    g_assert_cmpint(blk_backend_readv(chain, first_block * 4096, &iov, 1), ==, -EIO);
    g_test_assert_expected_messages();
    g_assert_cmpint(blk_backend_writev(chain, 0, &iov, 1), ==, -EROFS);
    blk_backend_close(chain);
}

static void test_chain_refusals(void)
{
    g_autofree char *image = make_image();
    snap_id id;
    g_autofree char *l1 = first_layer(&id);
    g_autoptr(GError) error = NULL;
    /* A layer of another size (another disk's). */
    g_autofree char *other = path_of("other.layer");
    snap_id oid;
    snap_id_random(&oid);
    struct snap_layer_writer *w = snap_disk_layer_writer_new(other, LAYER_SIZE * 2, &oid, NULL, &error);
    g_assert_true(snap_layer_writer_commit(w, &error));
    const char *chain[] = { other };
    struct blk_chain_options c = { .image = image, .layers = chain, .nlayers = 1 };
    g_assert_null(blk_chain_open(&c, &error));
    g_assert_true(strstr(error->message, other) && strstr(error->message, "another disk's layer"));
    g_clear_error(&error);
    /* A memory layer. */
    g_autofree char *memory = path_of("memory-ranges");
    w = snap_layer_writer_new(memory, LAYER_SIZE, &oid, NULL, &error);
    g_assert_true(snap_layer_writer_commit(w, &error));
    chain[0] = memory;
    g_assert_null(blk_chain_open(&c, &error));
    g_assert_true(strstr(error->message, memory) && strstr(error->message, "not a disk layer"));
    g_clear_error(&error);
    /* A missing one. */
    chain[0] = "/nonexistent/l.layer";
    g_assert_null(blk_chain_open(&c, &error));
    g_assert_true(strstr(error->message, "/nonexistent/l.layer"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_autoptr(GError) error = NULL;
    dir = g_dir_make_tmp("vsnap-blk-overlay-XXXXXX", &error);
    g_assert_no_error(error);
    g_test_add_func("/blk-overlay/writes-flush-seal-continue", test_writes_flush_seal_continue);
    g_test_add_func("/blk-overlay/chain-refusals", test_chain_refusals);
    int rc = g_test_run();
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    if (system(cmd) != 0)
        g_warning("cannot remove %s", dir);
    return rc;
}
