/* vm.snapshot of a running VM, "live": true (persist.h, README.md "Live
 * snapshots"). Pre-copy into a scratch image with KVM's dirty log, a short
 * stop for the rest, then the layer written from the scratch image while the
 * guest runs on. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "persist/persist.h"

#include <string.h>

#include "devices-state.h"
#include "disk-layers.h"
#include "platform/memory.h"
#include "ram-snapshot/dirty-bitmap.h"
#include "ram-snapshot/scratch.h"
#include "snapshot-internal.h"
#include "snapshot/directory.h"

struct live {
    struct vm *vm;
    struct persist_vm *p;
    const struct persist_snapshot_request *req;
    struct snap_ram ram;        /* guest RAM */
    struct snap_scratch *scratch;
    uint64_t words;
    uint64_t *in_layer;         /* pages copied into the scratch image: what the layer holds */
    uint64_t *collected;        /* every bit taken from the dirty log: the next snapshot's if this one fails */
    struct persist_snapshot_result *result;
};

static void or_into(uint64_t *to, const uint64_t *from, uint64_t words)
{
    for (uint64_t w = 0; w < words; w++)
        to[w] |= from[w];
}

/* The pages logged since the last call (KVM's log, the VMM's own writes).
 * A diff leaves out those still as its reference holds them, as a paused
 * one does; never one already copied, whose copy may be older. */
static uint64_t *take_dirty(struct live *l, GError **error)
{
    uint64_t *d = persist_dirty_collect(l->p, error);
    if (!d)
        return NULL;
    if (l->req->diff) {
        g_autofree uint64_t *copied = g_new(uint64_t, l->words);
        for (uint64_t w = 0; w < l->words; w++) {
            copied[w] = d[w] & l->in_layer[w];
            d[w] &= ~l->in_layer[w];
        }
        persist_dirty_drop_unchanged(l->p, d);
        or_into(d, copied, l->words);
    }
    or_into(l->collected, d, l->words);
    return d;
}

static bool copy_pages(struct live *l, const uint64_t *pages, GError **error)
{
    uint64_t n = 0;
    if (!snap_scratch_copy(l->scratch, &l->ram, pages, &n, error))
        return false;
    or_into(l->in_layer, pages, l->words);
    l->result->copied_pages += n;
    return true;
}

/* The first pass: a full layer's every populated page (the log, cleared
 * first, catches what changes after), a diff's every page logged since its
 * parent. */
static bool first_pass(struct live *l, GError **error)
{
    g_autofree uint64_t *d = take_dirty(l, error);
    if (!d)
        return false;
    if (!l->req->diff) {
        memset(d, 0, l->words * sizeof *d);
        if (!snap_ram_populated(&l->ram, d, error))
            return false;
    }
    l->result->passes = 1;
    return copy_pages(l, d, error);
}

/* Copy what was rewritten meanwhile until the rest fits the stop; returns
 * the pages left for it in *rest. */
static bool precopy(struct live *l, uint64_t **rest, GError **error)
{
    gint64 pass_start = g_get_monotonic_time();
    if (!first_pass(l, error))
        return false;
    /* From the end of the first pass, which takes what RAM takes: the time
     * the rewritten pages have to converge in. */
    gint64 deadline = g_get_monotonic_time() + PERSIST_LIVE_MAX_MS * G_TIME_SPAN_MILLISECOND;
    for (;;) {
        g_autofree uint64_t *d = take_dirty(l, error);
        if (!d)
            return false;
        uint64_t n = snap_dirty_bitmap_count(d, l->ram.size);
        gint64 now = g_get_monotonic_time();
        g_info("live snapshot: %" G_GUINT64_FORMAT " pages rewritten during pass %u (%.1f ms)", n,
               l->result->passes, (now - pass_start) / 1e3);
        pass_start = now;
        if (n <= PERSIST_LIVE_PAGE_BUDGET || l->result->passes >= PERSIST_LIVE_MAX_PASSES ||
            g_get_monotonic_time() >= deadline) {
            *rest = g_steal_pointer(&d);
            return true;
        }
        if (!copy_pages(l, d, error))
            return false;
        l->result->passes++;
    }
}

/* With the vCPUs stopped and the devices quiesced: the rest of RAM into the
 * scratch image and the vCPU and device state, all of one instant. */
static JsonNode *at_the_stop(struct live *l, uint64_t *rest, const snap_id *id, const snap_id *parent,
                             GError **error)
{
    g_autofree uint64_t *d = take_dirty(l, error);
    if (!d)
        return NULL;
    or_into(rest, d, l->words);
    uint64_t before = l->result->copied_pages;
    if (!copy_pages(l, rest, error))
        return NULL;
    l->result->final_pages = l->result->copied_pages - before;
    return snapshot_state_json(l->vm, l->req, id, parent, error);
}

/* Stop the vCPUs and every device, take the instant, let all but the disks
 * go on. On success the disks are still paused (devices_unquiesce_disks). */
static JsonNode *stop_and_take(struct live *l, uint64_t *rest, const snap_id *id, const snap_id *parent,
                               GError **error)
{
    gint64 t0 = g_get_monotonic_time();
    if (!vm_pause(l->vm, error)) {
        persist_error_adopt(error);
        return NULL;
    }
    bool quiesced = devices_quiesce(l->vm, error); /* a failure leaves nothing quiesced */
    JsonNode *state = quiesced ? at_the_stop(l, rest, id, parent, error) : NULL;
    if (state)
        devices_unquiesce_all_but_disks(l->vm);
    else if (quiesced)
        devices_unquiesce(l->vm);
    g_autoptr(GError) resume = NULL;
    if (!vm_resume(l->vm, &resume))
        g_warning("live snapshot: the VM did not run on after its stop: %s", resume->message);
    l->result->pause_us = (uint64_t)(g_get_monotonic_time() - t0);
    if (!state)
        persist_error_adopt(error);
    return state;
}

/* The disks (paused) sealed, the layer written from the scratch image, the
 * directory committed, the disks moved onto their new overlays. */
static bool write_after_stop(struct live *l, struct vm_config *cfg, JsonNode *state, const char *tmp,
                             const char *dest, const snap_id *id, const snap_id *parent,
                             struct snap_save_stats *stats, GError **error)
{
    struct disk_layers *disks = disk_layers_seal(l->vm, cfg, tmp, error);
    if (!disks)
        return false;
    disk_layers_add_records(disks, state);
    g_autofree char *config = snapshot_config_json(cfg);
    g_autofree char *layer = g_build_filename(tmp, SNAP_DIR_LAYER_FILE, NULL);
    struct snap_ram image;
    bool ok = snap_scratch_ram(l->scratch, &image, error) &&
              (l->req->diff ? snap_save_diff(layer, &image, l->in_layer, id, parent, stats, error)
                            : snap_save_full(layer, &image, id, stats, error)) &&
              snap_dir_write_state(tmp, state, config, error) && snap_dir_commit(tmp, dest, error);
    if (!ok) {
        disk_layers_abort(disks);
        persist_error_adopt(error);
        return false;
    }
    disk_layers_switch(disks, l->vm, cfg, dest);
    return true;
}

static bool take_live(struct live *l, struct vm_config *cfg, const char *tmp, const char *dest, const snap_id *id,
                      const snap_id *parent, GError **error)
{
    g_autofree uint64_t *rest = NULL;
    l->scratch = snap_scratch_new(l->req->scratch_on_disk ? tmp : NULL, l->ram.size, error);
    if (!l->scratch || !precopy(l, &rest, error)) {
        persist_error_adopt(error);
        return false;
    }
    g_autoptr(JsonNode) state = stop_and_take(l, rest, id, parent, error);
    if (!state)
        return false;
    struct snap_save_stats stats = { 0 };
    bool ok = write_after_stop(l, cfg, state, tmp, dest, id, parent, &stats, error);
    devices_unquiesce_disks(l->vm);
    if (ok) {
        if (l->req->diff)
            persist_note_diff(l->p, l->in_layer);
        snapshot_note_taken(l->p, l->req, dest, id, &stats, l->result);
    }
    return ok;
}

bool persist_snapshot_live(struct vm *vm, struct vm_config *cfg, const struct persist_snapshot_request *req,
                           struct persist_snapshot_result *result, GError **error)
{
    snap_id parent = { 0 }, id;
    if (!snapshot_check_request(vm, req, &parent, error))
        return false;
    g_autofree char *dest = persist_path_from_url(req->destination_url, "destination_url", error);
    g_autofree char *tmp = dest ? snapshot_partial_dir(dest, error) : NULL;
    if (!tmp)
        return false;
    struct persist_snapshot_result local = { 0 };
    const struct guest_memory *mem = vm_memory(vm);
    struct live l = {
        .vm = vm, .p = persist_vm_get(vm), .req = req, .result = result ? result : &local,
        .ram = { mem->host, mem->size, mem->fd, mem->page_size }, .words = snap_dirty_bitmap_words(mem->size),
    };
    l.in_layer = snap_dirty_bitmap_new(mem->size);
    l.collected = snap_dirty_bitmap_new(mem->size);
    /* RAM restored on demand is only complete once every page is in. */
    if (!req->diff)
        persist_vm_fill_all(l.p);
    snap_id_random(&id);
    bool ok = take_live(&l, cfg, tmp, dest, &id, &parent, error);
    persist_dirty_settle(l.p, l.collected, ok);
    snap_scratch_free(l.scratch);
    g_free(l.in_layer);
    if (!ok)
        snapshot_remove_partial(tmp);
    return ok;
}
