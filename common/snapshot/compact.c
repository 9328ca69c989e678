/* Compaction through the page index: each run of pages that comes from one
 * source is copied once into the new layer. */
#include "snapshot/compact.h"

#include "snapshot/layer-write.h"
#include "snapshot/mapped-read.h"

#define COMPACT_RUN_PAGES 4096u
#define COPY_CHUNK_PAGES 256u /* 1 MiB through the bounce buffer at a time */

/* Data pages of a layer into the writer. They are read through the layer's
 * mapping with snapshot/mapped-read.h: a layer truncated or failing under the
 * fold ends it with an error naming the file, never the process (the daemon
 * folds inner snapshots in-process). */
static bool copy_data(struct snap_layer *l, uint64_t page, uint64_t dp, uint64_t n,
                      struct snap_layer_writer *w, uint8_t *buf, GError **error)
{
    if (!snap_layer_verify_data(l, dp, n, error))
        return false;
    for (uint64_t done = 0; done < n;) {
        uint64_t take = MIN(n - done, COPY_CHUNK_PAGES);
        if (!snap_mapped_copy(buf, snap_layer_data_page(l, dp + done), take * SNAP_PAGE_SIZE)) {
            g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO,
                        "snapshot layer %s: its data could not be read (the file was truncated "
                        "or its storage failed)", l->path);
            return false;
        }
        if (!snap_layer_writer_add(w, page + done, take, buf, error))
            return false;
        done += take;
    }
    return true;
}

static bool copy_chain(struct snap_chain *c, struct snap_layer_writer *w, GError **error)
{
    g_autofree uint8_t *buf = g_malloc((size_t)COPY_CHUNK_PAGES * SNAP_PAGE_SIZE);
    for (uint64_t p = 0; p < c->npages;) {
        enum snap_page_kind kind;
        unsigned layer = 0;
        uint64_t dp = 0, n = snap_chain_run(c, p, COMPACT_RUN_PAGES, &kind, &layer, &dp);
        bool ok = true;
        if (kind == SNAP_PAGE_KIND_DATA) {
            ok = copy_data(c->layers[layer], p, dp, n, w, buf, error);
        } else if (kind == SNAP_PAGE_KIND_ZERO) {
            ok = snap_layer_writer_add(w, p, n, NULL, error);
        }
        if (!ok)
            return false;
        p += n;
    }
    return true;
}

bool snap_compact_chain(struct snap_chain *c, const char *out_path, const snap_id *id,
                        GError **error)
{
    const snap_id *parent = &c->layers[0]->hdr.parent_id; /* nil for a full chain */
    struct snap_layer_writer *w =
        snap_layer_writer_new(out_path, c->ram_size, id ? id : snap_chain_top_id(c), parent, error);
    if (!w)
        return false;
    if (!copy_chain(c, w, error)) {
        snap_layer_writer_abort(w);
        return false;
    }
    return snap_layer_writer_commit(w, error);
}

bool snap_compact_fold(const char *parent_path, const char *child_path, GError **error)
{
    const char *paths[] = { parent_path, child_path };
    g_autoptr(snap_chain) c = snap_chain_open(paths, 2, SNAP_CHAIN_ALLOW_PARTIAL, error);
    if (!c)
        return false;
    return snap_compact_chain(c, child_path, NULL, error);
}
