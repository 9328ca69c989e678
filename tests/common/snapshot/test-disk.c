/* Disk layers (common/snapshot/disk.h, overlay.h) with only the library
 * linked: overlays sealed into disk layers, chains resolved from snapshot
 * directories and verified against the base image, refusals of damaged,
 * swapped and foreign files by name, the inner fold, and the fold into the
 * image with its redo after a crash. Expected contents come from a block
 * model kept here, not from the library. */
#include "snapshot/disk.h"
#include "snapshot/layer-write.h"
#include "snapshot/overlay.h"
#include "json/vjson.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK 4096u
#define BLOCKS 64u
#define CAPACITY ((uint64_t)BLOCKS * BLOCK + 512) /* a last, partial block */
#define NBLOCKS (BLOCKS + 1)
#define CONFIG_TEXT "{\"memory\": {\"size\": 262144}}\n"

struct fixture {
    char *root, *image;
    char *dirs[3];
    snap_id ids[3];
    struct snap_disk_identity base;
    unsigned model[3][NBLOCKS]; /* per snapshot: block seed, 0 = zero, ~0u = the image's */
};

static void fill_block(uint8_t *b, uint64_t block, unsigned seed)
{
    for (unsigned i = 0; i < BLOCK; i++)
        b[i] = seed ? (uint8_t)(block * 13 + seed * 7 + i % 253 + 1) : 0;
}

static char *path_in(struct fixture *f, const char *name)
{
    return g_build_filename(f->root, name, NULL);
}

static void write_block(struct snap_overlay *ov, uint64_t block, unsigned seed)
{
    uint8_t buf[BLOCK];
    fill_block(buf, block, seed);
    g_assert_cmpint(pwrite(ov->fd, buf, BLOCK, (off_t)snap_overlay_block_offset(ov, block)), ==, BLOCK);
    snap_overlay_mark(ov, block, 1);
}

static void write_state(const char *dir, const snap_id *memory_id, const struct snap_disk_record *r)
{
    struct snap_memory_record memory = { .layer = SNAP_DIR_LAYER_FILE, .id = *memory_id, .ram_size = 1 << 20 };
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    snap_state_add_record(b, &memory);
    vjson_object_end(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    JsonObject *disk = json_object_new();
    json_object_set_string_member(disk, "id", "vda");
    json_object_set_string_member(disk, "capacity", "0x201");
    snap_disk_record_set(disk, r);
    JsonArray *disks = json_array_new();
    json_array_add_object_element(disks, disk);
    JsonObject *devices = json_object_new();
    json_object_set_array_member(devices, "disks", disks);
    json_object_set_object_member(json_node_get_object(root), "devices", devices);
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_dir_write_state(dir, root, CONFIG_TEXT, &error));
    g_assert_no_error(error);
}

/* Snapshot i: overlay ov (over snapshot i-1's layer) sealed into dirs[i]. */
static void take(struct fixture *f, unsigned i, struct snap_overlay *ov)
{
    f->dirs[i] = path_in(f, (const char *[]){ "s1", "s2", "s3" }[i]);
    g_assert_cmpint(g_mkdir(f->dirs[i], 0700), ==, 0);
    g_autofree char *name = snap_disk_layer_name("vda");
    g_autofree char *layer = g_build_filename(f->dirs[i], name, NULL);
    snap_id_random(&f->ids[i]);
    struct snap_disk_record r = { .file = name, .id = f->ids[i], .base_path = f->image, .base = f->base };
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_overlay_seal(ov, layer, &f->ids[i], &r.blocks, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(r.blocks, ==, snap_overlay_count(ov));
    g_autofree char *url = i ? snap_dir_url(f->dirs[i - 1]) : NULL;
    if (i) {
        r.parent = f->ids[i - 1];
        r.parent_url = url;
    }
    snap_id memory_id;
    snap_id_random(&memory_id);
    write_state(f->dirs[i], &memory_id, &r);
}

static struct snap_overlay *new_overlay(struct fixture *f, const char *name, const snap_id *lower)
{
    g_autofree char *path = path_in(f, name);
    g_autoptr(GError) error = NULL;
    struct snap_overlay *ov = snap_overlay_create(path, CAPACITY, lower, &f->base, &error);
    g_assert_no_error(error);
    return ov;
}

/* The image: every block seed 1 (the partial one too); s1 empty; s2 blocks
 * 2-5 seed 2 and block 7 zero; s3 block 3 seed 3 and the last block seed 4. */
static void fixture_init(struct fixture *f)
{
    g_autoptr(GError) error = NULL;
    memset(f, 0, sizeof *f);
    f->root = g_dir_make_tmp("vsnap-disk-XXXXXX", &error);
    f->image = path_in(f, "image.raw");
    int fd = open(f->image, O_RDWR | O_CREAT, 0600);
    for (uint64_t b = 0; b < NBLOCKS; b++) {
        uint8_t buf[BLOCK];
        fill_block(buf, b, 1);
        g_assert_cmpint(pwrite(fd, buf, b < BLOCKS ? BLOCK : 512, (off_t)(b * BLOCK)), >, 0);
    }
    close(fd);
    g_assert_true(snap_disk_identity_read(f->image, &f->base, &error));
    for (unsigned s = 0; s < 3; s++)
        for (unsigned b = 0; b < NBLOCKS; b++)
            f->model[s][b] = ~0u;
    g_autoptr(snap_overlay) o0 = new_overlay(f, "o0", NULL);
    take(f, 0, o0);
    g_autoptr(snap_overlay) o1 = new_overlay(f, "o1", &f->ids[0]);
    for (unsigned b = 2; b <= 5; b++)
        write_block(o1, b, 2);
    write_block(o1, 7, 0);
    take(f, 1, o1);
    memcpy(f->model[1], f->model[0], sizeof f->model[0]);
    for (unsigned b = 2; b <= 5; b++)
        f->model[1][b] = 2;
    f->model[1][7] = 0;
    g_autoptr(snap_overlay) o2 = new_overlay(f, "o2", &f->ids[1]);
    write_block(o2, 3, 3);
    write_block(o2, BLOCKS, 4);
    take(f, 2, o2);
    memcpy(f->model[2], f->model[1], sizeof f->model[1]);
    f->model[2][3] = 3;
    f->model[2][BLOCKS] = 4;
}

static void fixture_clear(struct fixture *f)
{
    g_autoptr(GError) error = NULL;
    g_assert_true(snap_dir_remove(f->root, &error));
    g_free(f->root);
    g_free(f->image);
    for (unsigned i = 0; i < 3; i++)
        g_free(f->dirs[i]);
}

static struct snap_disk_chain *chain_of(const char *dir, GError **error)
{
    g_autoptr(snap_dir) d = snap_dir_read(dir, error);
    g_assert_nonnull(d);
    bool present = false;
    struct snap_disk_chain *c = snap_dir_disk_chain(d, "vda", &present, error);
    g_assert_true(c || !present || (error && *error));
    return c;
}

static char *copy_image(struct fixture *f, const char *name)
{
    char *copy = path_in(f, name);
    g_autofree char *data = NULL;
    gsize len;
    g_assert_true(g_file_get_contents(f->image, &data, &len, NULL));
    g_assert_true(g_file_set_contents(copy, data, (gssize)len, NULL));
    return copy;
}

/* The image file holds model (~0u: the base image's seed 1). */
static void assert_holds(const char *image, const unsigned *model)
{
    g_autofree char *data = NULL;
    gsize len;
    g_assert_true(g_file_get_contents(image, &data, &len, NULL));
    g_assert_cmpuint(len, ==, CAPACITY);
    for (uint64_t b = 0; b < NBLOCKS; b++) {
        uint8_t want[BLOCK];
        fill_block(want, b, model[b] == ~0u ? 1 : model[b]);
        size_t n = b < BLOCKS ? BLOCK : 512;
        if (memcmp(data + b * BLOCK, want, n) != 0)
            g_error("%s: block %" G_GUINT64_FORMAT " differs from the model (seed %u)", image, b, model[b]);
    }
}

static void assert_error_names(GError *error, const char *needle, const char *path)
{
    g_assert_nonnull(error);
    g_test_message("refused: %s", error->message);
    if (!strstr(error->message, needle) || (path && !strstr(error->message, path)))
        g_error("expected \"%s\" naming %s in: %s", needle, path ? path : "-", error->message);
}

static void test_resolve_and_fold_into_image(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_disk_chain) c = chain_of(f.dirs[2], &error);
    g_assert_no_error(error);
    g_assert_cmpuint(c->nlayers, ==, 3);
    g_assert_true(snap_id_equal(&c->top_id, &f.ids[2]));
    g_assert_cmpstr(c->base_path, ==, f.image);
    g_assert_true(g_str_has_prefix(c->paths[0], f.dirs[0]) && g_str_has_prefix(c->paths[2], f.dirs[2]));
    g_assert_true(snap_disk_chain_verify(c, f.image, CAPACITY, &error));
    g_assert_no_error(error);
    for (unsigned s = 0; s < 3; s++) {
        g_autoptr(snap_disk_chain) cs = chain_of(f.dirs[s], &error);
        g_autofree char *name = g_strdup_printf("fold%u.raw", s);
        g_autofree char *copy = copy_image(&f, name);
        g_assert_true(snap_disk_fold_into_image(copy, (const char *const *)cs->paths, cs->nlayers, NULL, NULL, &error));
        g_assert_no_error(error);
        assert_holds(copy, f.model[s]);
        g_autofree char *intent = g_strconcat(copy, SNAP_DISK_FOLD_SUFFIX, NULL);
        g_assert_false(g_file_test(intent, G_FILE_TEST_EXISTS));
    }
    /* With an overlay on top, and the base identity checked. */
    g_autoptr(snap_overlay) ov = new_overlay(&f, "o3", &f.ids[2]);
    write_block(ov, 0, 9);
    g_assert_cmpint(snap_overlay_sync(ov), ==, 0);
    unsigned model[NBLOCKS];
    memcpy(model, f.model[2], sizeof model);
    model[0] = 9;
    g_assert_true(snap_disk_fold_into_image(f.image, (const char *const *)c->paths, c->nlayers, ov->path, &f.base,
                                            &error));
    g_assert_no_error(error);
    assert_holds(f.image, model);
    /* The image changed: the chain is refused naming it. */
    g_assert_false(snap_disk_chain_verify(c, f.image, CAPACITY, &error));
    assert_error_names(error, "changed since it became the base", f.image);
    fixture_clear(&f);
}

static void test_image_changed_refused(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_disk_chain) c = chain_of(f.dirs[2], &error);
    /* Same bytes, another mtime (touched). */
    struct timespec times[2] = { { 0, UTIME_OMIT }, { 12345, 0 } };
    g_assert_cmpint(utimensat(AT_FDCWD, f.image, times, 0), ==, 0);
    g_assert_false(snap_disk_chain_verify(c, f.image, CAPACITY, &error));
    assert_error_names(error, "modification time", f.image);
    g_clear_error(&error);
    /* The content of its first MiB, with the mtime put back. */
    int fd = open(f.image, O_WRONLY);
    g_assert_cmpint(pwrite(fd, "x", 1, 100), ==, 1);
    close(fd);
    struct timespec back[2] = { { 0, UTIME_OMIT }, { (time_t)(f.base.mtime_ns / 1000000000u),
                                                      (long)(f.base.mtime_ns % 1000000000u) } };
    g_assert_cmpint(utimensat(AT_FDCWD, f.image, back, 0), ==, 0);
    g_assert_false(snap_disk_chain_verify(c, f.image, CAPACITY, &error));
    assert_error_names(error, "first or last MiB", f.image);
    g_clear_error(&error);
    /* Another size. */
    g_assert_cmpint(truncate(f.image, CAPACITY + 512), ==, 0);
    g_assert_false(snap_disk_chain_verify(c, f.image, CAPACITY, &error));
    assert_error_names(error, "its size", f.image);
    fixture_clear(&f);
}

static void test_damaged_layers_refused(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_disk_chain) c = chain_of(f.dirs[2], &error);
    /* A layer whose size is not the disk's (another disk's). */
    g_assert_false(snap_disk_chain_verify(c, f.image, CAPACITY + 8192, &error));
    assert_error_names(error, "is it another disk's layer?", c->paths[0]);
    g_clear_error(&error);
    /* Truncated. */
    g_autofree char *saved = NULL;
    gsize len;
    g_assert_true(g_file_get_contents(c->paths[1], &saved, &len, NULL));
    g_assert_cmpint(truncate(c->paths[1], (off_t)len - 3), ==, 0);
    g_assert_false(snap_disk_chain_verify(c, f.image, CAPACITY, &error));
    assert_error_names(error, "truncated", c->paths[1]);
    g_clear_error(&error);
    /* A corrupt header. */
    g_assert_true(g_file_set_contents(c->paths[1], saved, (gssize)len, NULL));
    int fd = open(c->paths[1], O_WRONLY);
    g_assert_cmpint(pwrite(fd, "\x7f", 1, 30), ==, 1);
    close(fd);
    g_assert_false(snap_disk_chain_verify(c, f.image, CAPACITY, &error));
    assert_error_names(error, "checksum", c->paths[1]);
    g_clear_error(&error);
    /* Swapped: s3's layer file replaced by s2's (an older layer of the same disk). */
    g_assert_true(g_file_set_contents(c->paths[1], saved, (gssize)len, NULL));
    g_autofree char *top = NULL;
    gsize top_len;
    g_assert_true(g_file_get_contents(c->paths[2], &top, &top_len, NULL));
    g_assert_true(g_file_set_contents(c->paths[2], saved, (gssize)len, NULL));
    g_assert_false(snap_disk_chain_verify(c, f.image, CAPACITY, &error));
    assert_error_names(error, "wrong parent", c->paths[2]);
    g_clear_error(&error);
    /* Swapped for another disk's first layer (another size). */
    g_autofree char *other = path_in(&f, "other.layer");
    snap_id oid;
    snap_id_random(&oid);
    struct snap_disk_identity ob = f.base;
    g_autofree char *opath = path_in(&f, "o-other");
    g_autoptr(snap_overlay) oo = snap_overlay_create(opath, CAPACITY * 2, NULL, &ob, &error);
    g_assert_true(snap_overlay_seal(oo, other, &oid, NULL, &error));
    g_autofree char *odata = NULL;
    gsize olen;
    g_assert_true(g_file_get_contents(other, &odata, &olen, NULL));
    g_assert_true(g_file_set_contents(c->paths[0], odata, (gssize)olen, NULL));
    g_assert_true(g_file_set_contents(c->paths[2], top, (gssize)top_len, NULL));
    g_assert_false(snap_disk_chain_verify(c, f.image, CAPACITY, &error));
    assert_error_names(error, "snapshot layer", NULL);
    g_assert_true(strstr(error->message, c->paths[0]) || strstr(error->message, c->paths[1]));
    g_clear_error(&error);
    /* A memory layer where a disk layer belongs. */
    g_autofree char *memory = path_in(&f, "memory-ranges");
    struct snap_layer_writer *w = snap_layer_writer_new(memory, snap_disk_layer_size(CAPACITY), &oid, NULL, &error);
    g_assert_true(snap_layer_writer_commit(w, &error));
    const char *mem_paths[] = { memory };
    g_assert_null(snap_disk_chain_open(mem_paths, 1, &error));
    assert_error_names(error, "is a memory layer, not a disk layer", memory);
    g_clear_error(&error);
    const char *mixed[] = { c->paths[1], memory };
    g_assert_null(snap_disk_chain_open(mixed, 2, &error));
    assert_error_names(error, "is a memory layer in a chain of disk layers", memory);
    fixture_clear(&f);
}

static void test_wrong_parent_refused(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autoptr(GError) error = NULL;
    /* s3's record names s1's directory as where its parent is. */
    g_autoptr(snap_dir) d = snap_dir_read(f.dirs[2], &error);
    struct snap_disk_record r;
    bool present;
    g_assert_true(snap_dir_disk_record(d, "vda", &r, &present, &error) && present);
    g_free(r.parent_url);
    r.parent_url = snap_dir_url(f.dirs[0]);
    snap_id memory_id;
    snap_id_random(&memory_id);
    g_autofree char *state = g_build_filename(f.dirs[2], SNAP_DIR_STATE_FILE, NULL);
    g_autofree char *config = g_build_filename(f.dirs[2], SNAP_DIR_CONFIG_FILE, NULL);
    g_unlink(state);
    g_unlink(config);
    write_state(f.dirs[2], &memory_id, &r);
    snap_disk_record_clear(&r);
    g_autoptr(snap_disk_chain) c = chain_of(f.dirs[2], &error);
    g_assert_null(c);
    assert_error_names(error, "wrong parent", f.dirs[0]);
    g_clear_error(&error);
    /* A bad record: parent without parent_url. */
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(state, &text, NULL, NULL));
    g_autoptr(JsonNode) root = json_from_string(text, &error);
    JsonObject *disk = json_array_get_object_element(
        json_object_get_array_member(json_object_get_object_member(json_node_get_object(root), "devices"), "disks"), 0);
    json_object_set_null_member(json_object_get_object_member(disk, "layer"), "parent_url");
    json_object_remove_member(json_node_get_object(root), "config");
    g_unlink(state);
    g_unlink(config);
    g_assert_true(snap_dir_write_state(f.dirs[2], root, CONFIG_TEXT, &error));
    g_autoptr(snap_dir) bad = snap_dir_read(f.dirs[2], &error);
    g_assert_no_error(error);
    g_assert_false(snap_dir_disk_record(bad, "vda", &r, &present, &error));
    assert_error_names(error, "layer.parent and layer.parent_url", f.dirs[2]);
    fixture_clear(&f);
}

static void test_overlay_refusals(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autoptr(GError) error = NULL;
    g_autofree char *path = path_in(&f, "bad.overlay");
    g_autoptr(snap_overlay) ov = snap_overlay_create(path, CAPACITY, &f.ids[2], &f.base, &error);
    write_block(ov, BLOCKS, 5);
    g_assert_cmpint(snap_overlay_sync(ov), ==, 0);
    uint64_t bitmap = ov->hdr.bitmap_offset, data_end = snap_overlay_block_offset(ov, BLOCKS) + BLOCK;
    g_clear_pointer(&ov, snap_overlay_close);
    g_autoptr(snap_overlay) good = snap_overlay_open(path, false, &error);
    g_assert_no_error(error);
    g_assert_true(snap_overlay_has(good, BLOCKS) && !snap_overlay_has(good, 0));
    g_assert_cmpuint(snap_overlay_count(good), ==, 1);
    g_autofree char *saved = NULL;
    gsize len;
    g_assert_true(g_file_get_contents(path, &saved, &len, NULL));
    g_assert_cmpuint(len, ==, data_end);
    struct { uint64_t off; const char *bytes; size_t n; const char *needle; } cases[] = {
        { 0, "X", 1, "bad magic" },
        { 8, "\x02", 1, "format version 2" },
        { 24, "\x01", 1, "header checksum" },
        { bitmap + 8, "\x04", 1, "beyond the disk's 65 blocks" }, /* bit 66 */
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_assert_true(g_file_set_contents(path, saved, (gssize)len, NULL));
        int fd = open(path, O_WRONLY);
        g_assert_cmpint(pwrite(fd, cases[i].bytes, cases[i].n, (off_t)cases[i].off), ==, (ssize_t)cases[i].n);
        close(fd);
        g_assert_null(snap_overlay_open(path, false, &error));
        assert_error_names(error, cases[i].needle, path);
        g_clear_error(&error);
    }
    /* The bitmap names a block the file does not reach. */
    g_assert_true(g_file_set_contents(path, saved, (gssize)len, NULL));
    g_assert_cmpint(truncate(path, (off_t)(data_end - 1)), ==, 0);
    g_assert_null(snap_overlay_open(path, false, &error));
    assert_error_names(error, "truncated", path);
    g_clear_error(&error);
    g_assert_cmpint(truncate(path, 100), ==, 0);
    g_assert_null(snap_overlay_open(path, false, &error));
    assert_error_names(error, "smaller than a header", path);
    g_clear_error(&error);
    /* An overlay made on another layer is not folded over this chain. */
    g_assert_true(g_file_set_contents(path, saved, (gssize)len, NULL));
    g_autoptr(snap_disk_chain) c = chain_of(f.dirs[1], &error);
    g_assert_false(snap_disk_fold_into_image(f.image, (const char *const *)c->paths, c->nlayers, good->path, &f.base,
                                             &error));
    assert_error_names(error, "was not made on the chain's top layer", good->path);
    fixture_clear(&f);
}

static void test_inner_fold(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autoptr(GError) error = NULL;
    /* Delete s2: its disk layer goes into s3's, s3 then names s1. Twice: idempotent. */
    for (int round = 0; round < 2; round++) {
        g_assert_true(snap_dir_fold_disks_into_child(f.dirs[1], f.dirs[2], &error));
        g_assert_no_error(error);
    }
    g_autoptr(snap_disk_chain) c = chain_of(f.dirs[2], &error);
    g_assert_no_error(error);
    g_assert_cmpuint(c->nlayers, ==, 2);
    g_assert_true(g_str_has_prefix(c->paths[0], f.dirs[0]));
    g_assert_true(snap_disk_chain_verify(c, f.image, CAPACITY, &error));
    g_assert_no_error(error);
    g_assert_true(snap_dir_remove(f.dirs[1], &error));
    g_autofree char *copy = copy_image(&f, "folded.raw");
    g_assert_true(snap_disk_fold_into_image(copy, (const char *const *)c->paths, c->nlayers, NULL, NULL, &error));
    assert_holds(copy, f.model[2]);
    /* And the first layer into its child: s3 then stands alone on the image. */
    g_assert_true(snap_dir_fold_disks_into_child(f.dirs[0], f.dirs[2], &error));
    g_assert_no_error(error);
    g_autoptr(snap_disk_chain) alone = chain_of(f.dirs[2], &error);
    g_assert_cmpuint(alone->nlayers, ==, 1);
    g_assert_true(snap_disk_chain_verify(alone, f.image, CAPACITY, &error));
    g_autofree char *copy2 = copy_image(&f, "folded2.raw");
    g_assert_true(snap_disk_fold_into_image(copy2, (const char *const *)alone->paths, 1, NULL, NULL, &error));
    assert_holds(copy2, f.model[2]); /* block 7's zero survived the fold into a first layer */
    fixture_clear(&f);
}

static void test_fold_resumed_after_crash(void)
{
    struct fixture f;
    fixture_init(&f);
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_disk_chain) c = chain_of(f.dirs[2], &error);
    /* A crash after the intent and some of the writes: the intent as the fold
     * writes it, garbage in a block the fold writes and one it does not. */
    g_autofree char *copy = copy_image(&f, "crashed.raw");
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_int(b, "version", 1);
    vjson_str(b, "image", copy);
    vjson_array_begin(b, "layers");
    for (unsigned i = 0; i < c->nlayers; i++)
        vjson_str(b, NULL, c->paths[i]);
    vjson_array_end(b);
    vjson_null(b, "overlay");
    vjson_object_end(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *text = json_to_string(root, TRUE);
    g_autofree char *intent = g_strconcat(copy, SNAP_DISK_FOLD_SUFFIX, NULL);
    g_assert_true(g_file_set_contents(intent, text, -1, NULL));
    int fd = open(copy, O_WRONLY);
    g_assert_cmpint(pwrite(fd, "garbage", 7, 3 * BLOCK + 10), ==, 7);
    close(fd);
    bool resumed = false;
    g_assert_true(snap_disk_fold_resume(copy, &resumed, &error));
    g_assert_no_error(error);
    g_assert_true(resumed);
    assert_holds(copy, f.model[2]);
    g_assert_false(g_file_test(intent, G_FILE_TEST_EXISTS));
    g_assert_true(snap_disk_fold_resume(copy, &resumed, &error) && !resumed);
    /* An intent for another image is refused, not applied. */
    g_assert_true(g_file_set_contents(intent, text, -1, NULL));
    g_autofree char *other = copy_image(&f, "other.raw");
    g_autofree char *other_intent = g_strconcat(other, SNAP_DISK_FOLD_SUFFIX, NULL);
    g_assert_cmpint(g_rename(intent, other_intent), ==, 0);
    g_assert_false(snap_disk_fold_resume(other, &resumed, &error));
    assert_error_names(error, "is not one for", other);
    g_clear_error(&error);
    /* Malformed intents: refused, never applied or crashed on. */
    static const char *const bad[] = { "[]", "{\"version\": 1, \"image\": 5, \"layers\": [], \"overlay\": null}",
                                       "{\"version\": \"1\"}", "not json", "" };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_true(g_file_set_contents(other_intent, bad[i], -1, NULL));
        g_assert_false(snap_disk_fold_resume(other, &resumed, &error));
        assert_error_names(error, "intent", other_intent);
        g_clear_error(&error);
    }
    fixture_clear(&f);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/snapshot/disk/resolve-and-fold-into-image", test_resolve_and_fold_into_image);
    g_test_add_func("/snapshot/disk/image-changed-refused", test_image_changed_refused);
    g_test_add_func("/snapshot/disk/damaged-layers-refused", test_damaged_layers_refused);
    g_test_add_func("/snapshot/disk/wrong-parent-refused", test_wrong_parent_refused);
    g_test_add_func("/snapshot/disk/overlay-refusals", test_overlay_refusals);
    g_test_add_func("/snapshot/disk/inner-fold", test_inner_fold);
    g_test_add_func("/snapshot/disk/fold-resumed-after-crash", test_fold_resumed_after_crash);
    return g_test_run();
}
