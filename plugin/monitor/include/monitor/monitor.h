/* Client of the shim's Cloud Hypervisor API over its UNIX socket (libcurl).
 * One small function per endpoint; each builds its own request body, so this
 * file is the one place that knows what the shim is sent. Errors are VSNAP_VIR_ERROR with
 * VIR_ERR_OPERATION_FAILED and the shim's own message when it sent one.
 * Every call has a timeout; one that runs out fails with
 * VIR_ERR_OPERATION_TIMEOUT: the shim is stuck, and the caller that holds
 * the domain's job stops it (process_kill_if_stuck). */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf/domain-conf.h"

/* Where one disk of the VM is now (vm.info's config.disks[i], vsnap's
 * fields): its sealed layers base first and its active overlay; no overlay
 * when the guest writes the image itself (no snapshot yet). */
struct vm_disk_chain {
    char *id;
    char **layers;
    char *overlay;
};

struct vm_info {
    char *state;                 /* Created, Running, Paused, Shutdown */
    uint64_t memory_actual_size; /* bytes */
    char *last_stop_reason;      /* vsnap extension: poweroff, crash, reboot, shutdown */
    bool ready;                  /* vsnap extension: the guest announced readiness */
    char *serial_pty;            /* vsnap extension: the serial's pty slave (Pty mode) */
    struct vm_disk_chain *disks; /* config.disks, in order */
    size_t n_disks;
};

void vm_info_clear(struct vm_info *info);

/* The text of an error answer: Cloud Hypervisor's JSON list of messages
 * joined with ": ", the {"error": "..."} of older shims, or the start of
 * whatever else came. */
char *monitor_error_text(const char *body, size_t len);

bool monitor_ping(const char *api_socket, GError **error);
/* vm.create; with descriptors (the taps of the config's "net", in order),
 * they go with the request over SCM_RIGHTS. */
bool monitor_vm_create(const char *api_socket, const char *vm_config_json, const int *fds, size_t n_fds,
                       GError **error);
/* vsnap's vm.set-link {"id": "net0", "up": false}: the guest sees its link
 * go down (or up). */
bool monitor_vm_set_link(const char *api_socket, const char *id, bool up, GError **error);
/* vm.move-disk-layers: the disk layers the running VM's chains have in
 * directory from are in to now (the daemon renamed it), or (to NULL) were
 * folded into the layers above them and leave the chains. */
bool monitor_vm_move_disk_layers(const char *api_socket, const char *from, const char *to, GError **error);
bool monitor_vm_boot(const char *api_socket, GError **error);
bool monitor_vm_pause(const char *api_socket, GError **error);
bool monitor_vm_resume(const char *api_socket, GError **error);
bool monitor_vm_power_button(const char *api_socket, GError **error);
bool monitor_vm_reboot(const char *api_socket, GError **error);
/* Cloud Hypervisor's vm.coredump, with the file's descriptor sent with it
 * (vsnap: the body {} and one descriptor): the VM's ELF core, written and
 * synced by the shim. Paused, or running for a live dump. More time the more
 * RAM (ram_bytes), as vm.snapshot. */
bool monitor_vm_coredump(const char *api_socket, int fd, uint64_t ram_bytes, GError **error);
/* Cloud Hypervisor's vm.nmi: an NMI on vCPU 0. */
bool monitor_vm_nmi(const char *api_socket, GError **error);
/* vsnap's vm.send-scancodes {"scancodes": [...]}: n (1 to 64) bytes of scan
 * code set 1 typed on the i8042's keyboard; refused (409) while the guest has
 * not read what came before, or turned the keyboard or translation off. */
bool monitor_vm_send_scancodes(const char *api_socket, const uint8_t *codes, size_t n, GError **error);
bool monitor_vm_shutdown(const char *api_socket, GError **error);
bool monitor_vmm_shutdown(const char *api_socket, GError **error);
bool monitor_vm_info(const char *api_socket, struct vm_info *info, GError **error);

/* vm.snapshot of the paused VM into destination_url (file://DIR); with
 * parent_url, a diff on the snapshot there (vsnap's "mode": "diff"). It and
 * vm.restore get more time the more RAM (ram_bytes, live->memory_kib) they
 * read or write. *refused (when given) says whether the shim answered and
 * refused the request (HTTP 4xx but 409), as opposed to failing at it or
 * not answering; *cancelled whether vm.cancel-snapshot ended it (409). */
bool monitor_vm_snapshot(const char *api_socket, const char *destination_url,
                         const char *parent_url, uint64_t ram_bytes, bool *refused,
                         bool *cancelled, GError **error);
/* The same of the running VM, live (vsnap's "live": true): the shim answers
 * once it is written, with the guest running all along but for a short
 * stop. *refused as above, but a cancel (409: vm.cancel-snapshot) is not a
 * refusal; *cancelled says it was one. *result: the shim's figures (zero
 * where its answer has none). */
struct monitor_live_result {
    uint64_t pause_us, copied_pages, final_pages;
    unsigned passes;
    char forced_stop[16];       /* "passes" or "time" when the stop was forced, else "" */
};
bool monitor_vm_snapshot_live(const char *api_socket, const char *destination_url,
                              const char *parent_url, uint64_t ram_bytes, bool *refused,
                              bool *cancelled, struct monitor_live_result *result, GError **error);
/* The forced stop's limits every live snapshot asks for (vm.snapshot's
 * live_max_passes, live_max_ms; 0: the shim's defaults), from the daemon's
 * configuration (live_snapshot_max_passes, live_snapshot_max_ms). */
void monitor_set_live_limits(unsigned max_passes, unsigned max_ms);
/* vm.cancel-snapshot: the snapshot job under way (live or not) ends at its next step. */
bool monitor_vm_cancel_snapshot(const char *api_socket, GError **error);
/* vm.info's vsnap.snapshot_job, the live snapshot under way (false, no
 * error, when none runs). */
struct monitor_snapshot_job {
    uint64_t ram_pages, copied_pages, pass_pages_total, pass_pages_copied;
    uint64_t dirty_pages_per_s;
    unsigned pass;
    char phase[16];
};
bool monitor_vm_snapshot_job(const char *api_socket, struct monitor_snapshot_job *job, GError **error);

/* vm.info's vsnap.snapshot.ondemand: the on-demand server of a VM restored
 * that way (false, no error, when there is none). */
struct monitor_ondemand {
    uint64_t faults, pages_copied, blocks_read_ahead, blocks_prefetched;
    uint64_t prefetch_hits, prefetch_misses, workset_blocks;
    int64_t workset_ms;  /* -1: READY not seen yet */
    char record[16];     /* none, recorded, used, refreshed */
};
bool monitor_vm_ondemand(const char *api_socket, struct monitor_ondemand *od, GError **error);
/* vm.workset: the working-set record a restore with hand_over_workset
 * recorded (*text, the snapshot's workset file; NULL while none is held). */
bool monitor_vm_workset(const char *api_socket, char **text, GError **error);

/* vm.restore into a new shim. Its config_overrides give the snapshot's VM
 * every host path of this run: the vsock socket, the serial port and
 * console, the kernel and initramfs, the rng's source and the disks' images
 * of the live definition, the work directory for the disks' overlays, and
 * its interfaces ("net": id, mac and the tap's descriptor, net_fds[i] for
 * live->nets[i], sent over SCM_RIGHTS). */
struct monitor_restore {
    const char *source_url;      /* file://DIR */
    const char *mode;            /* memory_restore_mode: copy, merge, ondemand, shared */
    bool resume;
    bool once;                   /* restored only this once (a save image): on demand, record no working set */
    bool hand_over_workset;      /* on demand: the shim holds the record for vm.workset, not writing it */
    const struct domain_def *live;
    const char *vsock_socket;
    const char *disk_work_dir;   /* vsnap_work_dir: where the new overlays go (NULL: none given) */
    const int *net_fds;
    size_t n_net_fds;
};
bool monitor_vm_restore(const char *api_socket, const struct monitor_restore *restore,
                        GError **error);

/* One disk's counters from vm.counters (the shim keys them by the disk's id,
 * which the daemon makes the target name). */
struct disk_counters {
    uint64_t read_ops, read_bytes, write_ops, write_bytes, flush_ops, io_errors;
    uint64_t nospace_errors;  /* of io_errors, a full file system */
    uint64_t last_errno;      /* the last I/O error's, 0: none */
};
/* The counters of disk id; VIR_ERR_OPERATION_FAILED when the shim has no
 * such disk. */
bool monitor_vm_disk_counters(const char *api_socket, const char *id, struct disk_counters *out,
                              GError **error);

/* Block jobs on a disk (the shim's vm.disk-pull, vm.disk-commit, vm.disk-job-pivot, vm.disk-job-speed,
 * vm.disk-job-cancel and vm.disk-job-info; docs/cloud-hypervisor-api.md).
 * bandwidth: bytes/s, 0 unlimited. *found false: the disk has no job. */
struct disk_job_progress {
    uint64_t cur, end, bandwidth;
    bool ready;   /* an active commit's copy is done: the pivot may come */
};
/* image_fd: the disk's image, open for writing, sent along (SCM_RIGHTS). */
bool monitor_vm_disk_commit(const char *api_socket, const char *id, uint64_t bandwidth, int image_fd,
                            GError **error);
bool monitor_vm_disk_job_pivot(const char *api_socket, const char *id, GError **error);
bool monitor_vm_disk_pull(const char *api_socket, const char *id, uint64_t bandwidth, GError **error);
bool monitor_vm_disk_job_speed(const char *api_socket, const char *id, uint64_t bandwidth, GError **error);
bool monitor_vm_disk_job_cancel(const char *api_socket, const char *id, GError **error);
/* The disk's image grew: the shim's disk follows (*capacity: its bytes now). */
bool monitor_vm_disk_resize(const char *api_socket, const char *id, uint64_t *capacity, GError **error);
/* blockcopy: target (its path) open for writing, sent along. */
bool monitor_vm_disk_copy(const char *api_socket, const char *id, const char *target, uint64_t bandwidth,
                          int target_fd, GError **error);
bool monitor_vm_disk_job_info(const char *api_socket, const char *id, struct disk_job_progress *out, bool *found,
                              GError **error);
