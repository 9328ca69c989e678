/* virtvsnapd: the vsnap libvirt driver daemon.
 *
 *   virtvsnapd [--config FILE] [--socket-dir DIR] [--state-dir DIR] [--run-dir DIR]
 *              [--log-dir DIR] [--shim PATH] [--schema-dir DIR] [--timeout SECONDS]
 *
 * Settings come from the built-in defaults (system mode when run as root,
 * session mode otherwise), then the configuration file, then the command
 * line. See virtvsnapd.conf for every key and its default. */
#include <curl/curl.h>
#include <errno.h>
#include <glib-unix.h>
#include <libgen.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "domain/domain-job-lock.h"
#include "driver/driver.h"
#include "monitor/monitor.h"
#include "plugin-config.h"
#include "rpc/server.h"
#include "vsnap-config.h"

struct options {
    char *config, *socket_dir, *state_dir, *run_dir, *log_dir, *shim, *schema_dir;
    int timeout;
    gboolean version;
};

struct daemon {
    struct options opts;
    struct driver_paths paths;
    struct driver_store store;
    struct rpc_limits limits;
    struct vsnap_driver *driver;
    struct rpc_server *server;
    GMainLoop *loop;
    char *sock_path, *sock_ro_path;
    bool own_sockets;       /* we created the socket files (not systemd) */
    gint64 idle_since;      /* monotonic us; 0 while busy */
};

static bool parse_options(int *argc, char ***argv, struct options *o, GError **error)
{
    GOptionEntry entries[] = {
        {"config", 'f', 0, G_OPTION_ARG_FILENAME, &o->config, "Configuration file", "FILE"},
        {"socket-dir", 0, 0, G_OPTION_ARG_FILENAME, &o->socket_dir,
         "Directory of virtvsnapd-sock and virtvsnapd-sock-ro", "DIR"},
        {"state-dir", 0, 0, G_OPTION_ARG_FILENAME, &o->state_dir,
         "Persistent state: domains/, autostart/ (and run/, log/ unless given)", "DIR"},
        {"run-dir", 0, 0, G_OPTION_ARG_FILENAME, &o->run_dir, "Runtime state of running domains",
         "DIR"},
        {"log-dir", 0, 0, G_OPTION_ARG_FILENAME, &o->log_dir, "Per-domain shim logs", "DIR"},
        {"shim", 0, 0, G_OPTION_ARG_FILENAME, &o->shim, "The vsnap-shim executable", "PATH"},
        {"schema-dir", 0, 0, G_OPTION_ARG_FILENAME, &o->schema_dir,
         "Directory of the RelaxNG schemas (domain.rng)", "DIR"},
        {"timeout", 't', 0, G_OPTION_ARG_INT, &o->timeout,
         "Exit after SECONDS without clients or running domains (0: never)", "SECONDS"},
        {"version", 'V', 0, G_OPTION_ARG_NONE, &o->version, "Print the version", NULL},
        {NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- vsnap libvirt driver daemon");
    g_option_context_add_main_entries(ctx, entries, NULL);
    return g_option_context_parse(ctx, argc, argv, error);
}

/* Built from the source tree, the daemon sits in <build>/plugin/ and the
 * shim in <build>/shim/; installed, both come from the configured prefix. */
static void default_tool_paths(struct driver_paths *p)
{
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    g_autofree char *exe_dir = exe ? g_path_get_dirname(exe) : g_strdup(".");
    g_autofree char *build_shim = g_build_filename(exe_dir, "..", "shim", "vsnap-shim", NULL);
    if (g_file_test(build_shim, G_FILE_TEST_IS_EXECUTABLE)) {
        p->shim_path = g_canonicalize_filename(build_shim, NULL);
        p->schema_dir = g_strdup(VSNAP_SOURCE_SCHEMA_DIR);
    } else {
        p->shim_path = g_strdup(VSNAP_INSTALLED_SHIM);
        p->schema_dir = g_strdup(VSNAP_INSTALLED_SCHEMA_DIR);
    }
}

static bool default_paths(struct driver_paths *p, GError **error)
{
    p->privileged = geteuid() == 0;
    p->confine = p->privileged;   /* only root can confine */
    default_tool_paths(p);
    if (p->privileged) {
        p->socket_dir = g_strdup("/run/libvirt");
        p->state_dir = g_strdup("/var/lib/vsnap");
        p->run_dir = g_strdup("/run/vsnap");
        p->log_dir = g_strdup("/var/log/vsnap");
        return true;
    }
    const char *runtime = g_getenv("XDG_RUNTIME_DIR");
    if (!runtime || !*runtime) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                    "session mode needs XDG_RUNTIME_DIR (or --socket-dir and --run-dir)");
        return false;
    }
    p->socket_dir = g_build_filename(runtime, "libvirt", NULL);
    p->run_dir = g_build_filename(runtime, "vsnap", NULL);
    p->state_dir = g_build_filename(g_get_user_data_dir(), "vsnap", NULL);
    p->log_dir = g_build_filename(g_get_user_data_dir(), "vsnap", "log", NULL);
    return true;
}

static void replace(char **field, const char *value)
{
    if (value) {
        g_free(*field);
        *field = g_strdup(value);
    }
}

/* The [daemon] keys that bound clients, with libvirtd's names. */
static bool apply_limits(GKeyFile *kf, struct rpc_limits *l, GError **error)
{
    struct {
        const char *key;
        unsigned *field;
    } keys[] = {
        {"max_clients", &l->max_clients},
        {"max_anonymous_clients", &l->max_anonymous_clients},
        {"reserved_rw_clients", &l->reserved_rw_clients},
        {"max_client_requests", &l->max_client_requests},
        {"max_workers", &l->max_workers},
        {"max_readonly_workers", &l->max_readonly_workers},
        {"prio_workers", &l->prio_workers},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
        if (!g_key_file_has_key(kf, "daemon", keys[i].key, NULL))
            continue;
        GError *local = NULL;
        gint64 v = g_key_file_get_int64(kf, "daemon", keys[i].key, &local);
        if (local || v < 0 || v > 1000000) {
            g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                        "%s must be a number from 0 to 1000000", keys[i].key);
            g_clear_error(&local);
            return false;
        }
        *keys[i].field = (unsigned)v;
    }
    return rpc_limits_check(l, error);
}

/* job_wait_timeout: how long a call waits for a domain's job (another
 * operation on the domain) before it fails; 0 would mean never waiting
 * and is refused, as is anything beyond a day. */
static bool apply_job_wait(GKeyFile *kf, GError **error)
{
    if (!g_key_file_has_key(kf, "daemon", "job_wait_timeout", NULL))
        return true;
    GError *local = NULL;
    gint64 v = g_key_file_get_int64(kf, "daemon", "job_wait_timeout", &local);
    if (local || v < 1 || v > 86400) {
        g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                    "job_wait_timeout must be a number of seconds from 1 to 86400");
        g_clear_error(&local);
        return false;
    }
    domain_job_set_wait_timeout((unsigned)v);
    return true;
}

/* live_snapshot_max_passes (1-64), live_snapshot_max_ms (1-600000): when a
 * live snapshot of a guest that outruns the copy stops anyway (the shim's
 * defaults, 8 passes and 3 s, when absent). */
static bool apply_live_limits(GKeyFile *kf, GError **error)
{
    static const struct { const char *key; gint64 max; } keys[] = {
        { "live_snapshot_max_passes", 64 }, { "live_snapshot_max_ms", 600000 } };
    unsigned v[2] = { 0, 0 };
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
        if (!g_key_file_has_key(kf, "daemon", keys[i].key, NULL))
            continue;
        GError *local = NULL;
        gint64 n = g_key_file_get_int64(kf, "daemon", keys[i].key, &local);
        if (local || n < 1 || n > keys[i].max) {
            g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                        "%s must be a number from 1 to %" G_GINT64_FORMAT, keys[i].key, keys[i].max);
            g_clear_error(&local);
            return false;
        }
        v[i] = (unsigned)n;
    }
    monitor_set_live_limits(v[0], v[1]);
    return true;
}

/* [store] and [s3]: the store library reads its own groups (one parser for
 * the daemon and vsnap-store); the daemon checks the URL's form now, so a
 * typo stops the daemon at start rather than failing every push. */
static bool apply_store(struct daemon *d, const char *path, GError **error)
{
    if (!store_options_load(&d->store.options, path, &d->store.url, &d->store.cache_dir,
                            &d->store.cache_size, error))
        return false;
    if (d->store.url && !*d->store.url)
        g_clear_pointer(&d->store.url, g_free);
    if (d->store.url && !store_url_check(d->store.url, error)) {
        g_prefix_error(error, "%s: [store] url: ", path);
        return false;
    }
    return true;
}

/* The configuration file uses the command line's names in a [daemon] group. */
static bool apply_config_file(struct daemon *d, GError **error)
{
    g_autofree char *path = d->opts.config ? g_strdup(d->opts.config)
                            : d->paths.privileged
                                ? g_strdup(VSNAP_SYSCONFDIR "/vsnap/virtvsnapd.conf")
                                : g_build_filename(g_get_user_config_dir(), "vsnap",
                                                   "virtvsnapd.conf", NULL);
    if (!d->opts.config && !g_file_test(path, G_FILE_TEST_EXISTS))
        return true;
    g_autoptr(GKeyFile) kf = g_key_file_new();
    if (!g_key_file_load_from_file(kf, path, 0, error)) {
        g_prefix_error(error, "%s: ", path);
        return false;
    }
    struct {
        const char *key;
        char **field;
    } keys[] = {
        {"socket_dir", &d->paths.socket_dir}, {"state_dir", &d->paths.state_dir},
        {"run_dir", &d->paths.run_dir},       {"log_dir", &d->paths.log_dir},
        {"shim", &d->paths.shim_path},        {"schema_dir", &d->paths.schema_dir},
        {"network_uri", &d->paths.network_uri},
        {"storage_uri", &d->paths.storage_uri},
        {"confine_user", &d->paths.confine_user},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
        g_autofree char *value = g_key_file_get_string(kf, "daemon", keys[i].key, NULL);
        replace(keys[i].field, value);
    }
    if (g_key_file_has_key(kf, "daemon", "timeout", NULL) && d->opts.timeout == 0)
        d->opts.timeout = g_key_file_get_integer(kf, "daemon", "timeout", NULL);
    if (g_key_file_has_key(kf, "daemon", "confine", NULL)) {
        g_autoptr(GError) local = NULL;
        bool confine = g_key_file_get_boolean(kf, "daemon", "confine", &local);
        if (local) {
            g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                        "%s: confine: %s", path, local->message);
            return false;
        }
        if (confine && !d->paths.privileged) {
            g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                        "%s: confine=true needs a daemon running as root", path);
            return false;
        }
        d->paths.confine = confine;
    }
    if (!apply_limits(kf, &d->limits, error) || !apply_job_wait(kf, error) || !apply_live_limits(kf, error)) {
        g_prefix_error(error, "%s: ", path);
        return false;
    }
    return apply_store(d, path, error);
}

static void apply_options(struct daemon *d)
{
    const struct options *o = &d->opts;
    replace(&d->paths.socket_dir, o->socket_dir);
    if (o->state_dir) {
        /* A private state directory keeps everything of this instance
         * together unless the run and log directories are given too. */
        replace(&d->paths.state_dir, o->state_dir);
        g_autofree char *run = g_build_filename(o->state_dir, "run", NULL);
        g_autofree char *log = g_build_filename(o->state_dir, "log", NULL);
        replace(&d->paths.run_dir, o->run_dir ? o->run_dir : run);
        replace(&d->paths.log_dir, o->log_dir ? o->log_dir : log);
    } else {
        replace(&d->paths.run_dir, o->run_dir);
        replace(&d->paths.log_dir, o->log_dir);
    }
    replace(&d->paths.shim_path, o->shim);
    replace(&d->paths.schema_dir, o->schema_dir);
}

/* systemd socket activation: LISTEN_FDS sockets from fd 3 on, named
 * "...-ro" when read-only (FileDescriptorName= in the units). */
static bool adopt_systemd_sockets(struct daemon *d, bool *adopted, GError **error)
{
    const char *pid = g_getenv("LISTEN_PID");
    const char *fds = g_getenv("LISTEN_FDS");
    *adopted = false;
    if (!pid || !fds || g_ascii_strtoll(pid, NULL, 10) != getpid())
        return true;
    int n = (int)g_ascii_strtoll(fds, NULL, 10);
    g_auto(GStrv) names = g_strsplit(g_getenv("LISTEN_FDNAMES") ? g_getenv("LISTEN_FDNAMES") : "",
                                     ":", -1);
    for (int i = 0; i < n; i++) {
        bool ro = (guint)i < g_strv_length(names) ? g_str_has_suffix(names[i], "-ro") : i == 1;
        if (!rpc_server_listen_fd(d->server, 3 + i, ro, error))
            return false;
    }
    *adopted = n > 0;
    return true;
}

static bool listen_sockets(struct daemon *d, GError **error)
{
    bool adopted;
    if (!adopt_systemd_sockets(d, &adopted, error))
        return false;
    if (adopted)
        return true;
    if (g_mkdir_with_parents(d->paths.socket_dir, 0755) < 0) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot create %s: %s",
                    d->paths.socket_dir, g_strerror(errno));
        return false;
    }
    d->sock_path = g_build_filename(d->paths.socket_dir, "virtvsnapd-sock", NULL);
    d->sock_ro_path = g_build_filename(d->paths.socket_dir, "virtvsnapd-sock-ro", NULL);
    if (!rpc_server_listen_path(d->server, d->sock_path, false, error))
        return false;
    d->own_sockets = true;
    return rpc_server_listen_path(d->server, d->sock_ro_path, true, error);
}

static gboolean on_quit_signal(gpointer data)
{
    struct daemon *d = data;
    g_message("stopping; running domains keep running");
    g_main_loop_quit(d->loop);
    return G_SOURCE_CONTINUE;
}

static gboolean check_idle(gpointer data)
{
    struct daemon *d = data;
    bool busy = rpc_server_client_count(d->server) > 0 || driver_active_count(d->driver) > 0;
    gint64 now = g_get_monotonic_time();
    if (busy || !d->idle_since) {
        d->idle_since = busy ? 0 : now;
        return G_SOURCE_CONTINUE;
    }
    if (now - d->idle_since >= (gint64)d->opts.timeout * G_USEC_PER_SEC) {
        g_message("idle for %d s; exiting", d->opts.timeout);
        g_main_loop_quit(d->loop);
    }
    return G_SOURCE_CONTINUE;
}

static gpointer autostart_thread(gpointer data)
{
    driver_autostart(data);
    return NULL;
}

/* Every client is a file descriptor, and so is each running domain's FIFO,
 * pidfd and monitor connection: use the whole hard limit (systemd's
 * LimitNOFILE=, the unit sets it), and say so when max_clients cannot fit. */
static void raise_fd_limit(const struct rpc_limits *limits)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)limits->max_clients + 64)
        g_warning("the file descriptor limit (%llu) is too low for max_clients (%u) and the "
                  "daemon's own files; raise LimitNOFILE or lower max_clients",
                  (unsigned long long)rl.rlim_cur, limits->max_clients);
}

/* The heap profile of hostile traffic (many threads, packets from bytes to
 * 32 MiB) showed RSS at 200 MB with 0.5 MB in use: glibc's allocator, not a
 * leak. Its mmap threshold rises to the largest block ever freed, after which
 * every large packet is carved from a per-thread arena (up to 8 per core)
 * and stays there. A fixed threshold keeps large buffers in their own
 * mappings, returned to the system when freed; few arenas keep what small
 * allocations leave behind small. */
static void bound_allocator(void)
{
    mallopt(M_ARENA_MAX, 4);
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 256 * 1024);
}

static int run(struct daemon *d)
{
    g_autoptr(GError) error = NULL;
    rpc_limits_init(&d->limits);
    store_options_init(&d->store.options);
    d->store.cache_size = STORE_DEFAULT_CACHE_SIZE;
    if (!default_paths(&d->paths, &error) || !apply_config_file(d, &error)) {
        g_printerr("virtvsnapd: %s\n", error->message);
        return 1;
    }
    apply_options(d);
    d->driver = driver_new(&d->paths, &error);
    if (!d->driver) {
        g_printerr("virtvsnapd: %s\n", error->message);
        return 1;
    }
    driver_set_store(d->driver, &d->store);
    raise_fd_limit(&d->limits);
    d->server = rpc_server_new(d->driver, &d->limits);
    if (!listen_sockets(d, &error) || !driver_load(d->driver, &error)) {
        g_printerr("virtvsnapd: %s\n", error->message);
        return 1;
    }
    g_message("listening on %s (shim %s, state %s)",
              d->sock_path ? d->sock_path : "systemd sockets", d->paths.shim_path,
              d->paths.state_dir);
    g_thread_unref(g_thread_new("autostart", autostart_thread, d->driver));
    d->loop = g_main_loop_new(NULL, FALSE);
    g_unix_signal_add(SIGTERM, on_quit_signal, d);
    g_unix_signal_add(SIGINT, on_quit_signal, d);
    if (d->opts.timeout > 0)
        g_timeout_add_seconds(1, check_idle, d);
    g_main_loop_run(d->loop);
    return 0;
}

int main(int argc, char **argv)
{
    struct daemon d = {0};
    g_autoptr(GError) error = NULL;
    if (!parse_options(&argc, &argv, &d.opts, &error)) {
        g_printerr("virtvsnapd: %s\n", error->message);
        return 2;
    }
    if (d.opts.version) {
        printf("virtvsnapd %s\n", VSNAP_VERSION);
        return 0;
    }
    bound_allocator();
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = run(&d);
    /* Shims and their watcher threads are deliberately left running: the
     * next daemon reattaches. Only our sockets go. */
    if (d.own_sockets) {
        unlink(d.sock_path);
        unlink(d.sock_ro_path);
    }
    _exit(rc);
}
