/* vsnap-shim: one VM per process, driven over Cloud Hypervisor's REST API or
 * created and booted from the command line. */
#define G_LOG_DOMAIN "vsnap-shim"

#include <glib-unix.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/cli.h"
#include "sandbox/confine.h"
#include "sandbox/syscall-filter.h"
#include "vmm/events.h"
#include "vmm/timeline.h"
#include "vmm/vmm.h"
#include "vsnap-config.h"

/* Everything the process owns, torn down in one place. */
struct shim {
    struct shim_options options;
    GMainLoop *loop;
    struct events *events;
    struct vmm *vmm;
    struct api_server *api;
    struct api_store store;
    FILE *log;
    GLogLevelFlags log_max; /* most verbose level written */
};

/* ---- logging ----------------------------------------------------------------- */

static const char *level_name(GLogLevelFlags level)
{
    if (level & G_LOG_LEVEL_ERROR)
        return "error";
    if (level & G_LOG_LEVEL_CRITICAL)
        return "critical";
    if (level & G_LOG_LEVEL_WARNING)
        return "warning";
    if (level & G_LOG_LEVEL_MESSAGE)
        return "message";
    if (level & G_LOG_LEVEL_INFO)
        return "info";
    return "debug";
}

static GLogWriterOutput write_log(GLogLevelFlags level, const GLogField *fields, gsize n,
                                  gpointer data)
{
    struct shim *shim = data;
    const char *message = NULL, *domain = NULL;

    if ((level & G_LOG_LEVEL_MASK) > shim->log_max && !(level & G_LOG_FLAG_FATAL))
        return G_LOG_WRITER_HANDLED;
    for (gsize i = 0; i < n; i++) {
        if (g_strcmp0(fields[i].key, "MESSAGE") == 0)
            message = fields[i].value;
        else if (g_strcmp0(fields[i].key, "GLIB_DOMAIN") == 0)
            domain = fields[i].value;
    }
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *stamp = g_date_time_format(now, "%H:%M:%S.%f");
    fprintf(shim->log ? shim->log : stderr, "%s %s[%d] %s: %s\n", stamp,
            domain ? domain : "vsnap-shim", (int)getpid(), level_name(level),
            message ? message : "");
    fflush(shim->log ? shim->log : stderr);
    return G_LOG_WRITER_HANDLED;
}

/* Default: warnings and worse; -v adds messages and info, -vv debug. */
static bool setup_logging(struct shim *shim, GError **error)
{
    static const GLogLevelFlags by_verbosity[] = {
        G_LOG_LEVEL_WARNING, G_LOG_LEVEL_INFO, G_LOG_LEVEL_DEBUG,
    };
    int v = MIN(shim->options.verbosity, (int)G_N_ELEMENTS(by_verbosity) - 1);

    shim->log_max = by_verbosity[v];
    if (shim->options.log_file) {
        shim->log = fopen(shim->options.log_file, "ae");
        if (!shim->log) {
            g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
                        "--log-file %s: %s", shim->options.log_file, g_strerror(errno));
            return false;
        }
    }
    g_log_set_writer_func(write_log, shim, NULL);
    return true;
}

/* ---- lifecycle ----------------------------------------------------------------- */

static void quit_loop(void *data)
{
    struct shim *shim = data;
    g_main_loop_quit(shim->loop);
}

static gboolean on_terminate_signal(gpointer data)
{
    struct shim *shim = data;
    g_message("signal received: shutting down");
    g_main_loop_quit(shim->loop);
    return G_SOURCE_CONTINUE;
}

static bool start_direct_vm(struct shim *shim, GError **error)
{
    struct vm_config *cfg = g_steal_pointer(&shim->options.direct_config);

    if (!vmm_create(shim->vmm, cfg, error) || !vmm_boot(shim->vmm, error))
        return false;
    return true;
}

static bool start(struct shim *shim, GError **error)
{
    /* First, so that a signal sent once anything is visible is handled. */
    g_unix_signal_add(SIGTERM, on_terminate_signal, shim);
    g_unix_signal_add(SIGINT, on_terminate_signal, shim);
    if (!setup_logging(shim, error))
        return false;
    g_debug("vsnap-shim v%s, pid %d, verbosity %d", VSNAP_VERSION, (int)getpid(),
            shim->options.verbosity);
    shim->events = shim->options.event_monitor ? cli_open_event_monitor(shim->options.event_monitor, error)
                                               : events_new_null();
    if (!shim->events)
        return false;
    shim->loop = g_main_loop_new(NULL, FALSE);
    shim->vmm = vmm_new(shim->events, quit_loop, shim);
    events_emit(shim->events, "vmm", "starting", NULL);
    if (shim->options.api_socket) {
        shim->api = api_server_new(shim->vmm, shim->options.api_socket, &shim->store, error);
        if (!shim->api)
            return false;
    } else {
        vmm_set_exit_on_guest_poweroff(shim->vmm, true);
    }
    timeline_mark(TIMELINE_API_READY);
    if (shim->options.direct_config && !start_direct_vm(shim, error))
        return false;
    return true;
}

/* ---- confinement ----------------------------------------------------------- */

/* The value of a "path=P" option (--api-socket, --event-monitor), else NULL. */
static const char *path_of(const char *spec)
{
    return spec && g_str_has_prefix(spec, "path=") ? spec + strlen("path=") : NULL;
}

static void expose_console(struct sandbox_confine *c, const struct console_config *con)
{
    sandbox_confine_expose(c, con->file, true);
    if (con->socket) {
        g_autofree char *dir = g_path_get_dirname(con->socket);
        sandbox_confine_expose(c, dir, true);
    }
}

/* What the command line names is in the jail, at its own path: the log,
 * the event monitor, the API socket's directory (the socket is made
 * there), and a --kernel VM's files. */
static void expose_command_line(struct shim *shim)
{
    struct sandbox_confine *c = shim->options.confine;
    const struct vm_config *cfg = shim->options.direct_config;
    sandbox_confine_expose(c, shim->options.log_file, true);
    sandbox_confine_expose(c, path_of(shim->options.event_monitor), true);
    if (path_of(shim->options.api_socket)) {
        g_autofree char *dir = g_path_get_dirname(path_of(shim->options.api_socket));
        sandbox_confine_expose(c, dir, true);
    }
    if (!cfg)
        return;
    sandbox_confine_expose(c, cfg->payload.kernel, false);
    sandbox_confine_expose(c, cfg->payload.initramfs, false);
    for (unsigned i = 0; i < cfg->ndisks; i++)
        sandbox_confine_expose(c, cfg->disks[i].path, !cfg->disks[i].readonly);
    expose_console(c, &cfg->serial);
    expose_console(c, &cfg->console);
    if (cfg->vsock.socket) {
        g_autofree char *dir = g_path_get_dirname(cfg->vsock.socket);
        sandbox_confine_expose(c, dir, true);
    }
    sandbox_confine_expose(c, cfg->rng.src, false);
}

/* Before anything else runs: the jail first (the filter does not allow
 * mount or pivot_root), then the main thread's allow-list, which every
 * thread started later inherits. */
static bool confine(struct shim *shim, GError **error)
{
    if (shim->options.confine) {
        expose_command_line(shim);
        if (!sandbox_confine_enter(shim->options.confine, error))
            return false;
    }
    if (!sandbox_seccomp_install_main(shim->options.seccomp, error))
        return false;
    timeline_mark(TIMELINE_CONFINED);
    return true;
}

/* The VM goes first (its threads may still write to the event monitor). */
static void stop(struct shim *shim)
{
    vmm_free(shim->vmm);
    api_server_free(shim->api);
    api_store_remove_pulled(&shim->store); /* no VM maps them any more */
    api_store_clear(&shim->store);
    events_free(shim->events);
    if (shim->loop)
        g_main_loop_unref(shim->loop);
    shim_options_clear(&shim->options);
    /* The writer stays installed (GLib allows one); it falls back to stderr. */
    if (shim->log) {
        FILE *log = shim->log;
        shim->log = NULL;
        fclose(log);
    }
}

/* Invoked as cloud-hypervisor (the link the build makes), the first line is
 * Cloud Hypervisor's own form, which its clients parse: libvirt's ch driver
 * takes what follows "cloud-hypervisor " up to the first '-' after the last
 * '/' in the whole output, so no line may hold a '/'. The second line keeps
 * vsnap's own version visible. */
static void print_version(const char *argv0)
{
    g_autofree char *name = g_path_get_basename(argv0 ? argv0 : "");
    if (strcmp(name, "cloud-hypervisor") == 0)
        printf("cloud-hypervisor v%s\n", VSNAP_CH_API_VERSION);
    printf("vsnap-shim v%s\n", VSNAP_VERSION);
}

int main(int argc, char **argv)
{
    struct shim shim = { 0 };
    g_autoptr(GError) error = NULL;

    timeline_mark(TIMELINE_PROCESS_START);
    /* A client that hangs up must cost an EPIPE, never the process. */
    signal(SIGPIPE, SIG_IGN);
    if (!shim_options_parse(argc, argv, &shim.options, &error)) {
        fprintf(stderr, "vsnap-shim: %s\n", error->message);
        shim_options_clear(&shim.options);
        return 1;
    }
    if (shim.options.version) {
        print_version(argv[0]);
        shim_options_clear(&shim.options);
        return 0;
    }
    /* The store's settings are read before the jail hides their file. */
    if (!api_store_init(&shim.store, shim.options.store_config, shim.options.store_cache_dir, &error) ||
        !confine(&shim, &error) || !start(&shim, &error)) {
        fprintf(stderr, "vsnap-shim: %s\n", error->message);
        if (shim.log)
            g_warning("%s", error->message);
        stop(&shim);
        return 1;
    }
    g_main_loop_run(shim.loop);
    stop(&shim);
    return 0;
}
