/* Per-VM snapshot state and dirty tracking (see vm-persist.h). */
#include "persist/vm-persist.h"

#include <errno.h>
#include <linux/kvm.h>
#include <string.h>
#include <sys/ioctl.h>

#include "persist/persist.h"
#include "memory.h"
#include "ram-snapshot/dirty-bitmap.h"
#include "state/state-json.h"
#include "vm.h"

static void persist_vm_release(void *opaque)
{
    struct persist_vm *p = opaque;
    /* Every thread that touches RAM has stopped (vm_free: vCPUs, then
     * devices): none can be waiting on a fault, so the server can go before
     * RAM is unmapped. */
    snap_uffd_stop(p->uffd);
    snap_chain_free(p->chain);
    g_free(p->in_diffs);
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
 * fails its checksum counts as changed: the page stays in the diff. */
static bool page_matches_reference(struct snap_chain *c, const uint8_t *ram, uint64_t page)
{
    unsigned layer = 0;
    uint64_t data_page = 0;
    enum snap_page_kind kind = snap_chain_find(c, page, &layer, &data_page);
    if (kind != SNAP_PAGE_KIND_DATA)
        return kind != SNAP_PAGE_KIND_ABSENT && page_is_zero(ram);
    struct snap_layer *l = c->layers[layer];
    if (!snap_layer_verify_data(l, data_page, 1, NULL))
        return false;
    return memcmp(ram, snap_layer_data_page(l, data_page), GUEST_PAGE_SIZE) == 0;
}

void persist_dirty_drop_unchanged(struct persist_vm *p, uint64_t *dirty)
{
    if (!p->chain || p->chain->partial)
        return;
    uint64_t words = snap_dirty_bitmap_words(vm_memory(p->vm)->size);
    for (uint64_t w = 0; w < words; w++) {
        uint64_t candidates = dirty[w] & ~(p->in_diffs ? p->in_diffs[w] : 0);
        while (candidates) {
            unsigned bit = (unsigned)__builtin_ctzll(candidates);
            candidates &= candidates - 1;
            uint64_t page = w * 64 + bit;
            if (page < p->chain->npages &&
                page_matches_reference(p->chain, vm_memory(p->vm)->host + page * GUEST_PAGE_SIZE, page))
                dirty[w] &= ~(1ull << bit);
        }
    }
}

void persist_note_diff(struct persist_vm *p, const uint64_t *dirty)
{
    if (!p->chain)
        return;
    uint64_t words = snap_dirty_bitmap_words(vm_memory(p->vm)->size);
    if (!p->in_diffs)
        p->in_diffs = snap_dirty_bitmap_new(vm_memory(p->vm)->size);
    for (uint64_t w = 0; w < words; w++)
        p->in_diffs[w] |= dirty[w];
}

void persist_set_reference(struct persist_vm *p, struct snap_chain *chain)
{
    if (p->chain != chain) {
        snap_chain_free(p->chain);
        p->chain = chain;
    }
    g_clear_pointer(&p->in_diffs, g_free);
}

void persist_note_full(struct persist_vm *p, const char *layer_path)
{
    /* The server is complete (persist_vm_fill_all ran before the full
     * snapshot), so it and its chain may go while the VM runs on. */
    g_clear_pointer(&p->uffd, snap_uffd_stop);
    g_autoptr(GError) error = NULL;
    const char *paths[] = { layer_path };
    struct snap_chain *chain = snap_chain_open(paths, 1, SNAP_CHAIN_DEFAULT, &error);
    if (!chain) /* not fatal: later diffs are then just larger */
        g_warning("snapshot: cannot reopen %s as the reference for later diffs: %s", layer_path, error->message);
    snap_chain_free(p->chain);
    p->chain = chain;
    g_clear_pointer(&p->in_diffs, g_free);
}

/* ---- vm.info ---- */

static void add_bool(JsonBuilder *b, const char *name, bool value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_boolean_value(b, value);
}

static void add_ondemand_stats(struct snap_uffd *u, JsonBuilder *b)
{
    struct snap_uffd_stats st;
    snap_uffd_get_stats(u, &st);
    json_builder_begin_object(b);
    state_add_uint(b, "faults", st.faults);
    state_add_uint(b, "pages_copied", st.pages_copied);
    state_add_uint(b, "pages_zeroed", st.pages_zeroed);
    state_add_uint(b, "blocks_prefetched", st.blocks_prefetched);
    add_bool(b, "prefetch_done", st.prefetch_done);
    add_bool(b, "complete", st.complete);
    add_bool(b, "failed", st.failed);
    json_builder_end_object(b);
}

void persist_add_info(struct vm *vm, JsonBuilder *b)
{
    struct persist_vm *p = vm_get_persist_state(vm);
    char id[37];
    json_builder_set_member_name(b, "snapshot");
    json_builder_begin_object(b);
    if (p && p->has_layer)
        snap_id_to_string(&p->last_id, id);
    state_add_string(b, "layer_id", p && p->has_layer ? id : NULL);
    state_add_string(b, "restore_mode", p && p->restored ? snap_restore_mode_name(p->restore_mode) : NULL);
    json_builder_set_member_name(b, "ondemand");
    if (p && p->uffd)
        add_ondemand_stats(p->uffd, b);
    else
        json_builder_add_null_value(b);
    json_builder_end_object(b);
    clock_restore_add_info(p ? &p->clock : NULL, p && p->restored, b);
}

JsonObject *persist_restored_vmm_state(struct vm *vm)
{
    struct persist_vm *p = vm_get_persist_state(vm);
    return p && p->vmm_state ? json_node_get_object(p->vmm_state) : NULL;
}
