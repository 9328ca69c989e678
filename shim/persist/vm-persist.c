/* Per-VM snapshot state and dirty tracking (see vm-persist.h). */
#include "vm-persist.h"

#include <errno.h>
#include <linux/kvm.h>
#include <string.h>
#include <sys/ioctl.h>

#include "persist/persist.h"
#include "platform/memory.h"
#include "ram-snapshot/dirty-bitmap.h"
#include "snapshot/mapped-read.h"
#include "state/state-json.h"
#include "core/vm.h"
#include "json/vjson.h"

static void clear_reference(struct persist_vm *p)
{
    g_clear_pointer(&p->reference_paths, g_ptr_array_unref);
    g_clear_pointer(&p->reference_ids, g_array_unref);
    g_clear_pointer(&p->in_diffs, g_free);
}

static void persist_vm_release(void *opaque)
{
    struct persist_vm *p = opaque;
    /* Every thread that touches RAM has stopped (vm_free: vCPUs, then
     * devices): none can be waiting on a fault, so the server can go before
     * RAM is unmapped. */
    persist_workset_clear(&p->ws);
    snap_uffd_stop(p->uffd);
    snap_chain_free(p->served);
    clear_reference(p);
    g_free(p->carry);
    if (p->vmm_state)
        json_node_unref(p->vmm_state);
    g_free(p);
}

struct persist_vm *persist_vm_get(struct vm *vm)
{
    struct persist_vm *p = vm_get_persist_state(vm);
    if (!p) {
        p = g_new0(struct persist_vm, 1);
        p->vm = vm;
        vm_set_persist_state(vm, p, persist_vm_release);
    }
    return p;
}

/* KVM_GET_DIRTY_LOG without manual protection returns the slot's log and
 * clears it (write-protecting the pages again) in one step. */
static bool fetch_slot_log(struct vm *vm, unsigned slot, uint64_t *ram_bitmap, GError **error)
{
    const struct guest_region *r = &vm_memory(vm)->regions[slot];
    uint64_t pages = r->size / GUEST_PAGE_SIZE;
    g_autofree uint64_t *log = g_new0(uint64_t, (pages + 63) / 64);
    struct kvm_dirty_log request = { .slot = slot, .dirty_bitmap = log };
    if (ioctl(vm_kvm_vm_fd(vm), KVM_GET_DIRTY_LOG, &request) < 0) {
        int e = errno;
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_FAILED, "KVM_GET_DIRTY_LOG of memory slot %u failed: %s",
                    slot, g_strerror(e));
        return false;
    }
    snap_dirty_bitmap_or_slot(ram_bitmap, r->ram_offset, log, pages);
    return true;
}

uint64_t *persist_dirty_collect(struct persist_vm *p, GError **error)
{
    struct vm *vm = p->vm;
    uint64_t *dirty = snap_dirty_bitmap_new(vm_memory(vm)->size);
    uint64_t words = snap_dirty_bitmap_words(vm_memory(vm)->size);
    for (unsigned slot = 0; slot < vm_memory(vm)->nregions; slot++) {
        if (!fetch_slot_log(vm, slot, dirty, error)) {
            /* Slots fetched so far were cleared in KVM: keep their bits. */
            persist_dirty_settle(p, dirty, false);
            return NULL;
        }
    }
    size_t vmm_words = 0;
    g_autofree uint64_t *vmm = vm_fetch_and_clear_vmm_dirty(vm, &vmm_words);
    for (uint64_t w = 0; w < MIN(words, (uint64_t)vmm_words); w++)
        dirty[w] |= vmm[w];
    if (p->carry) {
        for (uint64_t w = 0; w < words; w++)
            dirty[w] |= p->carry[w];
        g_clear_pointer(&p->carry, g_free);
    }
    return dirty;
}

void persist_dirty_settle(struct persist_vm *p, uint64_t *dirty, bool snapshot_ok)
{
    if (snapshot_ok) {
        g_free(dirty);
        return;
    }
    if (p->carry) {
        uint64_t words = snap_dirty_bitmap_words(vm_memory(p->vm)->size);
        for (uint64_t w = 0; w < words; w++)
            dirty[w] |= p->carry[w];
        g_free(p->carry);
    }
    p->carry = dirty;
}

/* The VM has run, and serving has stopped for every thread after a bad
 * block: the VM is lost (vm_report_fatal), as when a fault meets it. */
void persist_vm_fill_all(struct persist_vm *p)
{
    g_autoptr(GError) error = NULL;
    if (!p->uffd || snap_uffd_fill_all(p->uffd, &error))
        return;
    g_autofree char *detail = g_strdup_printf("on-demand restore failed while bringing in the rest "
                                              "of the restored RAM: %s", error->message);
    vm_report_fatal(p->vm, detail);
}

/* ---- the reference ---- */

static bool page_is_zero(const uint8_t *page)
{
    static const uint8_t zero[GUEST_PAGE_SIZE];
    return memcmp(page, zero, GUEST_PAGE_SIZE) == 0;
}

/* Whether RAM page `page` holds what the reference chain holds. A block that
 * fails its checksum, or a file that lost it since it was opened, counts as
 * changed: the page stays in the diff. */
static bool page_matches_reference(struct snap_chain *c, const uint8_t *ram, uint64_t page)
{
    unsigned layer = 0;
    uint64_t data_page = 0;
    enum snap_page_kind kind = snap_chain_find(c, page, &layer, &data_page);
    if (kind != SNAP_PAGE_KIND_DATA)
        return kind != SNAP_PAGE_KIND_ABSENT && page_is_zero(ram);
    struct snap_layer *l = c->layers[layer];
    bool equal = false;
    return snap_layer_verify_data(l, data_page, 1, NULL) &&
           snap_mapped_equal(snap_layer_data_page(l, data_page), ram, GUEST_PAGE_SIZE, &equal) && equal;
}

/* The reference chain as it was recorded, or NULL (then nothing is left out
 * of the diff): each layer must still open and still be the layer it was. */
static struct snap_chain *open_reference(struct persist_vm *p)
{
    if (!p->reference_paths)
        return NULL;
    g_autoptr(GError) error = NULL;
    struct snap_chain *c = snap_chain_open((const char *const *)p->reference_paths->pdata,
                                           p->reference_paths->len, SNAP_CHAIN_DEFAULT, &error);
    for (unsigned i = 0; c && i < c->nlayers; i++) {
        if (!snap_id_equal(&c->layers[i]->hdr.id, &g_array_index(p->reference_ids, snap_id, i))) {
            g_set_error(&error, SNAP_ERROR, SNAP_ERROR_CHAIN, "snapshot layer %s: not the layer it was",
                        c->layers[i]->path);
            g_clear_pointer(&c, snap_chain_free);
        }
    }
    if (c && c->ram_size != vm_memory(p->vm)->size)
        g_clear_pointer(&c, snap_chain_free);
    if (!c)
        g_warning("snapshot: the diff keeps every page KVM logged, the reference it would be "
                  "compared with is gone: %s", error ? error->message : "its RAM size differs");
    return c;
}

void persist_dirty_drop_unchanged(struct persist_vm *p, uint64_t *dirty)
{
    g_autoptr(snap_chain) chain = open_reference(p);
    if (!chain || chain->partial)
        return;
    uint64_t words = snap_dirty_bitmap_words(vm_memory(p->vm)->size);
    for (uint64_t w = 0; w < words; w++) {
        uint64_t candidates = dirty[w] & ~(p->in_diffs ? p->in_diffs[w] : 0);
        while (candidates) {
            unsigned bit = (unsigned)__builtin_ctzll(candidates);
            candidates &= candidates - 1;
            uint64_t page = w * 64 + bit;
            if (page < chain->npages &&
                page_matches_reference(chain, vm_memory(p->vm)->host + page * GUEST_PAGE_SIZE, page))
                dirty[w] &= ~(1ull << bit);
        }
    }
}

void persist_note_diff(struct persist_vm *p, const uint64_t *dirty)
{
    if (!p->reference_paths)
        return;
    uint64_t words = snap_dirty_bitmap_words(vm_memory(p->vm)->size);
    if (!p->in_diffs)
        p->in_diffs = snap_dirty_bitmap_new(vm_memory(p->vm)->size);
    for (uint64_t w = 0; w < words; w++)
        p->in_diffs[w] |= dirty[w];
}

static void add_reference_layer(struct persist_vm *p, const char *path, const snap_id *id)
{
    g_ptr_array_add(p->reference_paths, g_strdup(path));
    g_array_append_val(p->reference_ids, *id);
}

static void new_reference(struct persist_vm *p)
{
    clear_reference(p);
    p->reference_paths = g_ptr_array_new_with_free_func(g_free);
    p->reference_ids = g_array_new(FALSE, FALSE, sizeof(snap_id));
}

void persist_set_reference(struct persist_vm *p, const struct snap_chain *chain)
{
    new_reference(p);
    for (unsigned i = 0; i < chain->nlayers; i++)
        add_reference_layer(p, chain->layers[i]->path, &chain->layers[i]->hdr.id);
}

void persist_note_full(struct persist_vm *p, const char *layer_path, const snap_id *id)
{
    /* The server is complete (persist_vm_fill_all ran before the full
     * snapshot), so it and its chain may go while the VM runs on: nothing
     * of the snapshot restored stays open. */
    persist_workset_clear(&p->ws);
    g_clear_pointer(&p->uffd, snap_uffd_stop);
    g_clear_pointer(&p->served, snap_chain_free);
    new_reference(p);
    add_reference_layer(p, layer_path, id);
}

/* ---- vm.info ---- */

static void add_ondemand_stats(struct persist_vm *p, JsonBuilder *b)
{
    struct snap_uffd_stats st;
    snap_uffd_get_stats(p->uffd, &st);
    vjson_object_begin(b, NULL);
    vjson_uint(b, "faults", st.faults);
    vjson_uint(b, "pages_copied", st.pages_copied);
    vjson_uint(b, "pages_zeroed", st.pages_zeroed);
    vjson_uint(b, "pages_unregistered", st.pages_unregistered);
    vjson_uint(b, "blocks_prefetched", st.blocks_prefetched);
    vjson_uint(b, "blocks_read_ahead", st.blocks_read_ahead);
    vjson_bool(b, "prefetch_done", st.prefetch_done);
    vjson_bool(b, "complete", st.complete);
    vjson_bool(b, "failed", st.failed);
    persist_workset_add_info(&p->ws, &st, b);
    vjson_object_end(b);
}

void persist_add_info(struct vm *vm, JsonBuilder *b)
{
    struct persist_vm *p = vm_get_persist_state(vm);
    char id[37];
    vjson_object_begin(b, "snapshot");
    if (p && p->has_layer)
        snap_id_to_string(&p->last_id, id);
    vjson_str(b, "layer_id", p && p->has_layer ? id : NULL);
    vjson_str(b, "restore_mode", p && p->restored ? snap_restore_mode_name(p->restore_mode) : NULL);
    vjson_member(b, "ondemand");
    if (p && p->uffd)
        add_ondemand_stats(p, b);
    else
        vjson_null(b, NULL);
    vjson_object_end(b);
    clock_restore_add_info(p ? &p->clock : NULL, p && p->restored, b);
}

JsonObject *persist_restored_vmm_state(struct vm *vm)
{
    struct persist_vm *p = vm_get_persist_state(vm);
    return p && p->vmm_state ? json_node_get_object(p->vmm_state) : NULL;
}

void persist_guest_ready(struct vm *vm)
{
    struct persist_vm *p = vm_get_persist_state(vm);
    if (p && p->uffd)
        persist_workset_ready(&p->ws, p->uffd);
}

const char *persist_workset_text(struct vm *vm)
{
    struct persist_vm *p = vm_get_persist_state(vm);
    return p ? persist_workset_held(&p->ws) : NULL;
}
