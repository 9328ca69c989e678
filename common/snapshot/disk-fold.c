/* Folding a disk's chain (and its overlay) back into its base image,
 * crash-safely (see disk.h): intent first, then idempotent in-place writes,
 * fsync, intent removed. */
#include "snapshot/disk.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "json/bounded-json.h"
#include "json/vjson.h"
#include "layer-internal.h"
#include "snapshot/image-lock.h"
#include "snapshot/mapped-read.h"
#include "snapshot/overlay.h"

#define INTENT_MAX_BYTES (4u << 20)
#define FOLD_RUN_PAGES 256u

static bool fold_io(GError **error, int err, const char *what, const char *path)
{
    g_set_error(error, SNAP_ERROR, err == ENOSPC || err == EDQUOT ? SNAP_ERROR_NO_SPACE : SNAP_ERROR_IO,
                "folding into disk image %s: %s: %s", path, what, g_strerror(err));
    return false;
}

static char *intent_path(const char *image)
{
    return g_strconcat(image, SNAP_DISK_FOLD_SUFFIX, NULL);
}

static char *intent_text(const char *image, const char *const *layers, unsigned n, const char *overlay)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_int(b, "version", 1);
    vjson_str(b, "image", image);
    vjson_array_begin(b, "layers");
    for (unsigned i = 0; i < n; i++)
        vjson_str(b, NULL, layers[i]);
    vjson_array_end(b);
    vjson_str(b, "overlay", overlay);
    vjson_object_end(b);
    return vjson_finish(b, true);
}

/* Write pages [page, page + n) of data (NULL: zeros) into the image, clipped to its size. */
static bool put_pages(int fd, uint64_t size, uint64_t page, uint64_t n, const uint8_t *data, const uint8_t *zeros,
                      const char *image, GError **error)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t off = (page + i) * SNAP_PAGE_SIZE;
        if (off >= size)
            return true;
        size_t len = (size_t)MIN((uint64_t)SNAP_PAGE_SIZE, size - off);
        int err = snap_pwrite_all(fd, data ? data + i * SNAP_PAGE_SIZE : zeros, len, off);
        if (err)
            return fold_io(error, -err, "writing", image);
    }
    return true;
}

static bool apply_chain(struct snap_chain *c, int fd, uint64_t size, const uint8_t *zeros, const char *image,
                        GError **error)
{
    g_autofree uint8_t *buf = g_malloc(FOLD_RUN_PAGES * SNAP_PAGE_SIZE);
    for (uint64_t p = 0; p < c->npages;) {
        enum snap_page_kind kind;
        unsigned layer = 0;
        uint64_t dp = 0, n = snap_chain_run(c, p, FOLD_RUN_PAGES, &kind, &layer, &dp);
        bool ok = true;
        if (kind == SNAP_PAGE_KIND_DATA) {
            struct snap_layer *l = c->layers[layer];
            ok = snap_layer_verify_data(l, dp, n, error);
            if (ok && !snap_mapped_copy(buf, snap_layer_data_page(l, dp), n * SNAP_PAGE_SIZE))
                ok = fold_io(error, EIO, "reading a layer truncated while in use", l->path);
            ok = ok && put_pages(fd, size, p, n, buf, zeros, image, error);
        } else if (kind == SNAP_PAGE_KIND_ZERO) {
            ok = put_pages(fd, size, p, n, NULL, zeros, image, error);
        }
        if (!ok)
            return false;
        p += n;
    }
    return true;
}

static bool apply_overlay(struct snap_overlay *ov, int fd, uint64_t size, const char *image, GError **error)
{
    g_autofree uint8_t *buf = g_malloc(SNAP_OVERLAY_BLOCK);
    for (uint64_t b = 0; b < ov->hdr.block_count; b++) {
        if (!ov->bitmap[b / 64]) {
            b |= 63;
            continue;
        }
        if (!snap_overlay_has(ov, b))
            continue;
        ssize_t got = snap_pread_upto(ov->fd, buf, SNAP_OVERLAY_BLOCK, snap_overlay_block_offset(ov, b));
        if (got != (ssize_t)SNAP_OVERLAY_BLOCK)
            return fold_io(error, got < 0 ? (int)-got : EIO, "reading the overlay", ov->path);
        if (!put_pages(fd, size, b, 1, buf, NULL, image, error))
            return false;
    }
    return true;
}

/* The image for writing, locked as a writer's (image-lock.h): a VM that
 * reads or writes it refuses the fold before anything is written. */
static int open_locked(const char *image, GError **error)
{
    int fd = open(image, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        fold_io(error, errno, "opening it", image);
        return -1;
    }
    if (!snap_image_lock(fd, "disk image", image, true, error)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The writes and the fsync into fd (open_locked, closed here): the same
 * result however often it is run. */
static bool apply(int fd, const char *image, const char *const *layers, unsigned n, const char *overlay,
                  GError **error)
{
    g_autoptr(snap_chain) c = n ? snap_disk_chain_open(layers, n, error) : NULL;
    g_autoptr(snap_overlay) ov = overlay ? snap_overlay_open(overlay, false, error) : NULL;
    if ((n && !c) || (overlay && !ov)) {
        close(fd);
        return false;
    }
    off_t end = lseek(fd, 0, SEEK_END);
    uint64_t size = end > 0 ? (uint64_t)end : 0;
    g_autofree uint8_t *zeros = g_malloc0(SNAP_PAGE_SIZE);
    bool ok = (!c || apply_chain(c, fd, size, zeros, image, error)) &&
              (!ov || apply_overlay(ov, fd, size, image, error));
    if (ok && fsync(fd) != 0)
        ok = fold_io(error, errno, "fsync", image);
    close(fd);
    return ok;
}

static bool finish(const char *image, GError **error)
{
    g_autofree char *intent = intent_path(image);
    if (unlink(intent) != 0 && errno != ENOENT)
        return fold_io(error, errno, "removing the fold's intent", intent);
    g_autofree char *dir = g_path_get_dirname(image);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    return true;
}

static bool parse_intent(const char *path, const char *image, GPtrArray *layers, char **overlay, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) local = NULL;
    if (!bounded_json_load_file(parser, path, INTENT_MAX_BYTES, &local)) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT, "the interrupted fold's intent %s cannot be read: %s", path,
                    local->message);
        return false;
    }
    JsonNode *root = json_parser_get_root(parser);
    JsonObject *o = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonNode *arr = o ? json_object_get_member(o, "layers") : NULL;
    JsonNode *ov = o ? json_object_get_member(o, "overlay") : NULL;
    JsonNode *img_node = o ? json_object_get_member(o, "image") : NULL;
    JsonNode *version = o ? json_object_get_member(o, "version") : NULL;
    const char *img = img_node && JSON_NODE_HOLDS_VALUE(img_node) &&
                      json_node_get_value_type(img_node) == G_TYPE_STRING ? json_node_get_string(img_node) : NULL;
    bool ok = version && JSON_NODE_HOLDS_VALUE(version) && json_node_get_value_type(version) == G_TYPE_INT64 &&
              json_node_get_int(version) == 1 && g_strcmp0(img, image) == 0 &&
              arr && JSON_NODE_HOLDS_ARRAY(arr) && ov && (JSON_NODE_HOLDS_NULL(ov) ||
              json_node_get_value_type(ov) == G_TYPE_STRING);
    for (guint i = 0; ok && i < json_array_get_length(json_node_get_array(arr)); i++) {
        JsonNode *e = json_array_get_element(json_node_get_array(arr), i);
        ok = JSON_NODE_HOLDS_VALUE(e) && json_node_get_value_type(e) == G_TYPE_STRING;
        if (ok)
            g_ptr_array_add(layers, g_strdup(json_node_get_string(e)));
    }
    if (!ok) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT, "the interrupted fold's intent %s is not one for %s", path,
                    image);
        return false;
    }
    *overlay = JSON_NODE_HOLDS_NULL(ov) ? NULL : g_strdup(json_node_get_string(ov));
    return true;
}

bool snap_disk_fold_resume(const char *image, bool *resumed, GError **error)
{
    g_autofree char *intent = intent_path(image);
    *resumed = false;
    if (!g_file_test(intent, G_FILE_TEST_EXISTS))
        return true;
    g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *overlay = NULL;
    if (!parse_intent(intent, image, layers, &overlay, error))
        return false;
    int fd = open_locked(image, error);
    if (fd < 0 || !apply(fd, image, (const char *const *)layers->pdata, layers->len, overlay, error) ||
        !finish(image, error))
        return false;
    *resumed = true;
    return true;
}

bool snap_disk_fold_into_image(const char *image, const char *const *layers, unsigned n, const char *overlay,
                               const struct snap_disk_identity *base, GError **error)
{
    bool resumed;
    if (!snap_disk_fold_resume(image, &resumed, error))
        return false;
    if (resumed)
        return true;
    if (base && !snap_disk_identity_check(image, base, error))
        return false;
    /* Everything must open before the image is touched. */
    g_autoptr(snap_chain) c = n ? snap_disk_chain_open(layers, n, error) : NULL;
    g_autoptr(snap_overlay) ov = overlay ? snap_overlay_open(overlay, false, error) : NULL;
    if ((n && !c) || (overlay && !ov))
        return false;
    if (ov && c && !snap_id_equal(&ov->hdr.lower_id, snap_chain_top_id(c))) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN, "disk overlay %s was not made on the chain's top layer %s",
                    overlay, c->layers[c->nlayers - 1]->path);
        return false;
    }
    g_clear_pointer(&c, snap_chain_free);
    g_clear_pointer(&ov, snap_overlay_close);
    g_autofree char *intent = intent_path(image);
    g_autofree char *dir = g_path_get_dirname(intent), *name = g_path_get_basename(intent);
    g_autofree char *text = intent_text(image, layers, n, overlay);
    int fd = open_locked(image, error);
    if (fd < 0)
        return false;
    if (!snap_dir_write_file(dir, name, text, error)) {
        close(fd);
        return false;
    }
    return apply(fd, image, layers, n, overlay, error) && finish(image, error);
}
