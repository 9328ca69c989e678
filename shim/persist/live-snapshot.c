/* vm.snapshot of a running VM, "live": true (persist.h, README.md "Live
 * snapshots"): the steps. Pre-copy into a scratch image with KVM's dirty log,
 * a short stop for the rest, then the layer written from the scratch image
 * while the guest runs on. live-job.c says which thread runs which step. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "live-internal.h"

#include <string.h>

#include "devices-state.h"
#include "platform/memory.h"
#include "ram-snapshot/dirty-bitmap.h"
#include "snapshot/directory.h"

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
    if (l->req.diff) {
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

/* Copy pages into the scratch image; while the guest runs, in steps, each
 * published (vm.info) and each a point where a cancel ends the job. */
static bool copy_pages(struct live *l, const uint64_t *pages, bool in_steps, GError **error)
{
    uint64_t npages = l->ram.size / SNAP_PAGE_SIZE, step = in_steps ? LIVE_STEP_PAGES : npages;
    struct live_progress *pr = &l->progress;
    pr->pass_total = snap_dirty_bitmap_count(pages, l->ram.size);
    pr->pass_copied = 0;
    for (uint64_t first = 0; first < npages; first += step) {
        uint64_t n = 0;
        if (in_steps && !live_go_on(l, error))
            return false;
        if (!snap_scratch_copy_range(l->scratch, &l->ram, pages, first, first + step, &n, error))
            return false;
        l->result.copied_pages += n;
        pr->pass_copied += n;
        pr->copied = l->result.copied_pages;
        if (in_steps)
            live_report(l);
    }
    or_into(l->in_layer, pages, l->words);
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
    if (!l->req.diff) {
        memset(d, 0, l->words * sizeof *d);
        if (!snap_ram_populated(&l->ram, d, error))
            return false;
    }
    l->result.passes = l->progress.pass = 1;
    if (!copy_pages(l, d, true, error))
        return false;
    l->result.first_pass_pages = l->result.copied_pages;
    return true;
}

/* Copy what was rewritten meanwhile until the rest fits the stop; returns
 * the pages left for it in *rest. */
bool live_precopy(struct live *l, uint64_t **rest, GError **error)
{
    gint64 pass_start = g_get_monotonic_time();
    if (!first_pass(l, error))
        return false;
    /* From the end of the first pass, which takes what RAM takes: the time
     * the rewritten pages have to converge in. */
    gint64 first_end = g_get_monotonic_time();
    unsigned max_passes = l->req.max_passes ? l->req.max_passes : PERSIST_LIVE_MAX_PASSES;
    unsigned max_ms = l->req.max_ms ? l->req.max_ms : PERSIST_LIVE_MAX_MS;
    gint64 deadline = first_end + max_ms * G_TIME_SPAN_MILLISECOND;
    for (;;) {
        if (!live_go_on(l, error))
            return false;
        g_autofree uint64_t *d = take_dirty(l, error);
        if (!d)
            return false;
        uint64_t n = snap_dirty_bitmap_count(d, l->ram.size);
        gint64 now = g_get_monotonic_time();
        g_info("live snapshot: %" G_GUINT64_FORMAT " pages rewritten during pass %u (%.1f ms)", n,
               l->result.passes, (now - pass_start) / 1e3);
        l->progress.dirty_pages_per_s = now > pass_start ? n * G_USEC_PER_SEC / (uint64_t)(now - pass_start) : 0;
        pass_start = now;
        if (n > PERSIST_LIVE_PAGE_BUDGET && (l->result.passes >= max_passes || now >= deadline))
            l->result.forced_stop = l->result.passes >= max_passes ? "passes" : "time";
        if (n <= PERSIST_LIVE_PAGE_BUDGET || l->result.forced_stop) {
            if (l->result.forced_stop)
                g_message("live snapshot: not converging (%" G_GUINT64_FORMAT " pages left after %u passes, "
                          "%.1f s): a forced stop for them (limit: %s)", n, l->result.passes,
                          (now - first_end) / 1e6, l->result.forced_stop);
            *rest = g_steal_pointer(&d);
            return true;
        }
        l->result.passes = ++l->progress.pass;
        if (!copy_pages(l, d, true, error))
            return false;
    }
}

/* With the vCPUs stopped and the devices quiesced: the rest of RAM into the
 * scratch image and the vCPU and device state, all of one instant. */
static JsonNode *at_the_stop(struct live *l, uint64_t *rest, GError **error)
{
    g_autofree uint64_t *d = take_dirty(l, error);
    if (!d)
        return NULL;
    or_into(rest, d, l->words);
    uint64_t before = l->result.copied_pages;
    if (!copy_pages(l, rest, false, error))
        return NULL;
    l->result.final_pages = l->result.copied_pages - before;
    return snapshot_state_json(l->vm, &l->req, &l->id, &l->parent, error);
}

/* A paused VM: every device quiesced (until live_end), the log taken (a
 * diff's pages), the vCPU and device state. */
static JsonNode *take_paused(struct live *l, GError **error)
{
    if (!devices_quiesce(l->vm, error)) {
        persist_error_adopt(error);
        return NULL;
    }
    g_autofree uint64_t *d = take_dirty(l, error);
    JsonNode *state = d ? snapshot_state_json(l->vm, &l->req, &l->id, &l->parent, error) : NULL;
    if (!state) {
        devices_unquiesce(l->vm);
        persist_error_adopt(error);
        return NULL;
    }
    or_into(l->in_layer, d, l->words);
    l->stopped = true;
    return state;
}

/* Stop the vCPUs and every device, take the instant, let all but the disks
 * go on. On success the disks are still paused (until live_end). */
JsonNode *live_stop_and_take(struct live *l, uint64_t *rest, GError **error)
{
    if (l->paused)
        return take_paused(l, error);
    gint64 t0 = g_get_monotonic_time();
    if (!vm_pause(l->vm, error)) {
        persist_error_adopt(error);
        return NULL;
    }
    bool quiesced = devices_quiesce(l->vm, error); /* a failure leaves nothing quiesced */
    JsonNode *state = quiesced ? at_the_stop(l, rest, error) : NULL;
    if (state)
        devices_unquiesce_all_but_disks(l->vm);
    else if (quiesced)
        devices_unquiesce(l->vm);
    g_autoptr(GError) resume = NULL;
    if (!vm_resume(l->vm, &resume))
        g_warning("live snapshot: the VM did not run on after its stop: %s", resume->message);
    l->result.pause_us = (uint64_t)(g_get_monotonic_time() - t0);
    l->stopped = state != NULL;
    if (!state)
        persist_error_adopt(error);
    return state;
}

static bool seal_step(void *data, uint64_t blocks_read, GError **error)
{
    (void)blocks_read;
    return live_go_on(data, error);
}

static bool write_step(void *data, uint64_t pages_read, GError **error)
{
    struct live *l = data;
    l->progress.written_pages = pages_read;
    live_report(l);
    return live_go_on(l, error);
}

/* The layer from the scratch image (from guest RAM, paused), in steps a
 * cancel ends. */
static bool write_layer(struct live *l, const char *layer, struct snap_save_stats *stats, GError **error)
{
    struct snap_ram image = l->ram;
    if (!l->paused && !snap_scratch_ram(l->scratch, &image, error))
        return false;
    struct snap_steps steps = { write_step, l };
    return l->req.diff ? snap_save_diff_steps(layer, &image, l->in_layer, &l->id, &l->parent, &steps, stats, error)
                       : snap_save_full_steps(layer, &image, &l->id, &steps, stats, error);
}

/* The disks (paused) sealed, the layer written from the scratch image, the
 * directory committed unless the job was cancelled meanwhile (a cancel ends
 * the layer's write at its next 16 MiB step). */
bool live_write(struct live *l, JsonNode *state, GError **error)
{
    if (!live_go_on(l, error))
        return false;
    struct snap_steps steps = { seal_step, l };
    l->disks = disk_layers_seal(l->vm, l->cfg, l->tmp, &steps, error);
    if (!l->disks)
        return false;
    disk_layers_add_records(l->disks, state);
    g_autofree char *config = snapshot_config_json(l->cfg);
    g_autofree char *layer = g_build_filename(l->tmp, SNAP_DIR_LAYER_FILE, NULL);
    struct snap_save_stats stats = { 0 };
    bool ok = write_layer(l, layer, &stats, error) &&
              snap_dir_write_state(l->tmp, state, config, error) && live_go_on(l, error) &&
              snap_dir_commit(l->tmp, l->dest, error);
    if (!ok) {
        g_clear_pointer(&l->disks, disk_layers_abort);
        persist_error_adopt(error);
        return false;
    }
    l->result.data_pages = stats.data_pages;
    l->result.file_bytes = stats.file_bytes;
    l->result.elapsed_ns = stats.elapsed_ns;
    return true;
}

bool live_prepare(struct live *l, struct vm *vm, struct vm_config *cfg, const struct persist_snapshot_request *req,
                  GError **error)
{
    if (!snapshot_check_request(vm, req, &l->parent, error))
        return false;
    l->dest = persist_path_from_url(req->destination_url, "destination_url", error);
    l->tmp = l->dest ? snapshot_partial_dir(l->dest, error) : NULL;
    if (!l->tmp)
        return false;
    const struct guest_memory *mem = vm_memory(vm);
    l->vm = vm;
    l->cfg = cfg;
    l->p = persist_vm_get(vm);
    l->req = *req;
    l->req.destination_url = g_strdup(req->destination_url);
    l->req.parent_url = g_strdup(req->parent_url);
    l->req.vmm_state = req->vmm_state ? json_node_copy(req->vmm_state) : NULL;
    l->ram = (struct snap_ram){ mem->host, mem->size, mem->fd, mem->page_size, mem->private_file };
    l->words = snap_dirty_bitmap_words(mem->size);
    l->in_layer = snap_dirty_bitmap_new(mem->size);
    l->collected = snap_dirty_bitmap_new(mem->size);
    /* RAM restored on demand is only complete once every page is in. */
    if (!req->diff)
        persist_vm_fill_all(l->p);
    snap_id_random(&l->id);
    l->paused = !req->live;
    if (l->paused)
        return true;
    l->scratch = snap_scratch_new(req->scratch_on_disk ? l->tmp : NULL, l->ram.size, error);
    if (!l->scratch)
        persist_error_adopt(error);
    return l->scratch != NULL;
}

static gpointer free_scratch(gpointer scratch)
{
    snap_scratch_free(scratch);
    return NULL;
}

/* The job's end, ok or not, on the owner: the disks onto their new layers
 * (or left on theirs) and let go, the VM's record of its last snapshot, the
 * log's bits kept for the next one if this one failed; nothing partial. */
void live_end(struct live *l, bool ok)
{
    if (ok)
        disk_layers_switch(g_steal_pointer(&l->disks), l->vm, l->cfg, l->dest);
    if (l->stopped && l->paused)
        devices_unquiesce(l->vm);
    else if (l->stopped)
        devices_unquiesce_disks(l->vm);
    if (ok) {
        if (l->req.diff)
            persist_note_diff(l->p, l->in_layer);
        struct snap_save_stats stats = { .data_pages = l->result.data_pages, .file_bytes = l->result.file_bytes,
                                         .elapsed_ns = l->result.elapsed_ns };
        snapshot_note_taken(l->p, &l->req, l->dest, &l->id, &stats, &l->result);
    }
    if (l->collected)
        persist_dirty_settle(l->p, g_steal_pointer(&l->collected), ok);
    if (!ok && l->tmp)
        snapshot_remove_partial(l->tmp);
    /* A scratch image of hundreds of MiB takes tens of ms to give back (its
     * pages freed one by one): on a thread of its own, so the job's end, and
     * a cancel's answer, do not wait for it. */
    if (l->scratch)
        g_thread_unref(g_thread_new("live-scratch-free", free_scratch, g_steal_pointer(&l->scratch)));
    g_clear_pointer(&l->in_layer, g_free);
    g_clear_pointer(&l->dest, g_free);
    g_clear_pointer(&l->tmp, g_free);
    g_free((char *)l->req.destination_url);
    g_free((char *)l->req.parent_url);
    g_clear_pointer(&l->req.vmm_state, json_node_unref);
}
