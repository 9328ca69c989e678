/* virsh dump --memory-only (see persist/dump.h). */
#include "persist/dump.h"

#include <errno.h>
#include <fcntl.h>
#include <libvirt/libvirt.h>
#include <stdio.h>
#include <unistd.h>

#include "domain/events.h"
#include "monitor/monitor.h"
#include "persist/job.h"
#include "run/process.h"
#include "util/test-hook.h"
#include "util/virt-error.h"

static bool refuse(GError **error, int code, const char *text)
{
    g_set_error_literal(error, VSNAP_VIR_ERROR, code, text);
    return false;
}

static bool check_request(const char *to, unsigned format, unsigned flags, GError **error)
{
    static const char *const formats[] = {
        [VIR_DOMAIN_CORE_DUMP_FORMAT_KDUMP_ZLIB] = "kdump-zlib",
        [VIR_DOMAIN_CORE_DUMP_FORMAT_KDUMP_LZO] = "kdump-lzo",
        [VIR_DOMAIN_CORE_DUMP_FORMAT_KDUMP_SNAPPY] = "kdump-snappy",
        [VIR_DOMAIN_CORE_DUMP_FORMAT_WIN_DMP] = "win-dmp",
    };
    unsigned known = VIR_DUMP_MEMORY_ONLY | VIR_DUMP_LIVE | VIR_DUMP_RESET | VIR_DUMP_CRASH;
    if (flags & VIR_DUMP_BYPASS_CACHE)
        return refuse(error, VIR_ERR_ARGUMENT_UNSUPPORTED, "vsnap does not write dumps bypassing the cache");
    if (flags & ~known) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)", flags & ~known);
        return false;
    }
    if (!(flags & VIR_DUMP_MEMORY_ONLY))
        return refuse(error, VIR_ERR_OPERATION_UNSUPPORTED,
                      "vsnap writes memory-only dumps (ELF cores of guest memory): use --memory-only "
                      "(virsh save writes an image the domain can be restored from)");
    if ((flags & VIR_DUMP_RESET) && (flags & VIR_DUMP_CRASH))
        return refuse(error, VIR_ERR_INVALID_ARG, "--crash and --reset are mutually exclusive");
    if (format != VIR_DOMAIN_CORE_DUMP_FORMAT_RAW) {
        const char *name = format < G_N_ELEMENTS(formats) ? formats[format] : NULL;
        if (name)
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_UNSUPPORTED,
                        "the %s dump format is not supported by vsnap: its dumps are ELF (--format elf)", name);
        else
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unknown dump format %u", format);
        return false;
    }
    if (!g_path_is_absolute(to))
        return refuse(error, VIR_ERR_INVALID_ARG, "the dump file must be an absolute path");
    return true;
}

/* ---- the file: unnamed until it is whole ---- */

struct dump_file {
    int fd;
    char *to;
    char *hidden;   /* the name it is written under where there is no O_TMPFILE, else NULL */
};

static bool open_dump_file(struct dump_file *f, const char *to, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(to);
    f->to = g_strdup(to);
    f->hidden = NULL;
    f->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (f->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
        g_autofree char *base = g_path_get_basename(to);
        f->hidden = g_strdup_printf("%s/.%s.vsnap-dump-XXXXXX", dir, base);
        f->fd = g_mkstemp_full(f->hidden, O_WRONLY | O_CLOEXEC, 0600);
        if (f->fd < 0)
            g_clear_pointer(&f->hidden, g_free);
    }
    if (f->fd >= 0)
        return true;
    int err = errno;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create the dump file %s: %s", to,
                g_strerror(err));
    g_clear_pointer(&f->to, g_free);
    return false;
}

/* Give the whole file its name (replacing what had it), or drop it. */
static bool finish_dump_file(struct dump_file *f, bool keep, GError **error)
{
    bool ok = true;
    if (keep && !f->hidden) {
        g_autofree char *proc = g_strdup_printf("/proc/self/fd/%d", f->fd);
        g_autofree char *dir = g_path_get_dirname(f->to);
        f->hidden = g_strdup_printf("%s/.vsnap-dump-%d-%" G_GINT64_FORMAT, dir, (int)getpid(), g_get_monotonic_time());
        if (linkat(AT_FDCWD, proc, AT_FDCWD, f->hidden, AT_SYMLINK_FOLLOW) < 0)
            g_clear_pointer(&f->hidden, g_free);
        ok = f->hidden != NULL;
    }
    if (ok && keep && rename(f->hidden, f->to) < 0)
        ok = false;
    if (!ok)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot name the dump file %s: %s", f->to,
                    g_strerror(errno));
    if ((!keep || !ok) && f->hidden)
        unlink(f->hidden);
    close(f->fd);
    g_free(f->to);
    g_free(f->hidden);
    return ok;
}

/* ---- pausing for it ---- */

static char *api_socket(struct vsnap_domain *dom, bool *running, GError **error)
{
    g_mutex_lock(&dom->lock);
    char *api = dom->run ? g_strdup(dom->run->api_socket) : NULL;
    *running = dom->run && dom->state == VIR_DOMAIN_RUNNING;
    g_mutex_unlock(&dom->lock);
    if (!api)
        refuse(error, VIR_ERR_OPERATION_INVALID, "domain is not running");
    return api;
}

static void set_state(struct vsnap_domain *dom, int state, int reason)
{
    g_mutex_lock(&dom->lock);
    if (dom->run)
        vsnap_domain_set_state_locked(dom, state, reason);
    g_mutex_unlock(&dom->lock);
}

static bool shim_ok(struct vsnap_domain *dom, bool ok, GError **error)
{
    if (!ok)
        process_kill_if_stuck(dom, error ? *error : NULL);
    return ok;
}

static guint64 ram_bytes(struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    guint64 bytes = dom->def->memory_kib * 1024;
    g_mutex_unlock(&dom->lock);
    return bytes;
}

/* The dump itself, the VM paused around it unless live. */
static bool dump_paused_or_live(struct vsnap_domain *dom, const char *api, int fd, bool pause, GError **error)
{
    if (pause && !shim_ok(dom, monitor_vm_pause(api, error), error))
        return false;
    if (pause) {
        set_state(dom, VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_DUMP);
        test_hook("dump-paused");
    }
    bool ok = shim_ok(dom, monitor_vm_coredump(api, fd, ram_bytes(dom), error), error);
    g_autoptr(GError) resume_error = NULL;
    if (pause && !shim_ok(dom, monitor_vm_resume(api, &resume_error), &resume_error)) {
        g_warning("domain %s: cannot resume after its dump: %s", dom->name, resume_error->message);
        if (ok)
            g_propagate_error(error, g_steal_pointer(&resume_error));
        return false;
    }
    if (pause)
        set_state(dom, VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_UNPAUSED);
    return ok;
}

/* --crash: the domain stops as crashed, as if the guest had. */
static bool stop_crashed(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    if (!process_stop(drv, dom, VIR_DOMAIN_SHUTOFF_CRASHED, false, error))
        return false;
    g_mutex_lock(&dom->lock);
    event_queue_lifecycle(drv->events, dom, VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_CRASHED);
    bool transient = !dom->persistent;
    g_mutex_unlock(&dom->lock);
    if (transient)
        drv->end_transient(drv, dom);
    return true;
}

static bool dump_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *to, unsigned flags,
                        GError **error)
{
    bool running;
    g_autofree char *api = api_socket(dom, &running, error);
    struct dump_file file;
    if (!api || !open_dump_file(&file, to, error))
        return false;
    bool pause = running && !(flags & VIR_DUMP_LIVE);
    struct domain_job job = {
        .operation = VIR_DOMAIN_JOB_OPERATION_DUMP, .total = ram_bytes(dom), .resume = pause,
        .leftover = file.hidden,
    };
    bool begun = domain_job_begin(dom, &job, error);
    bool ok = begun && dump_paused_or_live(dom, api, file.fd, pause, error);
    ok = finish_dump_file(&file, ok, ok ? error : NULL) && ok;
    if (begun)
        domain_job_end(dom);
    if (ok && (flags & VIR_DUMP_RESET))
        ok = shim_ok(dom, monitor_vm_reboot(api, error), error);
    if (ok && (flags & VIR_DUMP_CRASH))
        ok = stop_crashed(drv, dom, error);
    return ok;
}

bool dump_memory(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *to, unsigned format,
                 unsigned flags, GError **error)
{
    if (!check_request(to, format, flags, error) || !domain_job_acquire(dom, "dump", error))
        return false;
    bool ok = dump_locked(drv, dom, to, flags, error);
    domain_job_release(dom);
    return ok;
}
