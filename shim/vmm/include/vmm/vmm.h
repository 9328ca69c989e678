/* struct vmm: the one VM a shim process manages and its lifecycle, as Cloud
 * Hypervisor's API sees it (Created -> Running <-> Paused -> Shutdown), plus what
 * the guest did last (poweroff, reboot, crash) and its readiness.
 *
 * Every function runs on the main thread. Guest-initiated stops and readiness
 * arrive on vCPU/device threads and are handed to the main thread here.
 * Errors use SHIM_ERROR (config/shim-error.h), whose code is the HTTP status.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/shim-error.h"
#include "config/vm-config.h"
#include "persist/persist.h"
#include "vmm/events.h"

enum vmm_state {
    VMM_STATE_NOT_CREATED,
    VMM_STATE_CREATED,
    VMM_STATE_RUNNING,
    VMM_STATE_PAUSED,
    VMM_STATE_SHUTDOWN,
};

struct vmm;

/* exit_requested runs (on the main thread) when vmm.shutdown was asked for, or
 * when the guest powered off and nothing else can happen (no API socket). */
struct vmm *vmm_new(struct events *events, void (*exit_requested)(void *data), void *data);
/* Tear down the VM, if any. The events monitor stays the caller's. */
void vmm_free(struct vmm *vmm);

/* Without an API the process has nothing to do once the guest powered off. */
void vmm_set_exit_on_guest_poweroff(struct vmm *vmm, bool exit);

const char *vmm_state_to_string(enum vmm_state state);
enum vmm_state vmm_get_state(const struct vmm *vmm);

/* Takes cfg. Checks that the files it names exist. */
bool vmm_create(struct vmm *vmm, struct vm_config *cfg, GError **error);
bool vmm_boot(struct vmm *vmm, GError **error);
bool vmm_pause(struct vmm *vmm, GError **error);
bool vmm_resume(struct vmm *vmm, GError **error);
bool vmm_shutdown_vm(struct vmm *vmm, GError **error);
bool vmm_reboot(struct vmm *vmm, GError **error);
bool vmm_delete(struct vmm *vmm, GError **error);
bool vmm_power_button(struct vmm *vmm, GError **error);
/* vm.coredump (Cloud Hypervisor's): guest memory and the vCPUs' registers
 * as an ELF core file written to fd (persist/coredump.h). Paused, or
 * (vsnap) Running: a live dump, the vCPUs stopped only to read registers. */
bool vmm_coredump(struct vmm *vmm, int fd, GError **error);
/* vm.nmi (Cloud Hypervisor's): an NMI on vCPU 0, Running or Paused (taken
 * when it runs). */
bool vmm_nmi(struct vmm *vmm, GError **error);
/* vsnap's vm.send-scancodes: set-1 scan code bytes typed on the i8042's
 * keyboard (devices/i8042.h); 409 when the guest cannot take them now. */
#define VMM_SCANCODES_MAX 64 /* the i8042's buffer (I8042_QUEUE_BYTES) */
bool vmm_send_scancodes(struct vmm *vmm, const uint8_t *codes, unsigned n, GError **error);
/* Tear the VM down and ask for the process to exit. */
void vmm_request_exit(struct vmm *vmm);

/* vm.add-disk (the config gets a copy of disk) and
 * vm.remove-device: only while the VM is Created or Shutdown (405 otherwise:
 * virtio-mmio cannot hot-plug); the change takes effect at the next boot.
 * A duplicate id is 409, an unknown one 404. */
bool vmm_add_disk(struct vmm *vmm, const struct disk_config *disk, GError **error);
bool vmm_remove_device(struct vmm *vmm, const char *id, GError **error);
/* vm.add-net, the same way (cold add: 405 while Running or Paused); the
 * config takes copies of net's descriptors. */
bool vmm_add_net(struct vmm *vmm, const struct net_config *net, GError **error);
/* vm.move-disk-layers (vsnap): the daemon moved (renamed) the directory
 * from, holding disk layers the VM's chains use, to to; or, with to NULL,
 * the layers in from were folded into the layers above them (and may be
 * removed). The config (what vm.info shows, what the next snapshot reopens
 * and names as parent) follows; the open chains keep their descriptors.
 * *moved: how many layers of the chains were in from. */
bool vmm_move_disk_layers(struct vmm *vmm, const char *from, const char *to, unsigned *moved, GError **error);
/* Block jobs (vsnap's vm.disk-pull, vm.disk-job-info, vm.disk-job-speed,
 * vm.disk-job-cancel): a pull copies every block the chain's layers hold
 * into disk id's overlay while the guest runs (Running or Paused), at most
 * bandwidth bytes/s (0: unlimited), then the disk runs on its overlay over
 * the image and its vsnap_chain is empty. One job per disk (409); a disk
 * without layers is 400; no snapshot while one runs (409). Events, source
 * "disk": job-started, job-completed, job-failed ({"error"}), job-cancelled,
 * each with {"id", "kind": "pull"}. */
struct disk_job_info {
    const char *kind;     /* "pull", "commit", "copy" */
    bool ready;           /* a commit's copy is done: vm.disk-job-pivot may come */
    uint64_t cur, end;    /* bytes looked at, the disk's bytes */
    uint64_t copied;      /* bytes copied into the overlay */
    uint64_t bandwidth;   /* bytes/s, 0: unlimited */
};
bool vmm_disk_pull(struct vmm *vmm, const char *id, uint64_t bandwidth, GError **error);
/* vm.disk-commit: an active commit. A pull first (the image untouched),
 * then the job is READY (event job-ready) and waits, the disk on its
 * overlay over the image. vm.disk-job-pivot then pauses the VM for the
 * overlay's blocks to be written into the image and puts the disk on the
 * image alone (no chain, no overlay; event job-completed). Cancelled
 * before the pivot, the disk stays on its pulled overlay. */
/* image_fd: the image open for writing, sent by the daemon (a confined
 * shim cannot open it so itself); -1: the shim opens its path. */
bool vmm_disk_commit(struct vmm *vmm, const char *id, uint64_t bandwidth, int image_fd, GError **error);
bool vmm_disk_job_pivot(struct vmm *vmm, const char *id, GError **error);
/* vm.disk-copy {"id", "target": path, "bandwidth"}: virsh blockcopy. target_fd: the new image (the daemon's,
 * at least the disk's size, empty), sent along. With the VM paused a
 * moment the disk goes behind a mirror (block/blk-backend.h's block copy),
 * the copy runs and is READY (job-ready) at the end. vm.disk-job-pivot then
 * puts the disk on the target alone (no chain, no overlay; job-completed);
 * vm.disk-job-cancel back on its source (job-cancelled), the target unused. */
bool vmm_disk_copy(struct vmm *vmm, const char *id, const char *target_path, uint64_t bandwidth, int target_fd,
                   GError **error);
bool vmm_disk_job_info(struct vmm *vmm, const char *id, struct disk_job_info *out, GError **error);
bool vmm_disk_job_set_speed(struct vmm *vmm, const char *id, uint64_t bandwidth, GError **error);
bool vmm_disk_job_cancel(struct vmm *vmm, const char *id, GError **error);
/* vm.disk-resize (vsnap): the daemon grew disk id's image (blockresize);
 * its capacity follows and the guest gets the configuration-change
 * interrupt. *capacity: the bytes now. A disk on snapshot layers is 400
 * (its layers keep their size); an image that shrank 400. Running or Paused. */
bool vmm_disk_resize(struct vmm *vmm, const char *id, uint64_t *capacity, GError **error);
/* vm.set-link (vsnap): the link of interface id as the guest sees it; only
 * while Running or Paused; an unknown id is 404. */
bool vmm_set_link(struct vmm *vmm, const char *id, bool up, GError **error);

/* vm.info and vm.counters bodies, or NULL and a SHIM_ERROR. */
JsonNode *vmm_info(struct vmm *vmm, GError **error);
JsonNode *vmm_counters(struct vmm *vmm, GError **error);
/* vm.workset: {"workset": the record a restore with "ondemand_workset_write":
 * false held (text of snapshot/workset.h), or null}; the event
 * vm/workset-recorded says one is there. */
JsonNode *vmm_workset(struct vmm *vmm, GError **error);

/* vm.snapshot (shim/persist/): only while Paused (405 otherwise). Emits
 * snapshotting/snapshotted (with the new layer's id). result may be NULL. */
bool vmm_snapshot(struct vmm *vmm, const struct persist_snapshot_request *req,
                  struct persist_snapshot_result *result, GError **error);
/* A live snapshot ("live": true, the VM Running), or one of a Paused VM
 * without "live" taken as a job (vm.snapshot to a file:// destination: so
 * the API answers and vm.cancel-snapshot ends it meanwhile): checks the
 * request and starts the job (persist_live_start), which ends later: done is called
 * once, on the main loop, with its result or its error (SHIM_ERROR_CANCELLED
 * after vmm_cancel_snapshot; others as vmm_snapshot's). Until then the VM
 * is not paused, resumed, rebooted, shut down or deleted through the API
 * (SHIM_ERROR_BUSY); a guest's own stop, or the process's exit, ends the
 * job first (cancelled). */
typedef void (*vmm_live_done_func)(bool ok, const struct persist_snapshot_result *result, const GError *error,
                                   void *data);
bool vmm_snapshot_live(struct vmm *vmm, const struct persist_snapshot_request *req, vmm_live_done_func done,
                       void *data, GError **error);
/* PUT vm.cancel-snapshot: the snapshot job ends at its next step (done
 * reports it); SHIM_ERROR_WRONG_STATE without one. */
bool vmm_cancel_snapshot(struct vmm *vmm, GError **error);
/* vm.restore: only without a VM (405 otherwise). Emits restoring/restored; the
 * VM is then Paused, or resumed (resuming/resumed) when resume is true. */
bool vmm_restore(struct vmm *vmm, const struct persist_restore_request *req, bool resume, GError **error);
/* The VM's vsnap_work_dir (where its overlays live), or NULL: none yet, or no VM. */
const char *vmm_work_dir(const struct vmm *vmm);

/* Readiness (for GET vm.wait-ready): the guest's announcement since the last
 * boot, as JSON text, or NULL. A watch is called once, on the main thread, with
 * the announcement, or with NULL when the VM stops before announcing; it is
 * removed after that call. */
const char *vmm_ready_info(const struct vmm *vmm);
typedef void (*vmm_ready_func)(const char *ready_info, void *data);
guint vmm_watch_ready(struct vmm *vmm, vmm_ready_func func, void *data);
void vmm_unwatch_ready(struct vmm *vmm, guint id);
