/* The read-only chain of a layered disk: sealed disk layers over the base
 * image (see blk-backend.h). */
#define G_LOG_DOMAIN "vsnap-shim"

#include "block/blk-backend.h"
#include "blk-iov.h"

#include <errno.h>
#include <gio/gio.h>
#include <string.h>

#include "snapshot/disk.h"
#include "snapshot/mapped-read.h"

#define RUN_PAGES 256u

struct blk_chain {
    struct blk_backend base; /* first */
    struct blk_backend *image;
    struct snap_chain *chain;
    bool bad_logged;
};

static struct blk_chain *chain_of(struct blk_backend *b)
{
    return (struct blk_chain *)b;
}

/* Layer data [dp, dp + n pages) bytes [from, from + len) into iov at `at`. */
static int copy_layer(struct blk_chain *c, struct snap_layer *l, uint64_t dp, uint64_t n, uint64_t from,
                      const struct iovec *iov, unsigned niov, size_t at, size_t len)
{
    g_autoptr(GError) error = NULL;
    if (!snap_layer_verify_data(l, dp, n, &error)) {
        if (!c->bad_logged)
            g_warning("disk %s: %s", c->base.name, error->message);
        c->bad_logged = true;
        return -EIO;
    }
    const uint8_t *src = snap_layer_data_page(l, dp) + from;
    struct iovec piece[IOV_MAX];
    unsigned np = blk_iov_slice(iov, niov, at, len, piece);
    for (unsigned i = 0; i < np; i++) {
        if (!snap_mapped_copy(piece[i].iov_base, src, piece[i].iov_len))
            return -EIO;
        src += piece[i].iov_len;
    }
    return 0;
}

static int chain_readv(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov)
{
    struct blk_chain *c = chain_of(b);
    uint64_t end = offset + blk_iov_total(iov, niov);
    for (uint64_t pos = offset; pos < end;) {
        uint64_t page = pos / SNAP_PAGE_SIZE;
        enum snap_page_kind kind;
        unsigned layer = 0;
        uint64_t dp = 0, n = snap_chain_run(c->chain, page, RUN_PAGES, &kind, &layer, &dp);
        uint64_t run_end = MIN(end, (page + n) * SNAP_PAGE_SIZE);
        size_t at = (size_t)(pos - offset), len = (size_t)(run_end - pos);
        int err = 0;
        if (kind == SNAP_PAGE_KIND_ZERO) {
            blk_iov_zero(iov, niov, at, len);
        } else if (kind == SNAP_PAGE_KIND_DATA) {
            err = copy_layer(c, c->chain->layers[layer], dp, n, pos - page * SNAP_PAGE_SIZE, iov, niov, at, len);
        } else {
            struct iovec piece[IOV_MAX];
            unsigned np = blk_iov_slice(iov, niov, at, len, piece);
            err = blk_backend_readv(c->image, pos, piece, np);
        }
        if (err)
            return err;
        pos = run_end;
    }
    return 0;
}

static int chain_refuse_write(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov)
{
    (void)b, (void)offset, (void)iov, (void)niov;
    return -EROFS;
}

static int chain_flush(struct blk_backend *b)
{
    (void)b;
    return 0;
}

static int chain_refuse_range(struct blk_backend *b, uint64_t offset, uint64_t len)
{
    (void)b, (void)offset, (void)len;
    return -EROFS;
}

static int chain_refuse_zeroes(struct blk_backend *b, uint64_t offset, uint64_t len, bool may_unmap)
{
    (void)b, (void)offset, (void)len, (void)may_unmap;
    return -EROFS;
}

static void chain_close(struct blk_backend *b)
{
    struct blk_chain *c = chain_of(b);
    blk_backend_close(c->image);   /* NULL once stolen */
    snap_chain_free(c->chain);
    g_free(c->base.name);
    g_free(c);
}

static const struct blk_backend_ops chain_ops = {
    .readv = chain_readv,
    .writev = chain_refuse_write,
    .flush = chain_flush,
    .discard = chain_refuse_range,
    .write_zeroes = chain_refuse_zeroes,
    .close = chain_close,
};

const snap_id *blk_chain_top_id(const struct blk_backend *b)
{
    return b && b->ops == &chain_ops ? snap_chain_top_id(((const struct blk_chain *)b)->chain) : NULL;
}

void blk_chain_layers_moved(struct blk_backend *b, const char *from, const char *to)
{
    b = blk_overlay_lower(b) ? blk_overlay_lower(b) : b;
    if (!b || b->ops != &chain_ops)
        return;
    struct snap_chain *chain = ((struct blk_chain *)b)->chain;
    size_t len = strlen(from);
    for (unsigned i = 0; i < chain->nlayers; i++) {
        struct snap_layer *l = chain->layers[i];
        if (strncmp(l->path, from, len) == 0 && l->path[len] == '/') {
            char *moved = g_strconcat(to, l->path + len, NULL);
            g_free(l->path);
            l->path = moved;
        }
    }
}

uint64_t blk_chain_layer_run(struct blk_backend *b, uint64_t block, uint64_t max, bool *in_layers, bool *zero)
{
    *in_layers = *zero = false;
    if (b->ops != &chain_ops)
        return max;   /* an image alone: nothing to pull */
    enum snap_page_kind kind;
    unsigned layer = 0;
    uint64_t dp = 0, n = snap_chain_run(chain_of(b)->chain, block, max, &kind, &layer, &dp);
    *in_layers = kind != SNAP_PAGE_KIND_ABSENT;
    *zero = kind == SNAP_PAGE_KIND_ZERO;
    return MAX(n, 1);
}

struct blk_backend *blk_chain_steal_image(struct blk_backend *b)
{
    struct blk_chain *c = chain_of(b);
    struct blk_backend *image = c->image;
    c->image = NULL;
    return image;
}

struct blk_backend *blk_chain_open(const struct blk_chain_options *opts, GError **error)
{
    struct blk_raw_options raw = { .path = opts->image, .readonly = true, .direct = opts->direct };
    struct blk_backend *image = blk_raw_open(&raw, error);
    if (!image)
        return NULL;
    g_autoptr(GError) local = NULL;
    struct snap_chain *chain = snap_disk_chain_open(opts->layers, opts->nlayers, &local);
    if (chain && chain->ram_size != snap_disk_layer_size(image->capacity)) {
        g_set_error(&local, SNAP_ERROR, SNAP_ERROR_CHAIN, "disk layer %s covers %" G_GUINT64_FORMAT " bytes, but "
                    "image %s holds %" G_GUINT64_FORMAT " (another disk's layer?)", chain->layers[0]->path,
                    chain->ram_size, opts->image, image->capacity);
        g_clear_pointer(&chain, snap_chain_free);
    }
    if (!chain) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "disk %s: %s", opts->image, local->message);
        blk_backend_close(image);
        return NULL;
    }
    struct blk_chain *c = g_new0(struct blk_chain, 1);
    c->base.ops = &chain_ops;
    c->base.capacity = image->capacity;
    c->base.block_size = image->block_size;
    c->base.readonly = true;
    c->base.name = g_strdup(opts->image);
    c->image = image;
    c->chain = chain;
    return &c->base;
}
