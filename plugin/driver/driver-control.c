/* virsh reset, inject-nmi and send-key (driver-control.h): look up the shim,
 * take the job, ask the shim. */
#include "driver/driver-control.h"

#include <libvirt/libvirt.h>

#include "domain/domain.h"
#include "driver/keycodes.h"
#include "monitor/monitor.h"
#include "run/process.h"
#include "util/virt-error.h"

#define DEFAULT_HOLD_MS 100

static bool no_flags(unsigned flags, GError **error)
{
    if (flags == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)", flags);
    return false;
}

/* The shim's API socket and state of an active domain; NULL (with
 * VIR_ERR_OPERATION_INVALID, as libvirt says it) when it is shut off. */
static char *active_api_socket(struct vsnap_domain *dom, int *state, GError **error)
{
    g_mutex_lock(&dom->lock);
    char *api = dom->run ? g_strdup(dom->run->api_socket) : NULL;
    *state = dom->state;
    g_mutex_unlock(&dom->lock);
    if (!api)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
    return api;
}

static bool asked(struct vsnap_domain *dom, bool ok, GError **error)
{
    if (!ok)
        process_kill_if_stuck(dom, error ? *error : NULL);
    return ok;
}

bool driver_reset(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags, GError **error)
{
    if (!no_flags(flags, error) || !domain_job_acquire(dom, "reset", error))
        return false;
    int state;
    g_autofree char *api = active_api_socket(dom, &state, error);
    bool ok = api && asked(dom, monitor_vm_reboot(api, error), error);
    /* The shim runs the fresh VM; a domain that was paused stays so. */
    if (ok && state == VIR_DOMAIN_PAUSED)
        ok = asked(dom, monitor_vm_pause(api, error), error);
    domain_job_release(dom);
    return ok;
}

bool driver_inject_nmi(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags, GError **error)
{
    if (!no_flags(flags, error) || !domain_job_acquire(dom, "inject-nmi", error))
        return false;
    int state;
    g_autofree char *api = active_api_socket(dom, &state, error);
    bool ok = api && asked(dom, monitor_vm_nmi(api, error), error);
    domain_job_release(dom);
    return ok;
}

static bool check_keys(unsigned n, GError **error)
{
    if (n >= 1 && n <= VIR_DOMAIN_SEND_KEY_MAX_KEYS)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "nkeycodes must be between 1 and %d, not %u",
                VIR_DOMAIN_SEND_KEY_MAX_KEYS, n);
    return false;
}

bool driver_send_key(struct vsnap_driver *drv, struct vsnap_domain *dom, int codeset, unsigned holdtime_ms,
                     const uint32_t *codes, unsigned n, unsigned flags, GError **error)
{
    uint8_t press[VIR_DOMAIN_SEND_KEY_MAX_KEYS * KEYCODE_MAX_BYTES];
    uint8_t release[VIR_DOMAIN_SEND_KEY_MAX_KEYS * KEYCODE_MAX_BYTES];
    unsigned n_press, n_release;
    if (!no_flags(flags, error) || !check_keys(n, error) ||
        !keycodes_to_scancodes(codeset, codes, n, press, &n_press, release, &n_release, error))
        return false;
    if (!domain_job_acquire(dom, "send-key", error))
        return false;
    int state;
    g_autofree char *api = active_api_socket(dom, &state, error);
    bool ok = api && asked(dom, monitor_vm_send_scancodes(api, press, n_press, error), error);
    if (ok)
        g_usleep((gulong)(holdtime_ms ? holdtime_ms : DEFAULT_HOLD_MS) * 1000);
    ok = ok && asked(dom, monitor_vm_send_scancodes(api, release, n_release, error), error);
    domain_job_release(dom);
    return ok;
}
