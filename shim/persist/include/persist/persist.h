/* vm.snapshot and vm.restore below the API: Cloud Hypervisor's snapshot
 * directory (config.json, state.json, memory-ranges) with vsnap's memory
 * layers: full or diff, and restore by copy, merge or on demand
 * (../ram-snapshot/).
 *
 * The directory's layout, state.json's version and its "memory" record belong
 * to the snapshot library (common/snapshot/directory.h, README.md there); this
 * folder writes and reads the rest through it:
 *   config.json    the VmConfig (config/vm-config-json.h), as vm.info shows it
 *   state.json     "kvm": {...}, "vcpus": [...], "devices": {...} beside the
 *                  library's "vsnap_state_version" and "memory"
 *   memory-ranges  the layer (common/snapshot/layer.h), a diff naming its parent
 *
 * A snapshot is written into a temporary directory beside the destination and
 * renamed into place once complete and fsynced: on any error nothing of it
 * remains, the VM is as it was and its dirty pages are kept for the next try.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/vm-config.h"
#include "persist/persist-error.h"
#include "ram-snapshot/restore-mode.h"
#include "state/state-json.h"
#include "core/vm.h"

struct persist_snapshot_request {
    const char *destination_url; /* file:///dir: absent, or a directory without snapshot files */
    bool diff;
    const char *parent_url;      /* diff: the VM's last snapshot */
    JsonNode *vmm_state;         /* NULL, or an object the VMM keeps in state.json as "vmm" */
    bool live;                   /* the VM runs: persist_snapshot_live */
    bool scratch_on_disk;        /* live: the scratch image beside the layer, not in memory */
    unsigned max_passes;         /* live: the passes' limit, 0 for PERSIST_LIVE_MAX_PASSES */
    unsigned max_ms;             /* live: their time limit past the first, 0 for PERSIST_LIVE_MAX_MS */
};

struct persist_snapshot_result {
    char id[37];
    uint64_t data_pages;
    uint64_t file_bytes;
    uint64_t elapsed_ns;
    /* persist_snapshot_live: */
    uint64_t pause_us;    /* the vCPUs' stop, measured around it */
    unsigned passes;      /* copies of dirty pages while the guest ran (the first: all of the layer's) */
    uint64_t copied_pages;/* pages copied into the scratch image, all passes and the stop */
    uint64_t final_pages; /* of those, copied with the vCPUs stopped */
    uint64_t first_pass_pages; /* of those, the first pass's (the rest: pages the guest rewrote meanwhile) */
    /* NULL when the rest fit the stop's budget; else why the stop came
     * anyway, with more left: "passes" (PERSIST_LIVE_MAX_PASSES) or "time"
     * (PERSIST_LIVE_MAX_MS): a guest dirtying faster than the copy. */
    const char *forced_stop;
};

/* Check the request alone (destination, parent) without touching the VM:
 * what persist_snapshot refuses before it starts. */
bool persist_snapshot_check(struct vm *vm, const struct persist_snapshot_request *req, GError **error);
/* The VM must be paused. result may be NULL. Each writable disk's layer goes
 * into the snapshot (persist/disk-layers.h) and, once it is committed, cfg's
 * disks name their new chain and overlay (vsnap_chain, vsnap_overlay). */
bool persist_snapshot(struct vm *vm, struct vm_config *cfg, const struct persist_snapshot_request *req,
                      struct persist_snapshot_result *result, GError **error);

/* The same snapshot of a running VM (a vsnap extension), which keeps running
 * while its RAM is written: the pages are copied into a scratch image (in
 * memory, or with scratch_on_disk in the partial directory), then again those the dirty log shows rewritten meanwhile,
 * until few are left (PERSIST_LIVE_PAGE_BUDGET) or after
 * PERSIST_LIVE_MAX_PASSES passes or PERSIST_LIVE_MAX_MS past the first (or the
 * request's max_passes, max_ms: a forced stop, result->forced_stop); then the vCPUs stop
 * (vm_pause, every device quiesced) for the rest, the vCPU and device state,
 * and run on. The disks stay paused (their requests wait; the vCPUs do not)
 * until their layers are sealed, the memory layer is written from the scratch
 * image and the directory is committed, when they move onto their new
 * overlays. So the snapshot is the VM at the instant of the stop, a layer like
 * any other. On failure or cancel nothing is left, the VM runs, its dirty
 * pages go into the next snapshot.
 *
 * It runs as a job: persist_live_start checks the request and returns at
 * once; the passes and the layer's write run on a thread of their own, the
 * stop and the end on the calling thread's main context (the VM's owner),
 * which must keep running and must not change the VM meanwhile (no pause,
 * resume, teardown: persist_live_end_now first). done is called there, once,
 * with the job's result (error PERSIST_ERROR_CANCELLED after a cancel); the
 * job is gone after it. */
#define PERSIST_LIVE_PAGE_BUDGET 1024u /* 4 MiB: about 1-2 ms of copying with the vCPUs stopped */
#define PERSIST_LIVE_MAX_PASSES 8u
#define PERSIST_LIVE_MAX_MS 3000u
struct persist_live_job;
typedef void (*persist_live_done_func)(bool ok, const struct persist_snapshot_result *result, const GError *error,
                                       void *data);
struct persist_live_job *persist_live_start(struct vm *vm, struct vm_config *cfg,
                                            const struct persist_snapshot_request *req,
                                            persist_live_done_func done, void *data, GError **error);
/* End the job at its next step (a step of a pass: 16 MiB; the stop, if
 * begun, completes; a layer being written is finished, then dropped). */
void persist_live_cancel(struct persist_live_job *job);
/* Cancel, and wait for the end here (done is called before it returns). */
void persist_live_end_now(struct persist_live_job *job);
/* vm.info's vsnap.snapshot_job: {phase, pass, pages copied of the pass's,
 * copied_pages, ram_pages, dirty_pages_per_s, elapsed_ms, cancelling}. */
void persist_live_add_info(struct persist_live_job *job, JsonBuilder *b);

struct persist_restore_request {
    const char *source_url;
    enum snap_restore_mode mode;
    bool prefault;             /* bring every page in before the vCPUs run */
    uint64_t block_size;       /* on demand: fault block, 0 = default (64 KiB) */
    bool prefetch;             /* on demand: background prefetch once running */
    bool no_readahead;         /* on demand: no readahead after faults (ram-snapshot/uffd.h) */
    bool no_workset;           /* on demand: neither record nor serve a working set (workset-record.h) */
    /* On demand: the recorded working set is not written into the snapshot
     * but held for the client (persist_workset_text), which owns the
     * directory; workset_held(workset_opaque) says it is there. */
    bool workset_hand_over;
    void (*workset_held)(void *opaque);
    void *workset_opaque;
    JsonObject *config_overrides; /* NULL or {vsock: {socket}, serial: {...}, console: {...},
                                   *          vsnap_work_dir: "/abs/dir" (the disks' new overlays),
                                   *          net: [...], disks: [{id, path, readonly}],
                                   *          payload: {kernel, initramfs, cmdline}, rng: {src}} */
};

/* Build the VM of the snapshot at source_url, paused (vCPU threads parked):
 * vm_resume runs it. *cfg_out receives the config it runs with (overrides
 * applied). */
struct vm *persist_restore(const struct persist_restore_request *req, const struct vm_callbacks *cb,
                           struct vm_config **cfg_out, GError **error);

/* A snapshot's config.json (root, changed in place) with vm.restore's
 * config_overrides applied, as the VmConfig the restored VM runs with;
 * errors (PERSIST_ERROR_INVALID) name dir. from_store: the snapshot came
 * from a store, so every host path comes from overrides (host-paths.h). */
struct vm_config *persist_config_with_overrides(JsonNode *root, JsonObject *overrides, bool from_store,
                                                const char *dir, GError **error);

/* vm.info's vsnap.snapshot member: the id RAM matches (the parent a diff must
 * name), how the VM was restored, and the on-demand server's progress:
 *   {"layer_id": "..."|null, "restore_mode": "ondemand"|...|null,
 *    "ondemand": {"faults", "pages_copied", "pages_zeroed", "pages_unregistered", "blocks_prefetched",
 *                 "blocks_read_ahead", "prefetch_done", "complete", "failed",
 *                 "prefetch_hits", "prefetch_misses", "workset_blocks", "workset_ms",
 *                 "record": "none"|"recorded"|"used"|"refreshed", "record_error"?}|null} */
void persist_add_info(struct vm *vm, JsonBuilder *b);

/* The guest announced READY (the VMM's readiness service): a VM restored on
 * demand keeps the working set it touched until now (plus a grace period)
 * with its snapshot, for the next restore to fetch first. */
void persist_guest_ready(struct vm *vm);
/* The working set a restore asked to hand over recorded, as the snapshot's
 * workset file would hold it (snapshot/workset.h); NULL when none is held. */
const char *persist_workset_text(struct vm *vm);
/* vm.info's vsnap.clock comes with it: see persist/clock.h. */

/* A restored VM: the "vmm" object its snapshot's state.json held (the
 * request's vmm_state when it was taken), or NULL. Owned by the VM. */
JsonObject *persist_restored_vmm_state(struct vm *vm);

/* Parse a file:// URL (or a plain absolute path) into a path. */
char *persist_path_from_url(const char *url, const char *field, GError **error);
