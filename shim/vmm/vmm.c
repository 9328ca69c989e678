/* The VM lifecycle behind the API: one state machine, every transition here. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "vmm/vmm.h"
#include "disk-job.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "config/vm-config-json.h"
#include "block/blk-backend.h"
#include "devices/i8042.h"
#include "devices/virtio-blk.h"
#include "devices/virtio-net.h"
#include "devices/vmgenid.h"
#include "json/bounded-json.h"
#include "json/vjson.h"
#include "core/vm.h"
#include "persist/coredump.h"
#include "notify.h"
#include "vmm/readiness.h"
#include "vmm/timeline.h"

/* Handed to the VM as the callbacks' opaque: lets a callback that arrives after
 * its VM was torn down (and maybe replaced) be recognised as stale. Lives as
 * long as its VM (freed after vm_free), so the readiness service it holds
 * outlives the vsock device serving it. */
struct vm_link {
    struct vmm *vmm;
    guint generation;
    struct vm_callbacks callbacks;
    struct readiness_service readiness;
    struct notify_service notify;
    bool announce_on_resume; /* restored ready through notify: ready again once it runs */
};

struct ready_watch {
    guint id;
    vmm_ready_func func;
    void *data;
};

struct vmm {
    enum vmm_state state;
    struct vm_config *config;
    struct vm *vm;
    struct vm_link *link;
    guint generation;         /* bumped at every teardown */
    GMainContext *main_context;
    struct events *events;
    void (*exit_requested)(void *data);
    void *exit_data;
    bool exit_on_guest_poweroff;

    /* What happened last, for vm.info's "vsnap" object. */
    const char *last_stop_reason; /* "poweroff", "reboot", "crash", "shutdown", NULL */
    const char *last_stop_origin; /* "guest" or "api" */
    char *last_stop_detail;
    char *last_error;
    guint boot_count;

    char *ready_info;
    GArray *ready_watches;    /* struct ready_watch */
    guint next_watch_id;

    /* A live snapshot under way: the VM changes only through it until its end. */
    struct persist_live_job *live_job;
    bool live_job_live;          /* the job's snapshot is live (else: of the paused VM) */
    vmm_live_done_func live_done;
    void *live_data;

    /* Block jobs (disk-job.h), at most one per disk: they end before the VM goes. */
    GPtrArray *disk_jobs;        /* struct disk_job * */
};

/* ---- construction --------------------------------------------------------- */

struct vmm *vmm_new(struct events *events, void (*exit_requested)(void *data), void *data)
{
    struct vmm *vmm = g_new0(struct vmm, 1);
    vmm->state = VMM_STATE_NOT_CREATED;
    vmm->main_context = g_main_context_ref(g_main_context_default());
    vmm->events = events;
    vmm->exit_requested = exit_requested;
    vmm->exit_data = data;
    vmm->ready_watches = g_array_new(FALSE, FALSE, sizeof(struct ready_watch));
    vmm->disk_jobs = g_ptr_array_new_with_free_func((GDestroyNotify)disk_job_free);
    vmm->next_watch_id = 1;
    return vmm;
}

static void teardown_vm(struct vmm *vmm);

void vmm_free(struct vmm *vmm)
{
    if (!vmm)
        return;
    teardown_vm(vmm);
    vm_config_free(vmm->config);
    g_free(vmm->last_stop_detail);
    g_free(vmm->last_error);
    g_free(vmm->ready_info);
    g_array_unref(vmm->ready_watches);
    g_ptr_array_unref(vmm->disk_jobs);
    g_main_context_unref(vmm->main_context);
    g_free(vmm);
}

void vmm_set_exit_on_guest_poweroff(struct vmm *vmm, bool exit)
{
    vmm->exit_on_guest_poweroff = exit;
}

const char *vmm_state_to_string(enum vmm_state state)
{
    switch (state) {
    case VMM_STATE_NOT_CREATED:
        return "NotCreated";
    case VMM_STATE_CREATED:
        return "Created";
    case VMM_STATE_RUNNING:
        return "Running";
    case VMM_STATE_PAUSED:
        return "Paused";
    case VMM_STATE_SHUTDOWN:
        return "Shutdown";
    }
    return "Invalid";
}

enum vmm_state vmm_get_state(const struct vmm *vmm)
{
    return vmm->state;
}

static void emit(struct vmm *vmm, const char *event)
{
    events_emit(vmm->events, "vm", event, NULL);
}

/* ---- readiness ------------------------------------------------------------ */

static void notify_ready_watches(struct vmm *vmm, const char *info)
{
    g_autoptr(GArray) watches = vmm->ready_watches;

    vmm->ready_watches = g_array_new(FALSE, FALSE, sizeof(struct ready_watch));
    for (guint i = 0; i < watches->len; i++) {
        struct ready_watch *w = &g_array_index(watches, struct ready_watch, i);
        w->func(info, w->data);
    }
}

const char *vmm_ready_info(const struct vmm *vmm)
{
    return vmm->ready_info;
}

guint vmm_watch_ready(struct vmm *vmm, vmm_ready_func func, void *data)
{
    struct ready_watch w = { .id = vmm->next_watch_id++, .func = func, .data = data };
    g_array_append_val(vmm->ready_watches, w);
    return w.id;
}

void vmm_unwatch_ready(struct vmm *vmm, guint id)
{
    for (guint i = 0; i < vmm->ready_watches->len; i++) {
        if (g_array_index(vmm->ready_watches, struct ready_watch, i).id == id) {
            g_array_remove_index(vmm->ready_watches, i);
            return;
        }
    }
}

/* ---- building and tearing down the VM -------------------------------------- */

static void on_guest_stop(void *opaque, enum vm_stop_reason reason, const char *detail);
static void on_fatal(void *opaque, const char *detail);
static void on_guest_ready(void *opaque, const char *info_json);

static struct vm_link *new_link(struct vmm *vmm)
{
    struct vm_link *link = g_new0(struct vm_link, 1);
    link->vmm = vmm;
    link->generation = vmm->generation;
    link->callbacks = (struct vm_callbacks){
        .on_guest_stop = on_guest_stop,
        .on_fatal = on_fatal,
        .opaque = link,
    };
    return link;
}

static void free_link(struct vm_link *link)
{
    if (!link)
        return;
    notify_service_clear(&link->notify);
    g_free(link);
}

/* The guest agent's announcements arrive on the config's readiness port,
 * systemd's on its notify port, both served by the VMM itself; installed
 * before any vCPU runs. */
static bool serve_readiness(struct vm *vm, const struct vm_config *cfg, struct vm_link *link, GError **error)
{
    if (!cfg->vsock.present)
        return true;
    readiness_service_init(&link->readiness, cfg->vsock.readiness_port, on_guest_ready, link);
    notify_service_init(&link->notify, cfg->vsock.notify_port, on_guest_ready, link);
    return vm_serve_vsock_port(vm, &link->readiness.handler, error) &&
           vm_serve_vsock_port(vm, &link->notify.handler, error);
}

/* What the guest told through notify before its snapshot comes back with it. */
static void restore_notify(struct vm *vm, const struct vm_config *cfg, struct vm_link *link)
{
    JsonObject *saved = persist_restored_vmm_state(vm);
    JsonNode *notify = saved && cfg->vsock.present ? json_object_get_member(saved, "notify") : NULL;
    if (notify && JSON_NODE_HOLDS_OBJECT(notify))
        link->announce_on_resume = notify_service_restore(&link->notify, json_node_get_object(notify));
}

static void adopt_vm(struct vmm *vmm, struct vm *vm, struct vm_link *link)
{
    vmm->vm = vm;
    vmm->link = link;
    g_clear_pointer(&vmm->last_error, g_free);
}

/* Building failed: vm (maybe NULL) and link go, the error is kept for vm.info. */
static void drop_vm(struct vmm *vmm, struct vm *vm, struct vm_link *link, const GError *error)
{
    vm_free(vm);
    free_link(link);
    g_free(vmm->last_error);
    vmm->last_error = g_strdup(error->message);
}

/* vm_free joins the vCPU threads, so no callback can run after it returns; a
 * callback already queued for the main thread sees a newer generation. */
static void teardown_vm(struct vmm *vmm)
{
    /* A live snapshot reads the VM's RAM on its thread: it ends first. */
    if (vmm->live_job)
        persist_live_end_now(vmm->live_job);
    /* So do block jobs: they write the disks' overlays. */
    g_ptr_array_set_size(vmm->disk_jobs, 0);
    if (!vmm->vm)
        return;
    vm_free(vmm->vm);
    vmm->vm = NULL;
    g_clear_pointer(&vmm->link, free_link);
    vmm->generation++;
    g_clear_pointer(&vmm->ready_info, g_free);
    notify_ready_watches(vmm, NULL);
}

/* vm.info names the taps the kernel chose ("vmtap0") and those behind
 * descriptors: the config the VM runs with records them. */
static void record_tap_names(struct vm *vm, struct vm_config *cfg)
{
    for (unsigned i = 0; i < cfg->nnets && i < vm_net_count(vm); i++) {
        if (cfg->nets[i].tap)
            continue;
        cfg->nets[i].tap = g_strdup(virtio_net_tap_name(vm_net(vm, i)));
    }
}

static bool build_and_start_vm(struct vmm *vmm, GError **error)
{
    g_autoptr(GError) local = NULL;
    struct vm_link *link = new_link(vmm);
    struct vm *vm = vm_new(vmm->config, &link->callbacks, &local);
    if (!vm || !serve_readiness(vm, vmm->config, link, &local) || !vm_start(vm, &local)) {
        drop_vm(vmm, vm, link, local);
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "cannot boot the VM: %s", local->message);
        return false;
    }
    record_tap_names(vm, vmm->config);
    adopt_vm(vmm, vm, link);
    vmm->boot_count++;
    return true;
}

static void record_stop(struct vmm *vmm, const char *reason, const char *origin,
                        const char *detail)
{
    vmm->last_stop_reason = reason;
    vmm->last_stop_origin = origin;
    g_free(vmm->last_stop_detail);
    vmm->last_stop_detail = g_strdup(detail);
}

/* ---- state checks ------------------------------------------------------------ */

static bool require_created(struct vmm *vmm, GError **error)
{
    if (vmm->state != VMM_STATE_NOT_CREATED)
        return true;
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_NOT_CREATED, "no VM: create one with vm.create first");
    return false;
}

static bool require_state(struct vmm *vmm, const char *action, GError **error, int n, ...)
{
    va_list ap;

    if (!require_created(vmm, error))
        return false;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        if ((enum vmm_state)va_arg(ap, int) == vmm->state) {
            va_end(ap);
            return true;
        }
    }
    va_end(ap);
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_WRONG_STATE, "cannot %s: the VM is %s", action,
                vmm_state_to_string(vmm->state));
    return false;
}

/* While a live snapshot runs only vm.info, vm.counters, vm.set-link and
 * vm.cancel-snapshot are served: the rest would change the VM under it. */
static bool require_no_live_job(struct vmm *vmm, const char *action, GError **error)
{
    if (!vmm->live_job)
        return true;
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_BUSY,
                "cannot %s: a live snapshot is under way (it ends on its own, or PUT vm.cancel-snapshot ends it)",
                action);
    return false;
}

/* ---- API actions ------------------------------------------------------------- */

bool vmm_create(struct vmm *vmm, struct vm_config *cfg, GError **error)
{
    g_autoptr(vm_config) owned = cfg;

    if (vmm->state != VMM_STATE_NOT_CREATED) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_ALREADY_CREATED,
                    "a VM is already created (delete it with vm.delete first)");
        return false;
    }
    /* A disk given on a chain without an overlay gets a fresh one. */
    if (!vm_config_check_files(owned, error) || !vm_config_assign_overlays(owned, error))
        return false;
    vmm->config = g_steal_pointer(&owned);
    vmm->state = VMM_STATE_CREATED;
    return true;
}

bool vmm_boot(struct vmm *vmm, GError **error)
{
    if (!require_state(vmm, "boot", error, 2, VMM_STATE_CREATED, VMM_STATE_SHUTDOWN))
        return false;
    emit(vmm, "booting");
    timeline_mark(TIMELINE_BOOTING);
    if (!build_and_start_vm(vmm, error))
        return false;
    vmm->state = VMM_STATE_RUNNING;
    timeline_mark(TIMELINE_BOOTED);
    emit(vmm, "booted");
    return true;
}

bool vmm_pause(struct vmm *vmm, GError **error)
{
    if (!require_no_live_job(vmm, "pause", error))
        return false;
    if (!require_state(vmm, "pause", error, 1, VMM_STATE_RUNNING))
        return false;
    emit(vmm, "pausing");
    if (!vm_pause(vmm->vm, error)) {
        g_prefix_error(error, "cannot pause the VM: ");
        return false;
    }
    vmm->state = VMM_STATE_PAUSED;
    emit(vmm, "paused");
    return true;
}

bool vmm_resume(struct vmm *vmm, GError **error)
{
    if (!require_no_live_job(vmm, "resume", error))
        return false;
    if (!require_state(vmm, "resume", error, 1, VMM_STATE_PAUSED))
        return false;
    emit(vmm, "resuming");
    if (!vm_resume(vmm->vm, error)) {
        g_prefix_error(error, "cannot resume the VM: ");
        return false;
    }
    vmm->state = VMM_STATE_RUNNING;
    timeline_mark(TIMELINE_RESUMED);
    emit(vmm, "resumed");
    if (vmm->link->announce_on_resume) { /* systemd will not say READY=1 again */
        vmm->link->announce_on_resume = false;
        notify_service_announce_again(&vmm->link->notify);
    }
    return true;
}

static void shut_down(struct vmm *vmm)
{
    teardown_vm(vmm);
    vmm->state = VMM_STATE_SHUTDOWN;
    /* A stop the guest side caused says why (a crash, or an on-demand restore
     * that met a corrupt block): {"reason": ..., "detail": ...} */
    if (!g_strcmp0(vmm->last_stop_origin, "guest"))
        events_emit_strings(vmm->events, "vm", "shutdown", "reason", vmm->last_stop_reason, "detail",
                            vmm->last_stop_detail ? vmm->last_stop_detail : "", NULL);
    else
        emit(vmm, "shutdown");
}

bool vmm_shutdown_vm(struct vmm *vmm, GError **error)
{
    if (!require_no_live_job(vmm, "shut down", error))
        return false;
    if (!require_state(vmm, "shut down", error, 2, VMM_STATE_RUNNING, VMM_STATE_PAUSED))
        return false;
    record_stop(vmm, "shutdown", "api", NULL);
    shut_down(vmm);
    return true;
}

/* A reboot is a fresh VM from the same config: nothing of the old one survives. */
static bool reboot_vm(struct vmm *vmm, GError **error)
{
    emit(vmm, "rebooting");
    teardown_vm(vmm);
    if (!build_and_start_vm(vmm, error)) {
        vmm->state = VMM_STATE_SHUTDOWN;
        emit(vmm, "shutdown");
        return false;
    }
    vmm->state = VMM_STATE_RUNNING;
    emit(vmm, "rebooted");
    return true;
}

bool vmm_reboot(struct vmm *vmm, GError **error)
{
    if (!require_no_live_job(vmm, "reboot", error))
        return false;
    if (!require_state(vmm, "reboot", error, 2, VMM_STATE_RUNNING, VMM_STATE_PAUSED))
        return false;
    record_stop(vmm, "reboot", "api", NULL);
    return reboot_vm(vmm, error);
}

/* ---- devices ------------------------------------------------------------------- */

/* virtio-mmio has no hotplug: its devices are declared on the guest's command
 * line at boot, and nothing tells a running guest of a new one (no ACPI or
 * PCI hotplug event reaches it). A VM's disks therefore change only while it
 * is not running, and take effect at its next boot, as Cloud Hypervisor's
 * "cold" add does (204). */
static bool require_not_running(struct vmm *vmm, const char *action, GError **error)
{
    if (!require_created(vmm, error))
        return false;
    if (vmm->state == VMM_STATE_CREATED || vmm->state == VMM_STATE_SHUTDOWN)
        return true;
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_WRONG_STATE,
                "cannot %s while the VM is %s: vsnap's virtio-mmio devices are declared on the guest's command "
                "line at boot and cannot be hot-plugged; change disks while the VM is Created or Shutdown "
                "(they take effect at the next boot)", action, vmm_state_to_string(vmm->state));
    return false;
}

bool vmm_add_disk(struct vmm *vmm, const struct disk_config *disk, GError **error)
{
    if (!require_not_running(vmm, "add a disk", error))
        return false;
    if (disk->id && vm_config_find_disk(vmm->config, disk->id)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_CONFLICT, "a disk with id '%s' exists already", disk->id);
        return false;
    }
    g_autoptr(vm_config) cfg = vm_config_copy(vmm->config);
    vm_config_add_disk(cfg, disk);
    vm_config_name_disks(cfg);
    g_autofree char *field = g_strdup_printf("disks[%u].path", cfg->ndisks - 1);
    if (!vm_config_validate(cfg, error) || !disk_config_check_image(&cfg->disks[cfg->ndisks - 1], field, error) ||
        !disk_config_check_distinct(cfg, error))
        return false;
    vm_config_free(vmm->config);
    vmm->config = g_steal_pointer(&cfg);
    return true;
}

bool vmm_add_net(struct vmm *vmm, const struct net_config *net, GError **error)
{
    if (!require_not_running(vmm, "add a network interface", error))
        return false;
    if (net->id && (vm_config_find_net(vmm->config, net->id) || vm_config_find_disk(vmm->config, net->id))) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_CONFLICT, "a device with id '%s' exists already", net->id);
        return false;
    }
    g_autoptr(vm_config) cfg = vm_config_copy(vmm->config);
    vm_config_add_net(cfg, net);
    vm_config_name_nets(cfg);
    if (!vm_config_validate(cfg, error))
        return false;
    vm_config_free(vmm->config);
    vmm->config = g_steal_pointer(&cfg);
    return true;
}

bool vmm_move_disk_layers(struct vmm *vmm, const char *from, const char *to, unsigned *moved, GError **error)
{
    if (!require_no_live_job(vmm, "move disk layers", error))
        return false;
    if (!require_created(vmm, error))
        return false;
    if (from[0] != '/' || (to && to[0] != '/')) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "vm.move-disk-layers takes absolute directories");
        return false;
    }
    g_autoptr(vm_config) cfg = vm_config_copy(vmm->config);
    if (!vm_config_move_disk_layers(cfg, from, to, moved, error))
        return false;
    if (vmm->vm && to && !vm_disk_layers_moved(vmm->vm, from, to, error))
        return false;
    vm_config_free(vmm->config);
    vmm->config = g_steal_pointer(&cfg);
    return true;
}

/* ---- block jobs (disk-job.h) ---- */

static struct disk_job *find_disk_job(struct vmm *vmm, const char *id, guint *index)
{
    for (guint i = 0; i < vmm->disk_jobs->len; i++)
        if (g_str_equal(disk_job_disk(vmm->disk_jobs->pdata[i]), id)) {
            if (index)
                *index = i;
            return vmm->disk_jobs->pdata[i];
        }
    return NULL;
}

static struct virtio_blk *find_disk(struct vmm *vmm, const char *id)
{
    for (unsigned i = 0; vmm->vm && i < vm_disk_count(vmm->vm); i++)
        if (g_str_equal(virtio_blk_id(vm_disk(vmm->vm, i)), id))
            return vm_disk(vmm->vm, i);
    return NULL;
}

static struct disk_config *config_disk(struct vmm *vmm, const char *id)
{
    for (unsigned i = 0; i < vmm->config->ndisks; i++)
        if (g_strcmp0(vmm->config->disks[i].id, id) == 0)
            return &vmm->config->disks[i];
    return NULL;
}

/* The pull is done (a commit's is READY and waits for its pivot): the
 * disk runs on its overlay over the image, and the
 * config (vm.info's vsnap_chain, what the next snapshot names as parent)
 * says so: an empty chain. */
static void disk_job_done(struct disk_job *job, enum disk_job_end end, const char *message,
                          struct blk_backend *old_chain, void *data)
{
    struct vmm *vmm = data;
    g_autofree char *id = g_strdup(disk_job_disk(job));
    struct disk_config *d = config_disk(vmm, id);
    bool pulled = (end == DISK_JOB_COMPLETED || end == DISK_JOB_READY) && disk_job_kind_of(job) != DISK_JOB_COPY;
    if (pulled && d) {
        g_strfreev(d->vsnap_chain);
        d->vsnap_chain = g_new0(char *, 1);
    }
    blk_backend_close(old_chain);
    if (end == DISK_JOB_READY) {
        events_emit_strings(vmm->events, "disk", "job-ready", "id", id, "kind", disk_job_kind(job), NULL);
        return;
    }
    /* The job (its kind, the message) goes last. */
    if (end == DISK_JOB_COMPLETED)
        events_emit_strings(vmm->events, "disk", "job-completed", "id", id, "kind", "pull", NULL);
    else
        events_emit_strings(vmm->events, "disk", "job-failed", "id", id, "kind", disk_job_kind(job), "error",
                            message, NULL);
    guint index;
    if (find_disk_job(vmm, id, &index))
        g_ptr_array_remove_index(vmm->disk_jobs, index);
}

static struct disk_job *require_disk_job(struct vmm *vmm, const char *id, guint *index, GError **error);

/* The overlay backend of disk id, which has no job yet. */
static struct blk_backend *job_overlay(struct vmm *vmm, const char *id, const char *action, GError **error)
{
    if (!require_state(vmm, action, error, 2, VMM_STATE_RUNNING, VMM_STATE_PAUSED) ||
        !require_no_live_job(vmm, action, error))
        return NULL;
    struct virtio_blk *disk = find_disk(vmm, id);
    if (!disk) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_NOT_FOUND, "no disk with id '%s'", id);
        return false;
    }
    if (find_disk_job(vmm, id, NULL)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_CONFLICT, "disk %s has a block job already", id);
        return false;
    }
    struct blk_backend *overlay = virtio_blk_backend(disk);
    if (!blk_overlay_file(overlay)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "disk %s has no snapshot layers to %s (it writes its image directly)", id, action);
        return NULL;
    }
    return overlay;
}

/* A pull that cannot fit is refused before it fills the file system the
 * guest's own writes go to (one the guest fills meanwhile still fails the
 * job, which then leaves the disk on its chain). */
static bool check_room(struct blk_backend *overlay, const char *id, GError **error)
{
    struct statfs fs;
    uint64_t need = blk_overlay_pull_need(overlay);
    if (fstatfs(blk_overlay_fd(overlay), &fs) != 0 || (uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize >= need)
        return true;
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "disk %s: the pull needs %" G_GUINT64_FORMAT " KiB in its "
                "overlay's file system, which has %" G_GUINT64_FORMAT " KiB free: No space left on device", id,
                need >> 10, ((uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize) >> 10);
    return false;
}

bool vmm_disk_pull(struct vmm *vmm, const char *id, uint64_t bandwidth, GError **error)
{
    struct blk_backend *overlay = job_overlay(vmm, id, "pull", error);
    if (!overlay || !check_room(overlay, id, error))
        return false;
    g_ptr_array_add(vmm->disk_jobs, disk_job_start(vmm->main_context, id, DISK_JOB_PULL, overlay, -1, bandwidth,
                                                   disk_job_done, vmm));
    events_emit_strings(vmm->events, "disk", "job-started", "id", id, "kind", "pull", NULL);
    return true;
}

bool vmm_disk_commit(struct vmm *vmm, const char *id, uint64_t bandwidth, int image_fd, GError **error)
{
    struct blk_backend *overlay = job_overlay(vmm, id, "commit", error);
    const struct disk_config *d = overlay && check_room(overlay, id, error) ? config_disk(vmm, id) : NULL;
    if (!d)
        return false;
    int fd = image_fd >= 0 ? fcntl(image_fd, F_DUPFD_CLOEXEC, 3) : open(d->path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "disk %s: cannot open its image %s for writing: %s", id,
                    d->path, g_strerror(errno));
        return false;
    }
    g_ptr_array_add(vmm->disk_jobs, disk_job_start(vmm->main_context, id, DISK_JOB_COMMIT, overlay, fd, bandwidth,
                                                   disk_job_done, vmm));
    events_emit_strings(vmm->events, "disk", "job-started", "id", id, "kind", "commit", NULL);
    return true;
}

/* The disk's backend swapped with the VM paused (its disks idle). */
static bool swap_paused(struct vmm *vmm, struct virtio_blk *disk, struct blk_backend *(*make)(struct blk_backend *, void *),
                        void *data, GError **error)
{
    bool was_running = vmm->state == VMM_STATE_RUNNING;
    if (was_running && !vm_pause(vmm->vm, error))
        return false;
    struct blk_backend *now = virtio_blk_backend(disk);
    struct blk_backend *next = make(now, data);
    struct blk_backend *old = virtio_blk_replace_backend(disk, next);
    /* A mirror put on takes the backend it wraps; one taken off goes, with
     * whatever of it the disk does not keep. */
    if (old->ops != next->ops && blk_mirror_is(old)) {
        int err = blk_backend_flush(old);   /* a finished copy's target is durable */
        if (err)
            g_warning("disk %s: flushing the copy: %s", virtio_blk_id(disk), g_strerror(-err));
        blk_backend_close(old);
    }
    g_autoptr(GError) resume_error = NULL;
    if (was_running && !vm_resume(vmm->vm, &resume_error))
        g_warning("disk %s: the VM does not resume: %s", virtio_blk_id(disk), resume_error->message);
    return true;
}

static struct blk_backend *mirror_onto(struct blk_backend *source, void *target)
{
    return blk_mirror_new(source, target);
}

static struct blk_backend *mirror_to_target(struct blk_backend *mirror, void *unused)
{
    (void)unused;
    return blk_mirror_end(mirror, true);
}

static struct blk_backend *mirror_to_source(struct blk_backend *mirror, void *unused)
{
    (void)unused;
    return blk_mirror_end(mirror, false);
}

bool vmm_disk_copy(struct vmm *vmm, const char *id, const char *target_path, uint64_t bandwidth, int target_fd,
                   GError **error)
{
    if (!require_state(vmm, "copy a disk", error, 2, VMM_STATE_RUNNING, VMM_STATE_PAUSED) ||
        !require_no_live_job(vmm, "copy a disk", error))
        return false;
    struct virtio_blk *disk = find_disk(vmm, id);
    const struct disk_config *d = config_disk(vmm, id);
    if (!disk || !d || find_disk_job(vmm, id, NULL) || target_fd < 0) {
        g_set_error(error, SHIM_ERROR, !disk || !d ? SHIM_ERROR_NOT_FOUND : target_fd < 0 ? SHIM_ERROR_INVALID
                    : SHIM_ERROR_CONFLICT, !disk || !d ? "no disk with id '%s'" : target_fd < 0
                    ? "disk %s: vm.disk-copy takes the target image's descriptor" : "disk %s has a block job already",
                    id);
        return false;
    }
    struct blk_raw_options raw = { .path = target_path, .sparse = d->sparse, .direct = d->direct,
                                   .adopt_fd = fcntl(target_fd, F_DUPFD_CLOEXEC, 3) };
    struct blk_backend *target = raw.adopt_fd > 0 ? blk_raw_open(&raw, error) : NULL;
    if (!target)
        return false;
    if (target->capacity < virtio_blk_backend(disk)->capacity) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "disk %s: the copy's target is smaller than the disk", id);
        blk_backend_close(target);
        return false;
    }
    if (!swap_paused(vmm, disk, mirror_onto, target, error)) {
        blk_backend_close(target);
        return false;
    }
    g_ptr_array_add(vmm->disk_jobs, disk_job_start(vmm->main_context, id, DISK_JOB_COPY, virtio_blk_backend(disk),
                                                   -1, bandwidth, disk_job_done, vmm));
    disk_job_set_target(vmm->disk_jobs->pdata[vmm->disk_jobs->len - 1], target_path);
    events_emit_strings(vmm->events, "disk", "job-started", "id", id, "kind", "copy", NULL);
    return true;
}

/* A copy's job ends (pivot or abort): the mirror goes, the disk on the
 * target or back on its source. */
static bool end_copy(struct vmm *vmm, const char *id, guint index, bool pivot, GError **error)
{
    struct virtio_blk *disk = find_disk(vmm, id);
    g_autofree char *kind = g_strdup(disk_job_kind(vmm->disk_jobs->pdata[index]));
    g_autofree char *target = g_strdup(disk_job_target(vmm->disk_jobs->pdata[index]));
    g_ptr_array_remove_index(vmm->disk_jobs, index);   /* the thread stops first */
    if (!swap_paused(vmm, disk, pivot ? mirror_to_target : mirror_to_source, NULL, error))
        return false;
    struct disk_config *d = config_disk(vmm, id);
    if (pivot && d) {
        g_clear_pointer(&d->vsnap_chain, g_strfreev);
        g_clear_pointer(&d->vsnap_overlay, g_free);
        g_free(d->path);
        d->path = g_steal_pointer(&target);
    }
    events_emit_strings(vmm->events, "disk", pivot ? "job-completed" : "job-cancelled", "id", id, "kind", kind, NULL);
    return true;
}

/* The pivot, with the VM paused: the overlay's blocks join the image, the
 * disk's backend becomes the image itself (its lock exclusive once the
 * chain's shared one is gone). */
static bool pivot_paused(struct vmm *vmm, struct virtio_blk *disk, struct disk_job *job, struct disk_config *d,
                         GError **error)
{
    int err = blk_overlay_commit_overlay(virtio_blk_backend(disk), disk_job_image_fd(job));
    if (err) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "disk %s: cannot write its overlay into %s: %s", d->id,
                    d->path, g_strerror(-err));
        return false;
    }
    int fd = fcntl(disk_job_image_fd(job), F_DUPFD_CLOEXEC, 3);
    struct blk_raw_options raw = {
        .path = d->path, .direct = d->direct, .sparse = d->sparse, .unlocked = true, .adopt_fd = fd,
    };
    struct blk_backend *image = fd >= 0 ? blk_raw_open(&raw, error) : NULL;
    if (fd < 0)
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "disk %s: %s", d->id, g_strerror(errno));
    if (!image)
        return false;
    if (image->capacity != virtio_blk_backend(disk)->capacity) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "disk %s: image %s changed size under the commit", d->id,
                    d->path);
        blk_backend_close(image);
        return false;
    }
    image->can_discard = d->sparse;
    blk_backend_close(virtio_blk_replace_backend(disk, image));
    g_autoptr(GError) lock_error = NULL;
    if (!blk_raw_share_lock(image, false, &lock_error))
        g_warning("disk %s: %s", d->id, lock_error->message);
    g_clear_pointer(&d->vsnap_chain, g_strfreev);
    g_clear_pointer(&d->vsnap_overlay, g_free);
    (void)vmm;
    return true;
}

bool vmm_disk_job_pivot(struct vmm *vmm, const char *id, GError **error)
{
    guint index;
    struct disk_job *job = require_disk_job(vmm, id, &index, error);
    if (!job)
        return false;
    if (disk_job_kind_of(job) == DISK_JOB_COPY && disk_job_ready(job))
        return end_copy(vmm, id, index, true, error);
    if (disk_job_kind_of(job) != DISK_JOB_COMMIT || !disk_job_ready(job)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_WRONG_STATE, "disk %s: its %s job is not ready to pivot", id,
                    disk_job_kind(job));
        return false;
    }
    struct virtio_blk *disk = find_disk(vmm, id);
    struct disk_config *d = config_disk(vmm, id);
    bool was_running = vmm->state == VMM_STATE_RUNNING;
    if (was_running && !vm_pause(vmm->vm, error))
        return false;
    bool ok = pivot_paused(vmm, disk, job, d, error);
    g_autoptr(GError) resume_error = NULL;
    if (was_running && !vm_resume(vmm->vm, &resume_error))
        g_warning("disk %s: after the pivot the VM does not resume: %s", id, resume_error->message);
    if (!ok)
        return false;
    g_ptr_array_remove_index(vmm->disk_jobs, index);
    events_emit_strings(vmm->events, "disk", "job-completed", "id", id, "kind", "commit", NULL);
    return true;
}

static struct disk_job *require_disk_job(struct vmm *vmm, const char *id, guint *index, GError **error)
{
    struct disk_job *job = require_created(vmm, error) ? find_disk_job(vmm, id, index) : NULL;
    if (!job && error && !*error)
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_NOT_FOUND, "disk %s has no block job", id);
    return job;
}

bool vmm_disk_job_info(struct vmm *vmm, const char *id, struct disk_job_info *out, GError **error)
{
    struct disk_job *job = require_disk_job(vmm, id, NULL, error);
    if (job)
        disk_job_get_info(job, out);
    return job != NULL;
}

bool vmm_disk_job_set_speed(struct vmm *vmm, const char *id, uint64_t bandwidth, GError **error)
{
    struct disk_job *job = require_disk_job(vmm, id, NULL, error);
    if (job)
        disk_job_set_bandwidth(job, bandwidth);
    return job != NULL;
}

/* The overlay keeps the blocks copied so far (the chain's own bytes) and
 * stays on its chain. A job whose last step is done completes instead. */
bool vmm_disk_job_cancel(struct vmm *vmm, const char *id, GError **error)
{
    guint index;
    struct disk_job *job = require_disk_job(vmm, id, &index, error);
    if (!job)
        return false;
    if (disk_job_kind_of(job) == DISK_JOB_PULL && disk_job_finished(job))
        return true;   /* its done callback is queued: it completes */
    if (disk_job_kind_of(job) == DISK_JOB_COPY)
        return end_copy(vmm, id, index, false, error);
    g_autofree char *kind = g_strdup(disk_job_kind(job));
    g_ptr_array_remove_index(vmm->disk_jobs, index);
    events_emit_strings(vmm->events, "disk", "job-cancelled", "id", id, "kind", kind, NULL);
    return true;
}

bool vmm_disk_resize(struct vmm *vmm, const char *id, uint64_t *capacity, GError **error)
{
    if (!require_state(vmm, "resize a disk", error, 2, VMM_STATE_RUNNING, VMM_STATE_PAUSED) ||
        !require_no_live_job(vmm, "resize a disk", error))
        return false;
    struct virtio_blk *disk = find_disk(vmm, id);
    if (!disk) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_NOT_FOUND, "no disk with id '%s'", id);
        return false;
    }
    /* The VM paused: its disks idle while the capacity changes. */
    bool was_running = vmm->state == VMM_STATE_RUNNING;
    if (was_running && !vm_pause(vmm->vm, error))
        return false;
    g_autoptr(GError) local = NULL;
    bool ok = blk_raw_refresh_capacity(virtio_blk_backend(disk), &local);
    *capacity = virtio_blk_backend(disk)->capacity;
    g_autoptr(GError) resume_error = NULL;
    if (was_running && !vm_resume(vmm->vm, &resume_error))
        g_warning("disk %s: after the resize the VM does not resume: %s", id, resume_error->message);
    if (!ok) {
        g_set_error(error, SHIM_ERROR, local->code == G_IO_ERROR_NOT_SUPPORTED ? SHIM_ERROR_UNSUPPORTED
                                                                                : SHIM_ERROR_INVALID, "%s",
                    local->message);
        return false;
    }
    virtio_blk_capacity_changed(disk);
    return true;
}

bool vmm_set_link(struct vmm *vmm, const char *id, bool up, GError **error)
{
    if (!require_state(vmm, "set a link", error, 2, VMM_STATE_RUNNING, VMM_STATE_PAUSED))
        return false;
    struct virtio_net *net = vm_find_net(vmm->vm, id);
    if (!net) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_NOT_FOUND, "no network interface with id '%s'", id);
        return false;
    }
    virtio_net_set_link(net, up);
    return true;
}

bool vmm_remove_device(struct vmm *vmm, const char *id, GError **error)
{
    if (!require_created(vmm, error))
        return false;
    bool disk = vm_config_find_disk(vmm->config, id) != NULL;
    if (!disk && !vm_config_find_net(vmm->config, id)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_NOT_FOUND,
                    "no device with id '%s' (disks and network interfaces can be removed)", id);
        return false;
    }
    if (!require_not_running(vmm, disk ? "remove a disk" : "remove a network interface", error))
        return false;
    if (disk)
        vm_config_remove_disk(vmm->config, id);
    else
        vm_config_remove_net(vmm->config, id);
    return true;
}

/* As Cloud Hypervisor: deleting when there is no VM succeeds. */
bool vmm_delete(struct vmm *vmm, GError **error)
{
    if (!require_no_live_job(vmm, "delete the VM", error))
        return false;
    if (vmm->state == VMM_STATE_NOT_CREATED)
        return true;
    if (vmm->vm) {
        record_stop(vmm, "shutdown", "api", NULL);
        shut_down(vmm);
    }
    g_clear_pointer(&vmm->config, vm_config_free);
    vmm->state = VMM_STATE_NOT_CREATED;
    emit(vmm, "deleted");
    return true;
}

/* An NMI or keys while a live snapshot copies RAM would be fine for the
 * guest, but the snapshot's vCPU state is taken at its end: keep them out of
 * it as every other change is. */
bool vmm_nmi(struct vmm *vmm, GError **error)
{
    if (!require_no_live_job(vmm, "inject an NMI", error) ||
        !require_state(vmm, "inject an NMI", error, 2, VMM_STATE_RUNNING, VMM_STATE_PAUSED))
        return false;
    g_autoptr(GError) local = NULL;
    if (vm_inject_nmi(vmm->vm, &local))
        return true;
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "%s", local->message);
    return false;
}

G_STATIC_ASSERT(VMM_SCANCODES_MAX == I8042_QUEUE_BYTES);

bool vmm_send_scancodes(struct vmm *vmm, const uint8_t *codes, unsigned n, GError **error)
{
    if (!require_no_live_job(vmm, "send keys", error) ||
        !require_state(vmm, "send keys", error, 2, VMM_STATE_RUNNING, VMM_STATE_PAUSED))
        return false;
    g_autoptr(GError) local = NULL;
    if (i8042_send_scancodes(vm_i8042(vmm->vm), codes, n, &local))
        return true;
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_BUSY, "%s", local->message);
    return false;
}

/* A running VM is dumped live: its vCPUs stop only while their registers
 * are read (core's pause, not the API's: no event, no state change). */
bool vmm_coredump(struct vmm *vmm, int fd, GError **error)
{
    if (!require_no_live_job(vmm, "write a core dump", error) ||
        !require_state(vmm, "write a core dump", error, 2, VMM_STATE_RUNNING, VMM_STATE_PAUSED))
        return false;
    bool running = vmm->state == VMM_STATE_RUNNING;
    g_autoptr(GError) local = NULL;
    if (running && !vm_pause(vmm->vm, &local)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "cannot stop the vCPUs for the core dump: %s",
                    local->message);
        return false;
    }
    struct coredump *dump = persist_coredump_begin(vmm->vm, &local);
    g_autoptr(GError) resume_error = NULL;
    if (running && !vm_resume(vmm->vm, &resume_error))
        g_warning("the VM did not resume after its core dump's register read: %s", resume_error->message);
    bool ok = dump && persist_coredump_write(dump, fd, &local);
    persist_coredump_free(dump);
    if (!ok)
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_FAILED, "%s", local->message);
    return ok;
}

bool vmm_power_button(struct vmm *vmm, GError **error)
{
    if (!require_no_live_job(vmm, "press the power button", error))
        return false;
    if (!require_state(vmm, "press the power button", error, 1, VMM_STATE_RUNNING))
        return false;
    vm_power_button(vmm->vm);
    return true;
}

void vmm_request_exit(struct vmm *vmm)
{
    if (vmm->vm) {
        record_stop(vmm, "shutdown", "api", NULL);
        shut_down(vmm);
    }
    events_emit(vmm->events, "vmm", "shutdown", NULL);
    if (vmm->exit_requested)
        vmm->exit_requested(vmm->exit_data);
}

/* ---- snapshot and restore ------------------------------------------------------ */

/* persist's errors say whose fault it was: the request's (400) or not (500). */
static void to_shim_error(GError **error)
{
    if (!error || !*error || (*error)->domain == SHIM_ERROR)
        return;
    int code = (*error)->domain == PERSIST_ERROR && (*error)->code == PERSIST_ERROR_INVALID ? SHIM_ERROR_INVALID
                                                                                           : SHIM_ERROR_FAILED;
    GError *shim = g_error_new_literal(SHIM_ERROR, code, (*error)->message);
    g_clear_error(error);
    *error = shim;
}

/* state.json's "vmm": what the notify port heard (the agent's side lives in
 * the guest and announces itself again). */
static JsonNode *vmm_state_for_snapshot(struct vmm *vmm)
{
    if (!vmm->config->vsock.present)
        return NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_node(b, "notify", notify_service_save(&vmm->link->notify));
    vjson_object_end(b);
    return json_builder_get_root(b);
}

/* What a snapshot request must meet before anything starts. */
static bool check_snapshot(struct vmm *vmm, const struct persist_snapshot_request *req, GError **error)
{
    if (vmm->state == VMM_STATE_NOT_CREATED) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_NOT_CREATED, "no VM: create or restore one first");
        return false;
    }
    if (!require_no_live_job(vmm, "snapshot", error))
        return false;
    if (vmm->disk_jobs->len) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_BUSY, "cannot snapshot: a block %s of disk %s is under way "
                    "(PUT vm.disk-job-cancel ends it)", disk_job_kind(vmm->disk_jobs->pdata[0]),
                    disk_job_disk(vmm->disk_jobs->pdata[0]));
        return false;
    }
    if (!req->live && vmm->state != VMM_STATE_PAUSED) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_WRONG_STATE, "cannot snapshot: the VM is %s (pause it first)",
                    vmm_state_to_string(vmm->state));
        return false;
    }
    if (req->live && vmm->state != VMM_STATE_RUNNING) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_WRONG_STATE,
                    "cannot take a live snapshot: the VM is %s (a live snapshot is of a running VM; "
                    "without \"live\" a paused one is snapshotted)", vmm_state_to_string(vmm->state));
        return false;
    }
    /* As Cloud Hypervisor: "snapshotting" only for a request that will be tried. */
    if (!persist_snapshot_check(vmm->vm, req, error)) {
        to_shim_error(error);
        return false;
    }
    return true;
}

static void note_snapshotted(struct vmm *vmm, const struct persist_snapshot_request *req,
                             const struct persist_snapshot_result *result)
{
    g_info("snapshot %s: %" G_GUINT64_FORMAT " pages, %" G_GUINT64_FORMAT " bytes in %.3f ms", result->id,
           result->data_pages, result->file_bytes, result->elapsed_ns / 1e6);
    if (req->live)
        g_info("snapshot %s was live: %u passes, %" G_GUINT64_FORMAT " pages copied, %" G_GUINT64_FORMAT
               " of them in a stop of %" G_GUINT64_FORMAT " us", result->id, result->passes, result->copied_pages,
               result->final_pages, result->pause_us);
    events_emit_strings(vmm->events, "vm", "snapshotted", "id", result->id, NULL);
}

bool vmm_snapshot(struct vmm *vmm, const struct persist_snapshot_request *req,
                  struct persist_snapshot_result *result, GError **error)
{
    if (req->live) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "a live snapshot is taken with vmm_snapshot_live");
        return false;
    }
    if (!check_snapshot(vmm, req, error))
        return false;
    struct persist_snapshot_result local_result = { 0 };
    if (!result)
        result = &local_result;
    emit(vmm, "snapshotting");
    struct persist_snapshot_request with_vmm = *req;
    g_autoptr(JsonNode) vmm_state = vmm_state_for_snapshot(vmm);
    with_vmm.vmm_state = vmm_state;
    if (!persist_snapshot(vmm->vm, vmm->config, &with_vmm, result, error)) {
        to_shim_error(error);
        return false;
    }
    note_snapshotted(vmm, req, result);
    return true;
}

static void live_snapshot_done(bool ok, const struct persist_snapshot_result *result, const GError *error,
                               void *data)
{
    struct vmm *vmm = data;
    vmm_live_done_func done = vmm->live_done;
    void *done_data = vmm->live_data;
    vmm->live_job = NULL;
    vmm->live_done = NULL;
    vmm->live_data = NULL;
    struct persist_snapshot_request req = { .live = vmm->live_job_live };
    if (ok)
        note_snapshotted(vmm, &req, result);
    g_autoptr(GError) shim_error = error ? g_error_copy(error) : NULL;
    if (shim_error && shim_error->domain == PERSIST_ERROR && shim_error->code == PERSIST_ERROR_CANCELLED) {
        GError *cancelled = g_error_new_literal(SHIM_ERROR, SHIM_ERROR_CANCELLED, shim_error->message);
        g_clear_error(&shim_error);
        shim_error = cancelled;
    }
    to_shim_error(&shim_error);
    done(ok, result, shim_error, done_data);
}

bool vmm_snapshot_live(struct vmm *vmm, const struct persist_snapshot_request *req, vmm_live_done_func done,
                       void *data, GError **error)
{
    if (!check_snapshot(vmm, req, error))
        return false;
    emit(vmm, "snapshotting");
    struct persist_snapshot_request with_vmm = *req;
    g_autoptr(JsonNode) vmm_state = vmm_state_for_snapshot(vmm);
    with_vmm.vmm_state = vmm_state;
    vmm->live_job = persist_live_start(vmm->vm, vmm->config, &with_vmm, live_snapshot_done, vmm, error);
    if (!vmm->live_job) {
        to_shim_error(error);
        return false;
    }
    vmm->live_job_live = req->live;
    vmm->live_done = done;
    vmm->live_data = data;
    return true;
}

bool vmm_cancel_snapshot(struct vmm *vmm, GError **error)
{
    if (!vmm->live_job) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_WRONG_STATE, "no live snapshot is under way, nor any other");
        return false;
    }
    g_message("%s snapshot: cancel requested through the API", vmm->live_job_live ? "live" : "paused");
    persist_live_cancel(vmm->live_job);
    return true;
}

/* A restore handed its working-set record over: the client fetches it
 * (vmm_workset). */
static void workset_held(void *opaque)
{
    emit(opaque, "workset-recorded");
}

bool vmm_restore(struct vmm *vmm, const struct persist_restore_request *asked, bool resume, GError **error)
{
    struct persist_restore_request held_req = *asked;
    const struct persist_restore_request *req = &held_req;
    held_req.workset_held = workset_held;
    held_req.workset_opaque = vmm;
    g_autoptr(GError) local = NULL;
    struct vm_config *cfg = NULL;

    if (vmm->state != VMM_STATE_NOT_CREATED) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_ALREADY_CREATED,
                    "cannot restore: a VM exists already (%s); restore into a shim without a VM, or "
                    "vm.delete first", vmm_state_to_string(vmm->state));
        return false;
    }
    emit(vmm, "restoring");
    struct vm_link *link = new_link(vmm);
    struct vm *vm = persist_restore(req, &link->callbacks, &cfg, &local);
    if (!vm || !serve_readiness(vm, cfg, link, &local)) {
        drop_vm(vmm, vm, link, local);
        vm_config_free(cfg);
        to_shim_error(&local);
        g_propagate_error(error, g_steal_pointer(&local));
        return false;
    }
    restore_notify(vm, cfg, link);
    record_tap_names(vm, cfg);
    adopt_vm(vmm, vm, link);
    vmm->config = cfg;
    vmm->state = VMM_STATE_PAUSED;
    emit(vmm, "restored");
    return !resume || vmm_resume(vmm, error);
}

const char *vmm_work_dir(const struct vmm *vmm)
{
    return vmm->config ? vmm->config->vsnap_work_dir : NULL;
}

/* ---- what the guest did (arrives on vCPU / device threads) --------------------- */

struct guest_stop {
    struct vmm *vmm;
    guint generation;
    enum vm_stop_reason reason;
    char *detail;
};

static void guest_stop_free(gpointer data)
{
    struct guest_stop *stop = data;
    g_free(stop->detail);
    g_free(stop);
}

static void handle_guest_poweroff(struct vmm *vmm, const char *reason, const char *detail)
{
    record_stop(vmm, reason, "guest", detail);
    shut_down(vmm);
    if (vmm->exit_on_guest_poweroff && vmm->exit_requested)
        vmm->exit_requested(vmm->exit_data);
}

static gboolean handle_guest_stop(gpointer data)
{
    struct guest_stop *stop = data;
    struct vmm *vmm = stop->vmm;
    g_autoptr(GError) error = NULL;

    if (stop->generation != vmm->generation || !vmm->vm)
        return G_SOURCE_REMOVE; /* that VM is gone already */
    g_message("guest stop: %s%s%s", vm_stop_reason_to_string(stop->reason),
              stop->detail ? ": " : "", stop->detail ? stop->detail : "");
    switch (stop->reason) {
    case VM_STOP_POWEROFF:
        handle_guest_poweroff(vmm, "poweroff", stop->detail);
        break;
    case VM_STOP_CRASH:
        handle_guest_poweroff(vmm, "crash", stop->detail);
        break;
    case VM_STOP_RESET:
        record_stop(vmm, "reboot", "guest", stop->detail);
        if (!reboot_vm(vmm, &error))
            g_warning("guest reboot failed: %s", error->message);
        break;
    }
    return G_SOURCE_REMOVE;
}

static void on_guest_stop(void *opaque, enum vm_stop_reason reason, const char *detail)
{
    struct vm_link *link = opaque;
    struct guest_stop *stop = g_new0(struct guest_stop, 1);

    stop->vmm = link->vmm;
    stop->generation = link->generation;
    stop->reason = reason;
    stop->detail = g_strdup(detail);
    g_main_context_invoke_full(link->vmm->main_context, G_PRIORITY_DEFAULT, handle_guest_stop,
                               stop, guest_stop_free);
}

/* The process ends after this (vm_report_fatal), possibly while the main
 * thread waits on the lost VM: only the event monitor, which any thread may
 * write, tells the daemon. A guest crash reads the same there, then the
 * process is gone: vm.info can no longer be asked. */
static void on_fatal(void *opaque, const char *detail)
{
    struct vm_link *link = opaque;
    events_emit_strings(link->vmm->events, "vm", "shutdown", "reason", "crash", "detail", detail, NULL);
    events_emit(link->vmm->events, "vmm", "shutdown", NULL);
}

struct guest_ready {
    struct vmm *vmm;
    guint generation;
    char *info_json;
};

static void guest_ready_free(gpointer data)
{
    struct guest_ready *ready = data;
    g_free(ready->info_json);
    g_free(ready);
}

static JsonNode *parse_json_or_string(const char *text)
{
    g_autoptr(JsonParser) parser = json_parser_new();

    if (text && bounded_json_load_data(parser, text, strlen(text), READINESS_INFO_MAX_BYTES, NULL) &&
        json_parser_get_root(parser))
        return json_node_copy(json_parser_get_root(parser));
    JsonNode *node = json_node_new(JSON_NODE_VALUE);
    json_node_set_string(node, text ? text : "");
    return node;
}

static gboolean handle_guest_ready(gpointer data)
{
    struct guest_ready *ready = data;
    struct vmm *vmm = ready->vmm;

    if (ready->generation != vmm->generation || !vmm->vm)
        return G_SOURCE_REMOVE;
    g_free(vmm->ready_info);
    vmm->ready_info = g_strdup(ready->info_json ? ready->info_json : "{}");
    events_emit(vmm->events, "guest", "ready", parse_json_or_string(vmm->ready_info));
    persist_guest_ready(vmm->vm);
    notify_ready_watches(vmm, vmm->ready_info);
    return G_SOURCE_REMOVE;
}

static void on_guest_ready(void *opaque, const char *info_json)
{
    struct vm_link *link = opaque;
    struct guest_ready *ready = g_new0(struct guest_ready, 1);

    ready->vmm = link->vmm;
    ready->generation = link->generation;
    ready->info_json = g_strdup(info_json);
    g_main_context_invoke_full(link->vmm->main_context, G_PRIORITY_DEFAULT, handle_guest_ready,
                               ready, guest_ready_free);
}

/* ---- vm.info / vm.counters ------------------------------------------------------ */

/* The guest's announcement is the readiness part of the "vsnap" object (vm.h):
 * {"ready": true, "boot_id": ..., "generation": ..., ...}; before it, just
 * "ready": false. */
static void add_ready_members(struct vmm *vmm, JsonBuilder *b)
{
    g_autoptr(JsonNode) info = vmm->ready_info ? parse_json_or_string(vmm->ready_info) : NULL;

    if (!info || !JSON_NODE_HOLDS_OBJECT(info)) {
        vjson_bool(b, "ready", info != NULL);
        return;
    }
    JsonObjectIter iter;
    const char *name;
    JsonNode *member;
    json_object_iter_init(&iter, json_node_get_object(info));
    while (json_object_iter_next(&iter, &name, &member)) {
        vjson_node(b, name, json_node_copy(member));
    }
}

/* The RAM's host page size and how KVM maps it (vm_kvm_mapped_pages): on
 * huge pages, whether the guest really gets 2 MiB mappings. */
static void add_memory_info(struct vmm *vmm, JsonBuilder *b)
{
    vjson_int(b, "ram_page_size", (gint64)memory_config_page_size(&vmm->config->memory));
    struct vm_mapped_pages pages;
    if (!vmm->vm || !vm_kvm_mapped_pages(vmm->vm, &pages)) {
        vjson_null(b, "kvm_mapped_pages");
        return;
    }
    vjson_object_begin(b, "kvm_mapped_pages");
    vjson_int(b, "4k", (gint64)pages.pages_4k);
    vjson_int(b, "2m", (gint64)pages.pages_2m);
    vjson_int(b, "1g", (gint64)pages.pages_1g);
    vjson_object_end(b);
}

static void add_vsnap_info(struct vmm *vmm, JsonBuilder *b)
{
    vjson_object_begin(b, "vsnap");
    vjson_str(b, "last_stop_reason", vmm->last_stop_reason);
    vjson_str(b, "last_stop_origin", vmm->last_stop_origin);
    vjson_str(b, "last_stop_detail", vmm->last_stop_detail);
    vjson_str(b, "last_error", vmm->last_error);
    vjson_int(b, "boot_count", vmm->boot_count);
    vjson_int(b, "ram_resident_bytes", vmm->vm ? (gint64)vm_ram_resident_bytes(vmm->vm) : 0);
    add_memory_info(vmm, b);
    vjson_str(b, "serial_pty", vmm->vm ? vm_serial_pty_path(vmm->vm) : NULL);
    vjson_str(b, "console_pty", vmm->vm ? vm_console_pty_path(vmm->vm) : NULL);
    add_ready_members(vmm, b);
    timeline_add_info(b);
    vjson_member(b, "notify");
    if (vmm->vm && vmm->config->vsock.present)
        notify_service_add_info(&vmm->link->notify, b);
    else
        vjson_null(b, NULL);
    vjson_member(b, "vmgenid");
    if (vmm->vm)
        vmgenid_add_info(vm_vmgenid(vmm->vm), b);
    else
        vjson_null(b, NULL);
    if (vmm->vm) /* snapshot id, restore mode, on-demand progress */
        persist_add_info(vmm->vm, b);
    vjson_member(b, "snapshot_job");
    if (vmm->live_job)
        persist_live_add_info(vmm->live_job, b);
    else
        vjson_null(b, NULL);
    vjson_object_end(b);
}

static void set_pty_file(JsonNode *config, const char *device, const char *pty)
{
    if (pty) {
        JsonObject *section = json_object_get_object_member(json_node_get_object(config), device);
        json_object_set_string_member(section, "file", pty);
    }
}

/* Cloud Hypervisor reports a PTY's path as config.serial.file and
 * config.console.file, which is where libvirt's ch driver reads them. */
static JsonNode *config_with_pty(struct vmm *vmm)
{
    JsonNode *config = vm_config_to_json(vmm->config);
    if (vmm->vm) {
        set_pty_file(config, "serial", vm_serial_pty_path(vmm->vm));
        set_pty_file(config, "console", vm_console_pty_path(vmm->vm));
    }
    return config;
}

JsonNode *vmm_info(struct vmm *vmm, GError **error)
{
    if (!require_created(vmm, error))
        return NULL;

    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_node(b, "config", config_with_pty(vmm));
    vjson_str(b, "state", vmm_state_to_string(vmm->state));
    vjson_int(b, "memory_actual_size", (gint64)vmm->config->memory.size);
    vjson_object_begin(b, "device_tree");
    vjson_object_end(b);
    add_vsnap_info(vmm, b);
    vjson_object_end(b);
    return json_builder_get_root(b);
}

JsonNode *vmm_workset(struct vmm *vmm, GError **error)
{
    if (!require_state(vmm, "read the working-set record", error, 2, VMM_STATE_RUNNING, VMM_STATE_PAUSED))
        return NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "workset", persist_workset_text(vmm->vm));
    vjson_object_end(b);
    return json_builder_get_root(b);
}

JsonNode *vmm_counters(struct vmm *vmm, GError **error)
{
    if (!require_state(vmm, "read counters", error, 2, VMM_STATE_RUNNING, VMM_STATE_PAUSED))
        return NULL;

    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vm_add_counters(vmm->vm, b);
    vjson_object_end(b);
    return json_builder_get_root(b);
}
