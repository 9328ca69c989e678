#include "snapshot-vm.h"

#include <errno.h>
#include <libvirt/libvirt.h>
#include <sys/stat.h>
#include <unistd.h>

#include "monitor/monitor.h"
#include "persist/job.h"
#include "run/process.h"
#include "snapshot-dir.h"
#include "util/test-hook.h"
#include "util/virt-error.h"

static char *api_socket(struct vsnap_domain *dom, int *state, uint64_t *ram_bytes)
{
    g_mutex_lock(&dom->lock);
    char *path = dom->run ? g_strdup(dom->run->api_socket) : NULL;
    *state = dom->state;
    *ram_bytes = dom->def->memory_kib * 1024;
    g_mutex_unlock(&dom->lock);
    return path;
}

/* The shim writes the destination (and a temporary directory beside it):
 * it gets the owner of its parent, which plugin/run/jail.c gave a confined
 * shim's user (root's own when shims are not confined). */
static bool give_to_shim(const char *dir, GError **error)
{
    g_autofree char *parent = g_path_get_dirname(dir);
    struct stat st;
    if (stat(parent, &st) == 0 && chown(dir, st.st_uid, st.st_gid) == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR,
                "cannot give %s to the owner of its parent: %s", dir, g_strerror(errno));
    return false;
}

/* domjobabort ended the job (persist/job.h): nothing was taken. */
static bool aborted(struct vsnap_domain *dom, GError **error)
{
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_ABORTED,
                "operation aborted: the snapshot of %s was cancelled (domjobabort)", dom->name);
    return false;
}

static bool snapshot_paused(struct vsnap_domain *dom, const char *api, uint64_t ram_bytes,
                            const char *dir, const char *parent_dir, bool *refused,
                            GError **error)
{
    if (!give_to_shim(dir, error))
        return false;
    g_autofree char *url = snapdir_url(dir);
    g_autofree char *parent_url = parent_dir ? snapdir_url(parent_dir) : NULL;
    bool cancelled = false;
    g_autoptr(GError) local = NULL;
    if (domain_job_cancelled(dom) ||
        !monitor_vm_snapshot(api, url, parent_url, ram_bytes, refused, &cancelled, &local)) {
        if (!local || cancelled)
            return aborted(dom, error);
        process_kill_if_stuck(dom, local);
        g_propagate_error(error, g_steal_pointer(&local));
        return false;
    }
    test_hook("snapshot-written");
    /* The shim just wrote the layer with the checksums of what it read from
     * RAM: seal it, so reverts check its data again only if the file changes. */
    return snapdir_seal(dir, error);
}

/* The shim pre-copies and stops the VM itself; a cancel is no refusal. */
static bool snapshot_live(struct vsnap_domain *dom, const char *api, uint64_t ram_bytes,
                          const char *dir, const char *parent_dir, bool *refused,
                          struct monitor_live_result *result, GError **error)
{
    if (!give_to_shim(dir, error))
        return false;
    g_autofree char *url = snapdir_url(dir);
    g_autofree char *parent_url = parent_dir ? snapdir_url(parent_dir) : NULL;
    bool cancelled = false;
    g_autoptr(GError) local = NULL;
    test_hook("snapshot-live");
    if (!monitor_vm_snapshot_live(api, url, parent_url, ram_bytes, refused, &cancelled, result, &local)) {
        if (cancelled)
            return aborted(dom, error);
        process_kill_if_stuck(dom, local);
        g_propagate_error(error, g_steal_pointer(&local));
        return false;
    }
    test_hook("snapshot-written");
    return snapdir_seal(dir, error);
}

/* The running domain's API socket, its state and RAM size; NULL (error set)
 * when it has no shim. */
static char *running_api(struct vsnap_domain *dom, int *state, uint64_t *ram_bytes, GError **error)
{
    char *api = api_socket(dom, state, ram_bytes);
    if (!api)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
    return api;
}

static bool take_live(struct vsnap_domain *dom, const char *dir, const char *parent_dir,
                      bool *refused, struct monitor_live_result *result, GError **error)
{
    int state;
    uint64_t ram_bytes;
    g_autofree char *api = running_api(dom, &state, &ram_bytes, error);
    if (!api)
        return false;
    if (state != VIR_DOMAIN_RUNNING) /* paused already: nothing to keep running */
        return snapshot_paused(dom, api, ram_bytes, dir, parent_dir, refused, error);
    return snapshot_live(dom, api, ram_bytes, dir, parent_dir, refused, result, error);
}

static bool take(struct vsnap_domain *dom, const char *dir, const char *parent_dir,
                 bool *refused, struct monitor_live_result *result, GError **error)
{
    (void)result; /* a paused snapshot has no live figures */
    int state;
    uint64_t ram_bytes;
    g_autofree char *api = running_api(dom, &state, &ram_bytes, error);
    if (!api)
        return false;
    bool was_running = state == VIR_DOMAIN_RUNNING;
    if (was_running && !monitor_vm_pause(api, error)) {
        process_kill_if_stuck(dom, error ? *error : NULL);
        return false;
    }
    test_hook("snapshot-paused");
    bool ok = snapshot_paused(dom, api, ram_bytes, dir, parent_dir, refused, error);
    g_autoptr(GError) resume_error = NULL;
    if (was_running && !monitor_vm_resume(api, &resume_error)) {
        process_kill_if_stuck(dom, resume_error);
        g_warning("domain %s: cannot resume after the snapshot: %s", dom->name,
                  resume_error->message);
        if (ok) {
            g_propagate_error(error, g_steal_pointer(&resume_error));
            ok = false;
        }
    }
    return ok;
}

bool vmsnap_take(struct vsnap_domain *dom, const char *dir, const char *parent_dir,
                 GError **error)
{
    return take(dom, dir, parent_dir, NULL, NULL, error);
}

/* What a refused diff left in dir goes; dir is empty again for a full one. */
static bool empty_dir(const char *dir, GError **error)
{
    if (!snapdir_remove(dir, error))
        return false;
    if (g_mkdir_with_parents(dir, 0700) < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create %s: %s", dir,
                    g_strerror(errno));
        return false;
    }
    return true;
}

typedef bool (*take_func)(struct vsnap_domain *dom, const char *dir, const char *parent_dir, bool *refused,
                          struct monitor_live_result *result, GError **error);

static bool diff_or_full(struct vsnap_domain *dom, const char *dir, const char *base_dir, take_func take,
                         bool *is_diff, struct monitor_live_result *result, GError **error)
{
    *is_diff = false;
    if (base_dir) {
        g_autoptr(GError) diff_error = NULL;
        bool refused = false;
        if (take(dom, dir, base_dir, &refused, result, &diff_error)) {
            *is_diff = true;
            return true;
        }
        /* Only a diff the shim refused (it cannot take one on that base) is
         * taken again in full: a shim that failed at it, died or did not
         * answer would fail the full one too, and its error is the one to
         * report. */
        if (!refused) {
            g_propagate_error(error, g_steal_pointer(&diff_error));
            return false;
        }
        g_message("domain %s: the shim refused a diff on %s (%s); taking a full snapshot",
                  dom->name, base_dir, diff_error->message);
        if (!empty_dir(dir, error))
            return false;
    }
    return take(dom, dir, NULL, NULL, result, error);
}

bool vmsnap_take_diff_or_full(struct vsnap_domain *dom, const char *dir, const char *base_dir,
                              bool *is_diff, GError **error)
{
    return diff_or_full(dom, dir, base_dir, take, is_diff, NULL, error);
}

bool vmsnap_take_live_diff_or_full(struct vsnap_domain *dom, const char *dir, const char *base_dir,
                                   bool *is_diff, struct monitor_live_result *result, GError **error)
{
    *result = (struct monitor_live_result){0};
    return diff_or_full(dom, dir, base_dir, take_live, is_diff, result, error);
}
