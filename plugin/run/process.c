#include "run/process.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <libvirt/libvirt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/pidfd.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/atomic-file.h"
#include "domain/block-jobs.h"
#include "domain/disk-state.h"
#include "run/jail.h"
#include "monitor/monitor.h"
#include "process-disks.h"
#include "process-net.h"
#include "shim-env.h"
#include "shim-events.h"
#include "util/test-hook.h"
#include "util/virt-error.h"

#define API_WAIT_MS 10000
#define TERM_WAIT_MS 3000
#define KILL_WAIT_MS 5000
#define LOST_WAIT_MS 1000   /* a shim that dropped the connection is gone by then */

static char *log_tail(const char *path);

struct domain_run *domain_run_ref(struct domain_run *run)
{
    g_atomic_int_inc(&run->refs);
    return run;
}

void domain_run_unref(struct domain_run *run)
{
    if (!run || !g_atomic_int_dec_and_test(&run->refs))
        return;
    if (run->pidfd >= 0)
        close(run->pidfd);
    if (run->fifo_fd >= 0)
        close(run->fifo_fd);
    if (run->wake_fd >= 0)
        close(run->wake_fd);
    g_free(run->dir);
    g_free(run->api_socket);
    g_free(run->vsock_socket);
    g_free(run->fifo_path);
    g_free(run->pid_path);
    g_free(run->status_path);
    g_free(run->xml_path);
    g_free(run->log_path);
    g_free(run->disk_dir);
    g_free(run->workset_dir);
    g_free(run);
}

static struct domain_run *run_new(struct vsnap_driver *drv, const char *name)
{
    struct domain_run *run = g_new0(struct domain_run, 1);
    run->refs = 1;
    run->pidfd = run->fifo_fd = run->wake_fd = -1;
    run->dir = g_build_filename(drv->paths.run_dir, name, NULL);
    run->api_socket = g_build_filename(run->dir, "api.sock", NULL);
    run->vsock_socket = g_build_filename(run->dir, "vsock.sock", NULL);
    run->fifo_path = g_build_filename(run->dir, "events", NULL);
    run->pid_path = g_build_filename(run->dir, "pid", NULL);
    run->status_path = g_build_filename(run->dir, "status", NULL);
    run->xml_path = g_build_filename(run->dir, "domain.xml", NULL);
    g_autofree char *log_name = g_strdup_printf("%s.log", name);
    run->log_path = g_build_filename(drv->paths.log_dir, log_name, NULL);
    run->disk_dir = disk_state_dir(drv->paths.state_dir, name);
    return run;
}

/* The shim is gone: its files, its jail's mount point and its cgroup. The
 * status file goes last: while it is there, a daemon that died during the
 * removal leaves the next one the stop under way (its reason), not a run
 * that looks crashed. */
static void remove_runtime_files(struct vsnap_driver *drv, struct domain_run *run)
{
    const char *files[] = {run->api_socket, run->vsock_socket, run->fifo_path,
                           run->pid_path,   run->xml_path};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++)
        g_unlink(files[i]);
    /* Guest-initiated vsock connections leave <vsock>_<port> listeners. */
    g_autoptr(GDir) dir = g_dir_open(run->dir, 0, NULL);
    const char *entry;
    while (dir && (entry = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(run->dir, entry, NULL);
        if (!g_str_equal(path, run->status_path) && g_unlink(path) < 0 && errno == EISDIR)
            g_rmdir(path);
    }
    g_unlink(run->status_path);
    g_rmdir(run->dir);
    g_autofree char *name = g_path_get_basename(run->dir);
    jail_cleanup(drv, name);
}

char *process_log_tail(const struct domain_run *run)
{
    return log_tail(run->log_path);
}

/* The last lines of the shim's log, to explain a failed start. */
static char *log_tail(const char *path)
{
    g_autofree char *text = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &text, &len, NULL) || len == 0)
        return g_strdup("(the shim's log is empty)");
    const char *start = text + len;
    int lines = 0;
    while (start > text && lines < 6) {
        start--;
        if (*start == '\n' && start != text + len - 1)
            lines++;
    }
    if (*start == '\n')
        start++;
    return g_strstrip(g_strdup(start));
}

/* ---- launching ---- */

static bool wait_readable(int fd, int timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int rc;
    do {
        rc = poll(&pfd, 1, timeout_ms);
    } while (rc < 0 && errno == EINTR);
    return rc > 0;
}

static bool read_full(int fd, void *buf, size_t len)
{
    size_t have = 0;
    while (have < len) {
        ssize_t n = read(fd, (char *)buf + have, len - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        have += n;
    }
    return true;
}

/* Only async-signal-safe calls between fork and exec. `status_fd` carries
 * the grandchild's pid from the intermediate child and, when exec fails,
 * errno from the grandchild (the pipe is close-on-exec, so a successful
 * exec just closes it). envp is all the shim's environment (shim-env.h). */
static void exec_grandchild(char **argv, char **envp, int log_fd, int status_fd,
                            const struct jail_launch *jail)
{
    if (setsid() < 0)
        _exit(126);
    /* A confined shim is the first process of a PID namespace of its own;
     * the pid the daemon records is its pid here, in the daemon's. */
    pid_t pid = jail->confine_arg ? (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0)
                                  : fork();
    if (pid < 0)
        _exit(126);
    if (pid > 0) {
        (void)!write(status_fd, &pid, sizeof(pid));
        _exit(0);
    }
    /* Into the domain's cgroup before exec: "0" is the writer itself. */
    for (guint i = 0; jail->cgroup_procs && i < jail->cgroup_procs->len; i++)
        if (write(g_array_index(jail->cgroup_procs, int, i), "0", 1) != 1)
            _exit(125);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0 ||
        dup2(status_fd, 3) < 0 || fcntl(3, F_SETFD, FD_CLOEXEC) < 0)
        _exit(126);
    close_range(4, ~0U, 0);
    /* An ignored SIGPIPE survives exec: the shim must not die writing
     * events while the daemon is restarting and nobody reads the FIFO. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(argv[0], argv, envp);
    int err = errno;
    (void)!write(3, &err, sizeof(err));
    _exit(127);
}

static pid_t spawn_shim(struct vsnap_driver *drv, struct domain_run *run, int log_fd,
                        const struct jail_launch *jail, GError **error)
{
    g_autofree char *api_arg = g_strdup_printf("path=%s", run->api_socket);
    g_autofree char *ev_arg = g_strdup_printf("path=%s", run->fifo_path);
    char *argv[] = {drv->paths.shim_path, "--api-socket", api_arg, "--event-monitor",
                    ev_arg, "--log-file", run->log_path,
                    jail->confine_arg ? "--confine" : NULL, jail->confine_arg, NULL};
    /* Built here: between fork and exec only async-signal-safe calls. */
    g_auto(GStrv) envp = shim_env_filter(environ);
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "pipe: %s", g_strerror(errno));
        return -1;
    }
    pid_t child = fork();
    if (child < 0) {
        int err = errno;
        close(pipefd[0]);
        close(pipefd[1]);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "fork: %s", g_strerror(err));
        return -1;
    }
    if (child == 0) {
        close(pipefd[0]);
        exec_grandchild(argv, envp, log_fd, pipefd[1], jail);
    }
    close(pipefd[1]);
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    pid_t pid = -1;
    int exec_errno = 0;
    bool have_pid = read_full(pipefd[0], &pid, sizeof(pid));
    bool exec_failed = have_pid && read_full(pipefd[0], &exec_errno, sizeof(exec_errno));
    close(pipefd[0]);
    if (!have_pid) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR,
                    "cannot launch %s: the launcher process failed", drv->paths.shim_path);
        return -1;
    }
    if (exec_failed) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "cannot execute %s: %s",
                    drv->paths.shim_path, g_strerror(exec_errno));
        return -1;
    }
    return pid;
}

static bool make_run_dir(struct vsnap_driver *drv, struct domain_run *run, GError **error)
{
    if (g_file_test(run->dir, G_FILE_TEST_IS_DIR))
        remove_runtime_files(drv, run);   /* leftovers of a run that is over */
    if (g_mkdir_with_parents(run->dir, 0700) < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create %s: %s",
                    run->dir, g_strerror(errno));
        return false;
    }
    if (mkfifo(run->fifo_path, 0600) < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create FIFO %s: %s",
                    run->fifo_path, g_strerror(errno));
        return false;
    }
    return true;
}

/* O_RDWR: the open never blocks, the shim's non-blocking open for writing
 * finds a reader, and the read side never sees EOF between writers. */
static bool open_event_fifo(struct domain_run *run, GError **error)
{
    run->fifo_fd = open(run->fifo_path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    run->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (run->fifo_fd < 0 || run->wake_fd < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot open %s: %s",
                    run->fifo_path, g_strerror(errno));
        return false;
    }
    return true;
}

static bool wait_for_api(struct domain_run *run, GError **error)
{
    for (int waited = 0; waited < API_WAIT_MS; waited += 10) {
        if (wait_readable(run->pidfd, 0)) {
            g_autofree char *tail = log_tail(run->log_path);
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                        "the shim exited during start-up; its log (%s) ends with: %s",
                        run->log_path, tail);
            return false;
        }
        if (g_file_test(run->api_socket, G_FILE_TEST_EXISTS) && monitor_ping(run->api_socket, NULL))
            return true;
        g_usleep(10000);
    }
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_TIMEOUT,
                "the shim did not answer on %s within %d ms", run->api_socket, API_WAIT_MS);
    return false;
}

char *process_run_path(struct vsnap_domain *dom, const char *file)
{
    g_mutex_lock(&dom->lock);
    char *path = dom->run ? g_build_filename(dom->run->dir, file, NULL) : NULL;
    g_mutex_unlock(&dom->lock);
    return path;
}

void process_write_status_locked(struct vsnap_domain *dom)
{
    struct domain_run *run = dom->run;
    if (!run)
        return;
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_key_file_set_integer(kf, "domain", "id", dom->id);
    g_key_file_set_uint64(kf, "domain", "generation", dom->generation);
    g_key_file_set_boolean(kf, "domain", "ready", run->ready);
    g_key_file_set_integer(kf, "domain", "pid", run->pid);
    g_key_file_set_integer(kf, "domain", "state", dom->state);
    g_key_file_set_integer(kf, "domain", "reason", dom->reason);
    if (run->stopping)
        g_key_file_set_integer(kf, "domain", "stopping", run->stop_reason);
    g_autofree char *text = g_key_file_to_data(kf, NULL, NULL);
    g_autoptr(GError) error = NULL;
    if (!atomic_file_write(run->status_path, text, &error))
        g_warning("domain %s: %s", dom->name, error->message);
}

void process_set_state_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, int state,
                              int reason, int event, int detail)
{
    vsnap_domain_set_state_locked(dom, state, reason);
    process_write_status_locked(dom);
    event_queue_lifecycle(drv->events, dom, event, detail);
}

static bool signal_and_wait(struct domain_run *run, int sig, int timeout_ms)
{
    if (pidfd_send_signal(run->pidfd, sig, NULL, 0) < 0 && errno != ESRCH)
        g_warning("cannot send signal %d to shim %d: %s", sig, run->pid, g_strerror(errno));
    return wait_readable(run->pidfd, timeout_ms);
}

/* Make sure the shim is gone; true when it exited. */
static bool terminate(struct domain_run *run, bool graceful)
{
    if (wait_readable(run->pidfd, 0))
        return true;
    if (signal_and_wait(run, SIGTERM, TERM_WAIT_MS))
        return true;
    if (graceful)
        return false;
    return signal_and_wait(run, SIGKILL, KILL_WAIT_MS);
}

static int open_log(struct domain_run *run, GError **error)
{
    int fd = open(run->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot open log %s: %s",
                    run->log_path, g_strerror(errno));
        return -1;
    }
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *stamp = g_date_time_format_iso8601(now);
    g_autofree char *line = g_strdup_printf("%s: virtvsnapd starting shim\n", stamp);
    (void)!write(fd, line, strlen(line));
    return fd;
}

/* A restore whose shim exited before it answered: the VM it restored was
 * lost at once (an on-demand restore that reads a corrupt block ends the
 * shim: shim/core/include/core/vm.h, vm_report_fatal), maybe before vm.restore's answer was
 * written. The domain did start, and ends the way any crash does: its
 * watcher reads why from the event monitor, which holds it, and finds the
 * shim gone. A shim that answered with an error lives on: a plain failure. */
static bool lost_while_restoring(struct domain_run *run, const struct domain_def *live,
                                 const struct process_start_how *how, GError **error)
{
    if (!how || !wait_readable(run->pidfd, LOST_WAIT_MS))
        return false;
    g_message("domain %s: its shim (pid %d) exited during the restore (%s)", live->name, run->pid,
              error && *error ? (*error)->message : "no answer");
    g_clear_error(error);
    return true;
}

/* A pty serial's slave is the shim's choice, reported by vm.info: the live
 * definition shows it (serial <source path>, console tty), as libvirt shows
 * the pty of a QEMU serial, and consoles open it. */
static bool learn_serial_pty(struct domain_run *run, struct domain_def *live, GError **error)
{
    if (live->serial.type != DOMAIN_CHR_PTY)
        return true;
    struct vm_info info = {0};
    bool ok = monitor_vm_info(run->api_socket, &info, error);
    if (ok && !info.serial_pty) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "the shim reports no pty for the serial port of %s", live->name);
        ok = false;
    }
    if (ok) {
        g_free(live->serial.path);
        live->serial.path = g_steal_pointer(&info.serial_pty);
        g_clear_pointer(&live->console.path, g_free);   /* the console is the serial */
    }
    vm_info_clear(&info);
    return ok;
}

/* The pty of a run that ended means nothing any more. */
static void forget_serial_pty(struct domain_def *def)
{
    if (def->serial.type == DOMAIN_CHR_PTY)
        g_clear_pointer(&def->serial.path, g_free);
    g_clear_pointer(&def->console.path, g_free);
}

/* The chains are the run's; between runs the disk record holds them. */
static void forget_disk_chains(struct domain_def *def)
{
    for (size_t i = 0; i < def->n_disks; i++)
        domain_disk_set_chain(&def->disks[i], NULL);
}

/* A layer the shim opened where it is not any more: folded into its child
 * since (an inner snapshot deleted while the VM ran: the shim keeps the file
 * open, the chain does without it; NULL), or in the kept-* place its
 * deleted snapshot's directory moved to (disk-state.h) while the shim was
 * not told yet (a daemon killed in between; recovery tells it). A layer
 * missing for any other reason is refused by the shim's chain check at the
 * next start, so leaving it out here hides nothing. */
static char *present_layer(const char *disk_dir, const char *layer)
{
    if (g_file_test(layer, G_FILE_TEST_EXISTS))
        return g_strdup(layer);
    return disk_state_kept_path(disk_dir, layer);
}

/* domain_disk.chain (top first) from what vm.info says of each disk. */
static void apply_disk_chains(struct domain_def *def, const struct vm_info *info, const char *disk_dir)
{
    for (size_t i = 0; i < def->n_disks; i++) {
        struct domain_disk *disk = &def->disks[i];
        const struct vm_disk_chain *c = NULL;
        for (size_t j = 0; j < info->n_disks && !c; j++)
            if (g_str_equal(info->disks[j].id, disk->target))
                c = &info->disks[j];
        if (!c || !c->overlay) {
            domain_disk_set_chain(disk, NULL);
            continue;
        }
        guint n = g_strv_length(c->layers), m = 1;
        g_auto(GStrv) chain = g_new0(char *, n + 2);
        chain[0] = g_strdup(c->overlay);
        for (guint k = 0; k < n; k++) {
            char *layer = present_layer(disk_dir, c->layers[n - 1 - k]);
            if (layer)
                chain[m++] = layer;
        }
        domain_disk_set_chain(disk, (const char *const *)chain);
    }
}

/* The disk record follows the running VM; files no chain uses any more go. */
static bool record_disks(const char *disk_dir, const struct domain_def *def, GError **error)
{
    if (def->n_disks == 0)
        return true;
    if (!disk_state_save(disk_dir, def, error))
        return false;
    disk_state_collect(disk_dir, def);
    return true;
}

static bool learn_disk_chains(struct domain_run *run, struct domain_def *live, GError **error)
{
    if (live->n_disks == 0)
        return true;
    struct vm_info info = {0};
    if (!monitor_vm_info(run->api_socket, &info, error))
        return false;
    apply_disk_chains(live, &info, run->disk_dir);
    vm_info_clear(&info);
    return record_disks(run->disk_dir, live, error);
}

bool process_refresh_disks(struct vsnap_domain *dom, GError **error)
{
    g_mutex_lock(&dom->lock);
    struct domain_run *run = dom->run ? domain_run_ref(dom->run) : NULL;
    bool has_disks = dom->def->n_disks > 0;
    g_mutex_unlock(&dom->lock);
    if (!run || !has_disks) {
        domain_run_unref(run);
        return true;
    }
    struct vm_info info = {0};
    bool ok = monitor_vm_info(run->api_socket, &info, error);
    if (ok) {
        g_mutex_lock(&dom->lock);
        apply_disk_chains(dom->def, &info, run->disk_dir);
        g_autoptr(domain_def) copy = domain_def_copy(dom->def);
        g_mutex_unlock(&dom->lock);
        g_autofree char *xml = domain_def_format(copy, true, -1);
        ok = atomic_file_write(run->xml_path, xml, error) && record_disks(run->disk_dir, copy, error);
    }
    vm_info_clear(&info);
    domain_run_unref(run);
    return ok;
}

/* The running VM's chains with the layers in from moved to to (NULL: left
 * out), told to its shim first (vm.move-disk-layers: what it reopens at its
 * next snapshot), then its live definition, status file and disk record. */
static bool move_running_layers(struct vsnap_domain *dom, const char *from, const char *to, GError **error)
{
    g_mutex_lock(&dom->lock);
    struct domain_run *run = dom->run ? domain_run_ref(dom->run) : NULL;
    g_autoptr(domain_def) copy = run ? domain_def_copy(dom->def) : NULL;
    g_mutex_unlock(&dom->lock);
    if (!run)
        return true;
    bool ok = monitor_vm_move_disk_layers(run->api_socket, from, to, error);
    ok = ok && (to ? disk_state_relocate(run->disk_dir, copy, from, to, error)
                   : disk_state_drop_layers(run->disk_dir, copy, from, error));
    if (ok) {
        g_mutex_lock(&dom->lock);
        for (size_t i = 0; i < MIN(copy->n_disks, dom->def->n_disks); i++)
            domain_disk_set_chain(&dom->def->disks[i], (const char *const *)copy->disks[i].chain);
        g_mutex_unlock(&dom->lock);
        g_autofree char *xml = domain_def_format(copy, true, -1);
        ok = atomic_file_write(run->xml_path, xml, error);
    }
    domain_run_unref(run);
    return ok;
}

bool process_drop_disk_layers(struct vsnap_domain *dom, const char *snapshot_dir, GError **error)
{
    return move_running_layers(dom, snapshot_dir, NULL, error);
}

bool process_move_disk_layers(struct vsnap_domain *dom, const char *from, const char *to, GError **error)
{
    return move_running_layers(dom, from, to, error);
}

bool process_shim_disk_layers(struct vsnap_domain *dom, GPtrArray **layers, GError **error)
{
    g_mutex_lock(&dom->lock);
    struct domain_run *run = dom->run ? domain_run_ref(dom->run) : NULL;
    g_mutex_unlock(&dom->lock);
    *layers = g_ptr_array_new_with_free_func(g_free);
    if (!run)
        return true;
    struct vm_info info = {0};
    bool ok = monitor_vm_info(run->api_socket, &info, error);
    for (size_t i = 0; ok && i < info.n_disks; i++)
        for (char **p = info.disks[i].layers; p && *p; p++)
            g_ptr_array_add(*layers, g_strdup(*p));
    vm_info_clear(&info);
    domain_run_unref(run);
    return ok;
}

bool process_release_disks(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    g_autofree char *dir = disk_state_dir(drv->paths.state_dir, dom->name);
    g_mutex_lock(&dom->lock);
    g_autoptr(domain_def) def = domain_def_copy(dom->def);
    g_mutex_unlock(&dom->lock);
    g_autoptr(GError) error = NULL;
    if (disk_state_release(dir, def, &error))
        return true;
    g_warning("domain %s: its disks stay chains in %s: %s", dom->name, dir, error->message);
    return false;
}

/* Create and boot, or restore; then the links defined down go down. */
static bool setup_vm(struct domain_run *run, const struct domain_def *live, const char *json,
                     const struct run_nets *nets, const struct process_start_how *how, bool *lost,
                     GError **error)
{
    run->net_fds = nets->fds;
    run->n_net_fds = nets->n;
    bool alive = how ? how->setup_vm(run, live, how->data, error) ||
                           (*lost = lost_while_restoring(run, live, how, error))
                     : monitor_vm_create(run->api_socket, json, nets->fds, nets->n, error) &&
                           monitor_vm_boot(run->api_socket, error);
    run->net_fds = NULL;
    run->n_net_fds = 0;
    /* The shim takes vm.set-link once the VM runs (not while only created). */
    return alive && (*lost || process_net_apply_links(run->api_socket, live, error));
}

/* Launch and boot; on failure the caller stops the shim and frees the run.
 * nets receives the taps, which the caller closes. */
static bool launch(struct vsnap_driver *drv, struct domain_run *run, struct domain_def *live,
                   const struct process_start_how *how, struct run_nets *nets, GError **error)
{
    /* A boot continues each disk where the last run left it (its chain and
     * overlay); a restore gets the snapshot's chain from the shim. */
    if (!how && (!disk_state_load(run->disk_dir, live, error) ||
                 !disk_state_finish_pivots(run->disk_dir, live, error)))
        return false;
    /* Before anything exists: a missing image is the user's to fix, and
     * nothing is started or left behind for it. */
    if (!domain_def_check_disk_access(live, error) || !process_disks_check(drv, live->name, live, how != NULL, error) ||
        (live->n_disks > 0 && !disk_state_make_dir(run->disk_dir, error)) ||
        !process_net_prepare(drv, live, nets, error))
        return false;
    const char *disk_dir = live->n_disks > 0 ? run->disk_dir : NULL;
    g_autofree char *json = domain_def_to_vm_config_json(live, run->vsock_socket, disk_dir, error);
    if (!json || !make_run_dir(drv, run, error) || !open_event_fifo(run, error))
        return false;
    struct jail_launch jail;
    if (!jail_prepare(drv, live, run->dir, run->log_path, how ? how->read_only_dirs : NULL, &jail, error))
        return false;
    int log_fd = open_log(run, error);
    if (log_fd < 0) {
        jail_launch_clear(&jail);
        return false;
    }
    run->pid = spawn_shim(drv, run, log_fd, &jail, error);
    jail_launch_clear(&jail);
    close(log_fd);
    if (run->pid < 0)
        return false;
    test_hook("start-spawned");
    run->pidfd = pidfd_open(run->pid, 0);
    if (run->pidfd < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "the shim (pid %d) vanished right after launch: %s", run->pid,
                    g_strerror(errno));
        return false;
    }
    g_autofree char *pid_text = g_strdup_printf("%d\n", run->pid);
    if (!atomic_file_write(run->pid_path, pid_text, error) || !wait_for_api(run, error))
        return false;
    test_hook("start-launched");
    bool lost = false;
    if (!setup_vm(run, live, json, nets, how, &lost, error)) {
        g_autofree char *tail = log_tail(run->log_path);
        g_prefix_error(error, "cannot start the VM: ");
        /* A shim that died answering says why in its log (a seccomp kill). */
        if (error && *error && wait_readable(run->pidfd, LOST_WAIT_MS)) {
            g_autofree char *message = g_strdup_printf("%s; the shim exited, its log ends with: %s",
                                                       (*error)->message, tail);
            g_free((*error)->message);
            (*error)->message = g_steal_pointer(&message);
        }
        g_debug("shim log tail: %s", tail);
        return false;
    }
    test_hook("start-set-up");
    /* A shim lost during its restore has no pty to ask for: its watcher ends the run. */
    if (!lost && (!learn_serial_pty(run, live, error) || !learn_disk_chains(run, live, error)))
        return false;
    g_autofree char *xml = domain_def_format(live, true, -1);
    return atomic_file_write(run->xml_path, xml, error);
}

bool process_start(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    return process_start_with(drv, dom, NULL, error);
}

bool process_start_with(struct vsnap_driver *drv, struct vsnap_domain *dom,
                        const struct process_start_how *how, GError **error)
{
    /* The job guarantees it (domain_job_acquire); a shim started for a
     * domain out of the list would be nobody's to stop. */
    g_mutex_lock(&dom->lock);
    bool listed = dom->listed;
    g_autoptr(domain_def) live = listed ? domain_def_copy(how && how->def ? how->def : dom->def)
                                        : NULL;
    g_mutex_unlock(&dom->lock);
    if (!listed) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN,
                    "no domain with matching name '%s' (it ended): no shim is started for it",
                    dom->name);
        return false;
    }
    /* A definition from a snapshot or save image names the taps and network
     * ports of the run it was taken from, which are not this run's. */
    domain_def_forget_net_runtime(live);
    int id = domain_list_next_id(drv->domains);
    if (live->vsock.present && live->vsock.auto_cid)
        live->vsock.cid = 2 + (uint32_t)id;   /* guest CIDs start at 3 */

    struct domain_run *run = run_new(drv, dom->name);
    struct run_nets nets = {0};
    bool launched = launch(drv, run, live, how, &nets, error);
    if (!launched && run->pidfd >= 0)
        terminate(run, false);
    /* The shim holds its own copies of the taps now (or is gone, and they
     * go with these). */
    process_net_close(&nets);
    if (!launched) {
        process_net_release(drv, live);
        remove_runtime_files(drv, run);
        domain_run_unref(run);
        return false;
    }
    g_mutex_lock(&dom->lock);
    dom->run = run;
    dom->id = id;
    dom->generation++;
    if (how && how->keep_definition && dom->persistent && !dom->next_def)
        dom->next_def = dom->def;   /* back in place when the run ends */
    else
        domain_def_free(dom->def);
    dom->def = g_steal_pointer(&live);
    if (how)
        process_set_state_locked(drv, dom, how->state, how->reason, how->event, how->detail);
    else
        process_set_state_locked(drv, dom, VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_BOOTED,
                                 VIR_DOMAIN_EVENT_STARTED, VIR_DOMAIN_EVENT_STARTED_BOOTED);
    g_mutex_unlock(&dom->lock);
    shim_events_watch(drv, dom, run);
    return true;
}

void process_cleanup(struct vsnap_driver *drv, struct vsnap_domain *dom, struct domain_run *run,
                     int reason)
{
    g_mutex_lock(&dom->lock);
    if (dom->run != run) {
        g_mutex_unlock(&dom->lock);
        return;
    }
    /* Before the domain reads as shut off: a start that follows at once must
     * neither find this run's files nor have its own new ones (same paths)
     * removed by this cleanup. */
    remove_runtime_files(drv, run);
    dom->run = NULL;
    domain_block_jobs_clear(dom);   /* they ran in the shim */
    dom->id = -1;
    g_autoptr(domain_def) ended = dom->def->n_nets ? domain_def_copy(dom->def) : NULL;
    forget_serial_pty(dom->def);
    forget_disk_chains(dom->def);
    domain_def_forget_net_runtime(dom->def);
    if (dom->next_def) {
        domain_def_free(dom->def);
        dom->def = g_steal_pointer(&dom->next_def);
    }
    vsnap_domain_set_state_locked(dom, VIR_DOMAIN_SHUTOFF, reason);
    g_mutex_unlock(&dom->lock);
    /* Outside the lock: releasing a network port asks the network driver. */
    if (ended)
        process_net_release(drv, ended);

    uint64_t one = 1;
    (void)!write(run->wake_fd, &one, sizeof(one));   /* the watcher thread exits */
    domain_run_unref(run);
}

bool process_stop(struct vsnap_driver *drv, struct vsnap_domain *dom, int reason, bool graceful,
                  GError **error)
{
    g_mutex_lock(&dom->lock);
    struct domain_run *run = dom->run ? domain_run_ref(dom->run) : NULL;
    if (run) {
        run->stopping = true;
        run->stop_reason = reason;
        process_write_status_locked(dom);
    }
    g_mutex_unlock(&dom->lock);
    if (!run) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return false;
    }
    process_keep_workset(drv, dom, run);
    if (!terminate(run, graceful)) {
        g_mutex_lock(&dom->lock);
        run->stopping = false;
        process_write_status_locked(dom);
        g_mutex_unlock(&dom->lock);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_TIMEOUT,
                    "the shim (pid %d) did not exit after SIGTERM", run->pid);
        domain_run_unref(run);
        return false;
    }
    process_cleanup(drv, dom, run, reason);
    domain_run_unref(run);
    return true;
}

void process_kill_if_stuck(struct vsnap_domain *dom, const GError *error)
{
    if (!error || !g_error_matches(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_TIMEOUT))
        return;
    g_mutex_lock(&dom->lock);
    struct domain_run *run = dom->run && !dom->run->stopping ? domain_run_ref(dom->run) : NULL;
    g_mutex_unlock(&dom->lock);
    if (!run)
        return;
    g_warning("domain %s: %s; killing its shim (pid %d)", dom->name, error->message, run->pid);
    if (pidfd_send_signal(run->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
        g_warning("cannot kill shim %d: %s", run->pid, g_strerror(errno));
    domain_run_unref(run);
}

uint64_t process_rss_kib(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/status", pid);
    g_autofree char *text = NULL;
    const char *line;
    if (pid <= 0 || !g_file_get_contents(path, &text, NULL, NULL) ||
        !(line = strstr(text, "VmRSS:")))
        return 0;
    return g_ascii_strtoull(line + strlen("VmRSS:"), NULL, 10);
}

static uint64_t process_cpu_ticks_ns(pid_t pid);

/* Nanoseconds on a CPU of the threads alive now (first field of each
 * /proc/PID/task/TID/schedstat): exact, where /proc/PID/stat counts clock
 * ticks and reads 0 for a shim that has run less than one. */
static uint64_t live_threads_cpu_ns(pid_t pid)
{
    g_autofree char *task_dir = g_strdup_printf("/proc/%d/task", pid);
    g_autoptr(GDir) dir = g_dir_open(task_dir, 0, NULL);
    const char *tid;
    uint64_t total = 0;
    while (dir && (tid = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(task_dir, tid, "schedstat", NULL);
        g_autofree char *text = NULL;
        if (g_file_get_contents(path, &text, NULL, NULL))
            total += g_ascii_strtoull(text, NULL, 10);
    }
    return total;
}

/* Ticks include threads that have exited (an earlier boot's vCPUs); the
 * schedstat sum is precise for the live ones: take the larger. */
uint64_t process_cpu_time_ns(pid_t pid)
{
    uint64_t ticks_ns = process_cpu_ticks_ns(pid);
    uint64_t live_ns = pid > 0 ? live_threads_cpu_ns(pid) : 0;
    return MAX(ticks_ns, live_ns);
}

static uint64_t process_cpu_ticks_ns(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
    g_autofree char *text = NULL;
    if (pid <= 0 || !g_file_get_contents(path, &text, NULL, NULL))
        return 0;
    /* Fields after the command name (which may hold spaces) start at ')'. */
    const char *p = strrchr(text, ')');
    unsigned long long utime = 0, stime = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                     &stime) != 2)
        return 0;
    long hz = sysconf(_SC_CLK_TCK);
    return (utime + stime) * (1000000000ULL / (uint64_t)(hz > 0 ? hz : 100));
}

/* utime+stime (ns) and the last CPU (field 39) of a /proc stat line. */
static bool parse_stat(const char *text, uint64_t *time_ns, int *cpu)
{
    const char *p = strrchr(text, ')');
    if (!p)
        return false;
    g_auto(GStrv) fields = g_strsplit(p + 2, " ", -1);
    /* fields[0] is field 3 (state): utime is field 14, stime 15, cpu 39. */
    if (g_strv_length(fields) < 37)
        return false;
    long hz = sysconf(_SC_CLK_TCK);
    uint64_t ticks = g_ascii_strtoull(fields[11], NULL, 10) + g_ascii_strtoull(fields[12], NULL, 10);
    *time_ns = ticks * (1000000000ULL / (uint64_t)(hz > 0 ? hz : 100));
    *cpu = (int)g_ascii_strtoll(fields[36], NULL, 10);
    return true;
}

void process_vcpu_stats(pid_t pid, struct vcpu_stat *stats, unsigned n)
{
    g_autofree char *task_dir = g_strdup_printf("/proc/%d/task", pid);
    g_autoptr(GDir) dir = g_dir_open(task_dir, 0, NULL);
    const char *tid;
    while (dir && (tid = g_dir_read_name(dir))) {
        g_autofree char *comm_path = g_build_filename(task_dir, tid, "comm", NULL);
        g_autofree char *stat_path = g_build_filename(task_dir, tid, "stat", NULL);
        g_autofree char *comm = NULL, *stat = NULL;
        if (!g_file_get_contents(comm_path, &comm, NULL, NULL) ||
            !g_str_has_prefix(comm, "vcpu") ||
            !g_file_get_contents(stat_path, &stat, NULL, NULL))
            continue;
        unsigned index = (unsigned)g_ascii_strtoull(comm + 4, NULL, 10);
        if (index < n && parse_stat(stat, &stats[index].cpu_time_ns, &stats[index].cpu))
            stats[index].found = true;
    }
}

/* ---- reattach after a daemon restart ---- */

struct saved_status {
    int id;
    uint64_t generation;
    bool ready;
    int state, reason;   /* as last written; the reason survives a restart */
    int stopping;        /* a stop under way (its shut-off reason), 0 if none */
};

static bool read_status(struct domain_run *run, struct saved_status *st)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    if (!g_key_file_load_from_file(kf, run->status_path, 0, NULL))
        return false;
    st->id = g_key_file_get_integer(kf, "domain", "id", NULL);
    st->generation = g_key_file_get_uint64(kf, "domain", "generation", NULL);
    st->ready = g_key_file_get_boolean(kf, "domain", "ready", NULL);
    st->state = g_key_file_get_integer(kf, "domain", "state", NULL);
    st->reason = g_key_file_get_integer(kf, "domain", "reason", NULL);
    st->stopping = g_key_file_get_integer(kf, "domain", "stopping", NULL);
    return st->id > 0;
}

/* A pid file may outlive its process and the pid be reused: only a process
 * whose command line names this run's API socket is ours to adopt or kill. */
static bool is_our_shim(struct domain_run *run)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/cmdline", run->pid);
    g_autofree char *cmdline = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &cmdline, &len, NULL))
        return false;
    g_autofree char *api_arg = g_strdup_printf("path=%s", run->api_socket);
    for (gsize off = 0; off < len; off += strlen(cmdline + off) + 1)
        if (g_str_equal(cmdline + off, api_arg))
            return true;
    return false;
}

/* A daemon that died between launching a shim and writing its pid file left
 * no pid: the shim is found by the API socket on its command line. */
static pid_t find_shim(struct domain_run *run)
{
    g_autoptr(GDir) proc = g_dir_open("/proc", 0, NULL);
    const char *name;
    while (proc && (name = g_dir_read_name(proc))) {
        char *end = NULL;
        gint64 pid = g_ascii_strtoll(name, &end, 10);
        if (pid <= 1 || *end)
            continue;
        run->pid = (pid_t)pid;
        if (is_our_shim(run))
            return run->pid;
    }
    return -1;
}

static pid_t read_pid(const char *path)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return -1;
    gint64 pid = g_ascii_strtoll(text, NULL, 10);
    return pid > 1 ? (pid_t)pid : -1;
}

/* The domain object for a live definition: the persistent one when it
 * exists (its definition becomes the next one), else a new transient one. */
static struct vsnap_domain *domain_for_live(struct vsnap_driver *drv, struct domain_def *live)
{
    struct vsnap_domain *dom = domain_list_find_uuid(drv->domains, live->uuid);
    if (dom) {
        g_mutex_lock(&dom->lock);
        dom->next_def = dom->def;
        dom->def = live;
        g_mutex_unlock(&dom->lock);
        return dom;
    }
    dom = vsnap_domain_new(live);
    g_autoptr(GError) error = NULL;
    if (!domain_list_add(drv->domains, dom, &error)) {
        g_warning("cannot reattach %s: %s", live->name, error->message);
        vsnap_domain_unref(dom);
        return NULL;
    }
    return dom;
}

/* The state the shim reports; the saved reason when it still applies. */
static int state_from_info(const char *state, const struct saved_status *st, int *reason)
{
    int vir_state = g_str_equal(state, "Running")  ? VIR_DOMAIN_RUNNING
                    : g_str_equal(state, "Paused") ? VIR_DOMAIN_PAUSED
                                                   : -1;
    if (vir_state == VIR_DOMAIN_RUNNING)
        *reason = st->state == vir_state ? st->reason : VIR_DOMAIN_RUNNING_UNKNOWN;
    else if (vir_state == VIR_DOMAIN_PAUSED)
        *reason = st->state == vir_state ? st->reason : VIR_DOMAIN_PAUSED_USER;
    return vir_state;
}

/* The shim died while no daemon watched: its domain crashed. */
static void mark_stopped(struct vsnap_driver *drv, const char *name, int reason)
{
    g_autoptr(vsnap_domain) dom = domain_list_find_name(drv->domains, name);
    if (!dom)
        return;
    g_mutex_lock(&dom->lock);
    if (!dom->run)
        vsnap_domain_set_state_locked(dom, VIR_DOMAIN_SHUTOFF, reason);
    g_mutex_unlock(&dom->lock);
}

static void mark_crashed(struct vsnap_driver *drv, const char *name)
{
    mark_stopped(drv, name, VIR_DOMAIN_SHUTOFF_CRASHED);
}

/* The guest powered off (or crashed) while no daemon watched: the shim
 * still runs with its VM in state Shutdown. Finish the stop. */
static void finish_offline_stop(struct vsnap_driver *drv, const char *name,
                                struct domain_run *run, const struct vm_info *info)
{
    bool crashed = info->last_stop_reason && g_str_equal(info->last_stop_reason, "crash");
    g_message("domain %s: the guest %s while the daemon was away; stopping its shim", name,
              crashed ? "crashed" : "powered off");
    terminate(run, false);
    mark_stopped(drv, name, crashed ? VIR_DOMAIN_SHUTOFF_CRASHED : VIR_DOMAIN_SHUTOFF_SHUTDOWN);
}

/* The shim answered and its VM runs: adopt it. */
static void adopt(struct vsnap_driver *drv, struct domain_run *run, struct domain_def *live,
                  int state, int reason, const struct saved_status *st)
{
    int id = st->id;
    struct vsnap_domain *dom = domain_for_live(drv, live);
    if (!dom)
        return;
    domain_list_note_id(drv->domains, id);
    g_mutex_lock(&dom->lock);
    run->ready = st->ready;
    dom->run = domain_run_ref(run);
    dom->id = id;
    dom->generation = st->generation;
    vsnap_domain_set_state_locked(dom, state, reason);
    g_mutex_unlock(&dom->lock);
    g_message("reattached to domain %s (id %d, shim pid %d)", dom->name, id, run->pid);
    shim_events_watch(drv, dom, run);
    vsnap_domain_unref(dom);
}

/* A snapshot the dead daemon took may have moved the disks to a new
 * overlay before it recorded them: the shim's word is the truth. */
static void adopt_disk_chains(struct domain_run *run, struct domain_def *live, const struct vm_info *info)
{
    if (live->n_disks == 0)
        return;
    g_autoptr(GError) error = NULL;
    apply_disk_chains(live, info, run->disk_dir);
    g_autofree char *xml = domain_def_format(live, true, -1);
    if (!atomic_file_write(run->xml_path, xml, &error) || !record_disks(run->disk_dir, live, &error))
        g_warning("domain %s: %s", live->name, error->message);
}

/* A run found over at start-up: its taps went with its shim, but the
 * network ports it was given are still allocated. */
static void release_nets_of_dead_run(struct vsnap_driver *drv, struct domain_run *run)
{
    g_autofree char *xml = NULL;
    if (!g_file_get_contents(run->xml_path, &xml, NULL, NULL))
        return;
    g_autoptr(GError) error = NULL;
    g_autoptr(domain_def) live = domain_def_parse_live_string(xml, drv->paths.schema_dir, &error);
    if (live)
        process_net_release(drv, live);
    else
        g_warning("cannot read %s to release its interfaces: %s", run->xml_path, error->message);
}

static void reattach_one(struct vsnap_driver *drv, const char *name)
{
    struct domain_run *run = run_new(drv, name);
    struct saved_status st = {0};
    int state, reason;
    g_autofree char *xml = NULL;
    g_autoptr(GError) error = NULL;
    struct vm_info info = {0};
    g_autoptr(domain_def) live = NULL;

    run->pid = read_pid(run->pid_path);
    if (run->pid <= 0 || !is_our_shim(run))
        run->pid = find_shim(run);
    if (run->pid > 0)
        run->pidfd = pidfd_open(run->pid, 0);
    bool have_status = read_status(run, &st);
    if (st.stopping > 0) {
        /* The previous daemon died while stopping it: finish that stop. */
        g_message("domain %s: the previous daemon was stopping it; finishing the stop", name);
        if (run->pidfd >= 0)
            terminate(run, false);
        mark_stopped(drv, name, st.stopping);
        goto discard;
    }
    if (run->pidfd < 0) {
        g_message("domain %s: its shim is gone; cleaning up %s", name, run->dir);
        mark_crashed(drv, name);
        goto discard;
    }
    if (!have_status || !g_file_get_contents(run->xml_path, &xml, NULL, NULL)) {
        /* The previous daemon died in the middle of starting it. */
        g_message("domain %s: shim %d never finished starting; stopping it", name, run->pid);
        terminate(run, false);
        goto discard;
    }
    live = domain_def_parse_live_string(xml, drv->paths.schema_dir, &error);
    if (live && monitor_vm_info(run->api_socket, &info, &error))
        adopt_disk_chains(run, live, &info);
    if (live && info.state && g_str_equal(info.state, "Shutdown")) {
        finish_offline_stop(drv, name, run, &info);
        goto discard;
    }
    if (!live || !info.state ||
        (state = state_from_info(info.state, &st, &reason)) < 0 || !open_event_fifo(run, &error)) {
        g_message("domain %s: cannot reattach (%s); stopping its shim", name,
                  error ? error->message : info.state);
        terminate(run, false);
        mark_crashed(drv, name);
        goto discard;
    }
    /* Readiness announced while no daemon listened is in vm.info. */
    st.ready = st.ready || info.ready;
    adopt(drv, run, g_steal_pointer(&live), state, reason, &st);
    vm_info_clear(&info);
    domain_run_unref(run);
    return;

discard:
    vm_info_clear(&info);
    release_nets_of_dead_run(drv, run);
    remove_runtime_files(drv, run);
    domain_run_unref(run);
}

void process_reattach_all(struct vsnap_driver *drv)
{
    g_autoptr(GDir) dir = g_dir_open(drv->paths.run_dir, 0, NULL);
    const char *name;
    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(drv->paths.run_dir, name, NULL);
        if (g_file_test(path, G_FILE_TEST_IS_DIR))
            reattach_one(drv, name);
    }
}
