#include "restore.h"

#include <libvirt/libvirt.h>

#include "clone-origin.h"
#include "monitor/monitor.h"
#include "run/jail.h"
#include "run/process.h"
#include "snapshot-dir.h"

/* What the domain becomes and announces, by origin and run/paused. */
struct restore_outcome {
    int running_reason, paused_reason;
    int started_detail, suspended_detail;
};

static const struct restore_outcome outcomes[] = {
    [RESTORE_FROM_SAVE] = {
        .running_reason = VIR_DOMAIN_RUNNING_RESTORED, .paused_reason = VIR_DOMAIN_PAUSED_USER,
        .started_detail = VIR_DOMAIN_EVENT_STARTED_RESTORED,
        .suspended_detail = VIR_DOMAIN_EVENT_SUSPENDED_RESTORED,
    },
    [RESTORE_FROM_SNAPSHOT] = {
        .running_reason = VIR_DOMAIN_RUNNING_FROM_SNAPSHOT,
        .paused_reason = VIR_DOMAIN_PAUSED_FROM_SNAPSHOT,
        .started_detail = VIR_DOMAIN_EVENT_STARTED_FROM_SNAPSHOT,
        .suspended_detail = VIR_DOMAIN_EVENT_SUSPENDED_FROM_SNAPSHOT,
    },
};

const char *restore_mode(struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    const struct domain_def *def = dom->next_def ? dom->next_def : dom->def;
    const char *mode = restore_mode_to_string(def->vsnap.restore_mode);
    g_mutex_unlock(&dom->lock);
    return mode;
}

struct restore_setup {
    const char *source_dir;
    const char *source_url;
    const char *mode;
    bool resume;
    bool once;
};

/* process_start_how.setup_vm: vm.restore in the new shim. */
static bool send_restore(struct domain_run *run, const struct domain_def *live, void *data,
                         GError **error)
{
    const struct restore_setup *setup = data;
    struct monitor_restore restore = {
        .source_url = setup->source_url, .mode = setup->mode, .resume = setup->resume, .once = setup->once,
        .live = live, .vsock_socket = run->vsock_socket, .disk_work_dir = run->disk_dir,
        .net_fds = run->net_fds, .n_net_fds = run->n_net_fds, .hand_over_workset = !setup->once,
    };
    /* The run has no domain yet (process_start_with lists it after this). */
    if (!setup->once && g_str_equal(setup->mode, restore_mode_to_string(RESTORE_MODE_ONDEMAND)))
        run->workset_dir = g_strdup(setup->source_dir);
    return monitor_vm_restore(run->api_socket, &restore, error);
}

/* A shim that restores by sharing builds the snapshot's RAM image beside it,
 * unless it sees the directory read-only (a clone's origin's, dirs): the
 * daemon builds that one, readable by the shims. */
static bool prepare_shared_image(struct vsnap_driver *drv, const char *mode, const char *source_dir,
                                 const GPtrArray *dirs, GError **error)
{
    bool read_only = false;
    for (guint i = 0; i + 1 < dirs->len && !read_only; i++)
        read_only = g_str_equal(dirs->pdata[i], source_dir);
    if (!read_only || !g_str_equal(mode, restore_mode_to_string(RESTORE_MODE_SHARED)))
        return true;
    g_autofree char *image = NULL;
    return snapdir_build_ram_image(source_dir, &image, error) && jail_share_read(drv, image, error);
}

bool restore_start(struct vsnap_driver *drv, struct vsnap_domain *dom,
                   const struct restore_request *req, GError **error)
{
    const struct restore_outcome *out = &outcomes[req->origin];
    g_autofree char *url = snapdir_url(req->source_dir);
    /* A save image (virsh restore, a managed save) is restored once. */
    struct restore_setup setup = {.source_dir = req->source_dir, .source_url = url, .mode = restore_mode(dom),
                                  .resume = req->run, .once = req->origin == RESTORE_FROM_SAVE};
    /* A clone's state sits on its origin's snapshot, which its shim reads. */
    g_autoptr(GPtrArray) origin_dirs = clone_origin_dirs(drv, req->def, error);
    if (!origin_dirs || !prepare_shared_image(drv, setup.mode, req->source_dir, origin_dirs, error))
        return false;
    struct process_start_how how = {
        .def = req->def, .setup_vm = send_restore, .data = &setup,
        .read_only_dirs = (const char *const *)origin_dirs->pdata,
        .state = req->run ? VIR_DOMAIN_RUNNING : VIR_DOMAIN_PAUSED,
        .reason = req->run ? out->running_reason : out->paused_reason,
        .event = VIR_DOMAIN_EVENT_STARTED, .detail = out->started_detail,
        .keep_definition = req->origin == RESTORE_FROM_SAVE,
    };
    if (!process_start_with(drv, dom, &how, error))
        return false;
    /* As libvirt: started, then suspended when the state says paused. */
    if (!req->run) {
        g_mutex_lock(&dom->lock);
        event_queue_lifecycle(drv->events, dom, VIR_DOMAIN_EVENT_SUSPENDED,
                              out->suspended_detail);
        g_mutex_unlock(&dom->lock);
    }
    return true;
}
