/* What the snapshot code keeps with a VM (struct vm's persist slot, released by
 * vm_free after the vCPU and device threads stopped and before RAM goes):
 *
 *  - dirty tracking between snapshots: KVM's dirty log of every memory slot
 *    (KVM_MEM_LOG_DIRTY_PAGES is set from boot and from restore) ORed with the
 *    pages the VMM wrote itself (vm_mark_dirty), plus pages already fetched for
 *    a snapshot that then failed ("carry"), so a failed snapshot loses nothing;
 *  - the id of the layer the RAM currently matches (the last snapshot taken or
 *    the top of the chain restored): the only valid parent of a diff;
 *  - for a VM restored on demand, the userfaultfd server and the chain it
 *    serves from (kept open until the server stops).
 *
 * Main thread only, except the on-demand error callback.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include <json-glib/json-glib.h>

#include "persist/clock.h"
#include "ram-snapshot/restore-mode.h"
#include "ram-snapshot/uffd.h"
#include "snapshot/chain.h"
#include "workset-record.h"

struct vm;

struct persist_vm {
    struct vm *vm;
    bool has_layer;       /* last_id is valid */
    snap_id last_id;
    uint64_t *carry;      /* RAM-offset bitmap, or NULL */

    bool restored;
    enum snap_restore_mode restore_mode;
    struct clock_restore clock;  /* how the kvmclock was set on restore */
    JsonNode *vmm_state;         /* restored: state.json's "vmm" object, or NULL */
    struct snap_uffd *uffd;   /* on demand: the server, reading `served` */
    struct snap_chain *served;
    struct persist_workset ws; /* on demand: the working set recorded or served */

    /* The reference: a chain whose content RAM had at one instant (the chain
     * restored, or the last full snapshot), and the pages put in diffs since
     * then. KVM logs more than the guest wrote: on a shadow-paging host a
     * page's first access after its mapping was created (after a restore,
     * every page) is logged when the guest's PTE is already dirty. A logged
     * page that is in no diff since the reference and still holds the
     * reference's content is unchanged in the parent chain too: it is left
     * out of the next diff.
     *
     * Only the layers' paths and ids are kept; the chain is opened while a
     * diff is taken. An open chain maps its files: the space of a snapshot
     * deleted meanwhile would stay allocated as long as the VM runs, and a
     * file truncated under the mapping would fault. A reference that no
     * longer opens as it was (deleted, truncated, replaced) only makes the
     * next diffs larger. */
    GPtrArray *reference_paths; /* char *, base first; NULL: none */
    GArray *reference_ids;      /* snap_id of each */
    uint64_t *in_diffs;         /* RAM-offset bitmap */
};

/* The VM's persist state, created on first use. */
struct persist_vm *persist_vm_get(struct vm *vm);

/* Every page written since the last reset: KVM's logs (fetching clears them),
 * the VMM's own writes and the carry. g_free the result. The VM must be paused. */
uint64_t *persist_dirty_collect(struct persist_vm *p, GError **error);
/* A snapshot with `dirty` succeeded (dirty is freed) or failed (dirty becomes
 * the carry, so the next snapshot still sees those pages). */
void persist_dirty_settle(struct persist_vm *p, uint64_t *dirty, bool snapshot_ok);

/* Drop from dirty the pages unchanged since the reference (see above). */
void persist_dirty_drop_unchanged(struct persist_vm *p, uint64_t *dirty);
/* A snapshot succeeded: a diff's pages join in_diffs; a full layer `id` at
 * path becomes the new reference (the on-demand server, complete by then,
 * stops and its chain is closed). */
void persist_note_diff(struct persist_vm *p, const uint64_t *dirty);
void persist_note_full(struct persist_vm *p, const char *layer_path, const snap_id *id);
/* A restore: the chain restored is the reference (its paths and ids; the
 * caller keeps or closes the chain). */
void persist_set_reference(struct persist_vm *p, const struct snap_chain *chain);

/* On demand: make every page the chain holds resident (before a full
 * snapshot), then the server may stop. No-op otherwise. A bad block on the
 * way ends the process (vm_report_fatal): it does not return then. */
void persist_vm_fill_all(struct persist_vm *p);
