/* Start, stop and reattach of shim processes. A shim runs in its own session
 * (setsid, double fork: never our child) so it outlives the daemon; the
 * daemon finds it again through the runtime directory:
 *   <run_dir>/<name>/api.sock      the shim's Cloud Hypervisor API
 *   <run_dir>/<name>/vsock.sock    hybrid vsock
 *   <run_dir>/<name>/events        event monitor FIFO
 *   <run_dir>/<name>/pid           the shim's pid
 *   <run_dir>/<name>/domain.xml    the live definition
 *   <run_dir>/<name>/status        id, generation, readiness (key file)
 * All functions that change dom->run are called with dom->job held. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "domain/state.h"

struct domain_run {
    gint refs;
    pid_t pid;
    int pidfd;          /* readable when the shim has exited */
    int fifo_fd;        /* event monitor, read side (opened O_RDWR: never EOF) */
    int wake_fd;        /* eventfd: tells the watcher thread to stop */
    char *dir, *api_socket, *vsock_socket, *fifo_path, *pid_path, *status_path, *xml_path,
        *log_path;
    char *disk_dir;     /* the domain's disk directory (disk-state.h): the shim's vsnap_work_dir */
    bool stopping;      /* under dom->lock: an exit of the shim is expected */
    int stop_reason;    /* under dom->lock: the shut-off reason of that stop (in the status
                           file, so a daemon that dies during the stop is finished by the next) */
    bool ready;         /* under dom->lock: the guest announced readiness */
    /* While the VM is set up (process_start_how.setup_vm): the taps of the
     * live definition's interfaces, net_fds[i] for nets[i], to send along. */
    const int *net_fds;
    size_t n_net_fds;
    /* Under dom->lock: the snapshot directory this run restored on demand
     * from, while its shim holds a working-set record the daemon has not
     * written there yet (process_keep_workset); NULL: none to come. */
    char *workset_dir;
};

struct domain_run *domain_run_ref(struct domain_run *run);
void domain_run_unref(struct domain_run *run);

/* Launch a shim, create and boot the VM; on success dom is running. */
bool process_start(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error);

/* A start that restores instead of booting (snapshot revert, restore, managed
 * save): setup_vm brings the new shim's VM to life (vm.restore) in place of
 * vm.create + vm.boot; def, when given, is the live definition to run (the one
 * saved with the image); state/reason and event/detail are what the domain
 * becomes and announces. */
struct process_start_how {
    const struct domain_def *def;
    bool (*setup_vm)(struct domain_run *run, const struct domain_def *live, void *data,
                     GError **error);
    void *data;
    int state, reason;
    int event, detail;
    /* def runs this once: a persistent domain's own definition stays its
     * definition for the next boot (a restore, as libvirt's), instead of
     * being replaced by def (a revert). */
    bool keep_definition;
    /* Directories the shim reads but does not own (a clone's origin
     * snapshot's chain), NULL-terminated; NULL: none. */
    const char *const *read_only_dirs;
};
bool process_start_with(struct vsnap_driver *drv, struct vsnap_domain *dom,
                        const struct process_start_how *how, GError **error);
/* Stop the shim (SIGTERM, then SIGKILL unless graceful) and mark dom shut
 * off with reason. The caller emits the event. */
bool process_stop(struct vsnap_driver *drv, struct vsnap_domain *dom, int reason,
                  bool graceful, GError **error);
/* A call to dom's shim ran out of time (error is VIR_ERR_OPERATION_TIMEOUT,
 * see monitor.h): the shim is stuck, and the next call would wait again.
 * It is killed; its watcher finds it gone and, once the caller's job ends,
 * the domain is shut off (crashed) with a Stopped Crashed event. Any other
 * error (or NULL) leaves the shim alone. Call with dom->job held. */
void process_kill_if_stuck(struct vsnap_domain *dom, const GError *error);
/* After the shim exited on its own: forget the run, mark shut off. */
void process_cleanup(struct vsnap_driver *drv, struct vsnap_domain *dom, struct domain_run *run,
                     int reason);
/* Reattach every shim found in run_dir. Domains are added to the list
 * (persistent ones are already in it). */
void process_reattach_all(struct vsnap_driver *drv);
/* A file in the runtime directory of an active domain; NULL when inactive. */
char *process_run_path(struct vsnap_domain *dom, const char *file);
/* Rewrite the status file (call with dom->lock held). */
void process_write_status_locked(struct vsnap_domain *dom);
/* A state the daemon brought the running domain to: set, written to the
 * status file and announced as a lifecycle event (call with dom->lock held). */
void process_set_state_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, int state,
                              int reason, int event, int detail);
/* After a snapshot: the disks of dom's running VM are where its shim says
 * (vm.info): the live definition, its status file and the domain's disk
 * record follow. Call with dom->job held. */
bool process_refresh_disks(struct vsnap_domain *dom, GError **error);

/* The disk layers in snapshot_dir left the chains of dom's running VM
 * (folded into a child's): its live definition, status file and disk record
 * follow. Nothing when dom is not running. Call with dom->job held. */
bool process_drop_disk_layers(struct vsnap_domain *dom, const char *snapshot_dir, GError **error);
/* The directory from, whose disk layers the chains of dom's running VM use,
 * was renamed to to: its shim is told (vm.move-disk-layers), then its live
 * definition, status file and disk record follow. Nothing when dom is not
 * running. Call with dom->job held. */
bool process_move_disk_layers(struct vsnap_domain *dom, const char *from, const char *to, GError **error);
/* The layer paths of dom's running VM's chains as its shim has them now
 * (vm.info), missing files included; empty when not running. */
bool process_shim_disk_layers(struct vsnap_domain *dom, GPtrArray **layers, GError **error);

/* A transient domain that stopped for good (or an undefined one): its
 * disks go back to being their images (disk_state_release). False when a
 * fold failed (logged): the record then stays, and so must the snapshot
 * directories holding its layers. Call with dom->job held, dom inactive. */
bool process_release_disks(struct vsnap_driver *drv, struct vsnap_domain *dom);

/* The working-set record run's shim holds (vm.workset), written into the
 * snapshot directory it restored from: on the shim's workset-recorded event,
 * and before the shim is stopped. Nothing while it records, or when it
 * restored nothing on demand. */
void process_keep_workset(struct vsnap_driver *drv, struct vsnap_domain *dom, struct domain_run *run);

/* The last lines of the shim's log (why it died: a seccomp report, say). */
char *process_log_tail(const struct domain_run *run);
/* Resident memory of the shim (VmRSS), in KiB (0 when unknown). */
uint64_t process_rss_kib(pid_t pid);
/* CPU time used by the shim so far, in nanoseconds (0 when unknown). */
uint64_t process_cpu_time_ns(pid_t pid);

/* Per-vCPU facts from the shim's "vcpuN" threads in /proc. */
struct vcpu_stat {
    bool found;
    uint64_t cpu_time_ns;
    int cpu;            /* host CPU it last ran on */
};
/* Fills stats[0..n-1]; entries of threads not found stay found=false. */
void process_vcpu_stats(pid_t pid, struct vcpu_stat *stats, unsigned n);
