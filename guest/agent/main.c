/* vsnap-agent: announces the guest's readiness to the host over vsock the
 * moment it starts, re-announces (generation + 1) whenever the readiness
 * connection is reset (a restore, a clone, a restarted host side), and
 * answers PING on its command port. As PID 1 of an initramfs it also mounts
 * /proc, /sys and /dev and reaps orphans.
 *
 *   vsnap-agent [--ready-port N] [--cmd-port N] [--unix PREFIX] [--no-set-clock]
 *
 * Defaults come from the kernel command line (vsnap.ready_port=,
 * vsnap.cmd_port=), else 1024 and 5000. --unix runs the same code over UNIX
 * sockets (see transport.h), which is how the host tests drive it.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "clock.h"
#include "log.h"
#include "pid1.h"

#define DEFAULT_READY_PORT 1024
#define DEFAULT_CMD_PORT 5000

/* ---- set-up ---- */

static void read_boot_id(char *out, size_t size)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f && fgets(out, (int)size, f)) {
        out[strcspn(out, "\n")] = '\0';
        fclose(f);
        return;
    }
    if (f)
        fclose(f);
    uint8_t bytes[16] = {0};
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes)
        log_line("no boot id and no random bytes: using zeros");
    for (unsigned i = 0; i < sizeof bytes && 2 * i + 2 < size; i++)
        snprintf(out + 2 * i, 3, "%02x", bytes[i]);
}

/* vsnap.<name>=<n> from /proc/cmdline, or fallback. */
static uint32_t cmdline_port(const char *name, uint32_t fallback)
{
    char cmdline[4096] = "";
    FILE *f = fopen("/proc/cmdline", "r");
    if (!f)
        return fallback;
    size_t n = fread(cmdline, 1, sizeof cmdline - 1, f);
    fclose(f);
    cmdline[n] = '\0';
    char key[64];
    snprintf(key, sizeof key, "vsnap.%s=", name);
    for (char *p = strstr(cmdline, key); p; p = strstr(p + 1, key)) {
        if (p != cmdline && p[-1] != ' ')
            continue;
        unsigned long v = strtoul(p + strlen(key), NULL, 0);
        if (v > 0 && v <= UINT32_MAX)
            return (uint32_t)v;
    }
    return fallback;
}

static bool parse_port(const char *text, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 0);
    if (errno || *end || end == text || v == 0 || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

static void usage(FILE *to)
{
    fprintf(to, "usage: vsnap-agent [--ready-port N] [--cmd-port N] [--unix PREFIX] [--no-set-clock]\n");
}

static bool parse_options(int argc, char **argv, struct options *opts)
{
    static const struct option longopts[] = {
        {"ready-port", required_argument, NULL, 'r'},
        {"cmd-port", required_argument, NULL, 'c'},
        {"unix", required_argument, NULL, 'u'},
        {"no-set-clock", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opts->ready_port = cmdline_port("ready_port", DEFAULT_READY_PORT);
    opts->cmd_port = cmdline_port("cmd_port", DEFAULT_CMD_PORT);
    opts->set_clock = true;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
        case 'c':
            if (!parse_port(optarg, c == 'r' ? &opts->ready_port : &opts->cmd_port)) {
                log_line("invalid port '%s'", optarg);
                return false;
            }
            break;
        case 'u':
            if (strlen(optarg) + 24 >= sizeof opts->transport.prefix) {
                log_line("--unix prefix '%s' is too long for a socket path", optarg);
                return false;
            }
            opts->transport.use_unix = true;
            snprintf(opts->transport.prefix, sizeof opts->transport.prefix, "%s", optarg);
            break;
        case 'n': opts->set_clock = false; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return false;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return false;
    }
    return true;
}

/* ---- the loop ---- */

/* Returns false when the agent should exit. */
static bool handle_signals(struct agent *a)
{
    struct signalfd_siginfo si;
    while (read(a->signal_fd, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGCHLD)
            pid1_reap_children();
        else if (!a->is_pid1)
            return false; /* SIGTERM / SIGINT; PID 1 must not exit */
    }
    return true;
}

static int poll_timeout_ms(const struct agent *a)
{
    if (a->ready.state != READY_IDLE)
        return -1;
    uint64_t now = monotonic_ms();
    return a->ready.retry_at_ms > now ? (int)(a->ready.retry_at_ms - now) : 0;
}

static bool run_once(struct agent *a)
{
    struct pollfd pfd[3 + MAX_CLIENTS];
    unsigned n = 0;
    pfd[n++] = (struct pollfd){.fd = a->signal_fd, .events = POLLIN};
    pfd[n++] = (struct pollfd){.fd = a->listen_fd, .events = POLLIN};
    short ready_events = a->ready.state == READY_CONNECTING ? POLLOUT : POLLIN;
    pfd[n++] = (struct pollfd){.fd = a->ready.fd, .events = ready_events}; /* fd -1 is skipped */
    for (unsigned i = 0; i < MAX_CLIENTS; i++)
        pfd[n++] = (struct pollfd){.fd = a->clients[i].fd, .events = POLLIN};
    if (poll(pfd, n, poll_timeout_ms(a)) < 0 && errno != EINTR) {
        log_line("poll: %s", strerror(errno));
        return false;
    }
    if ((pfd[0].revents & POLLIN) && !handle_signals(a))
        return false;
    if (pfd[1].revents & POLLIN)
        commands_accept(a);
    if (a->ready.state == READY_IDLE && monotonic_ms() >= a->ready.retry_at_ms)
        readiness_connect(a);
    else if (pfd[2].revents && a->ready.state == READY_CONNECTING)
        readiness_announce(a);
    else if (pfd[2].revents)
        readiness_read(a);
    for (unsigned i = 0; i < MAX_CLIENTS; i++)
        if (a->clients[i].fd >= 0 && pfd[3 + i].revents)
            commands_serve(&a->clients[i]);
    return true;
}

static bool open_fds(struct agent *a)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    a->signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    a->listen_fd = transport_listen(&a->opts.transport, a->opts.cmd_port);
    if (a->signal_fd < 0 || a->listen_fd < 0) {
        log_line("cannot %s: %s", a->signal_fd < 0 ? "watch signals" : "listen on the command port",
                 strerror(errno));
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    struct agent a = {.ready = {.fd = -1, .state = READY_IDLE}};
    for (unsigned i = 0; i < MAX_CLIENTS; i++)
        a.clients[i].fd = -1;
    a.is_pid1 = getpid() == 1;
    if (a.is_pid1)
        pid1_mount_filesystems();
    if (!parse_options(argc, argv, &a.opts))
        return a.is_pid1 ? (pause(), 1) : 2;
    read_boot_id(a.boot_id, sizeof a.boot_id);
    if (!open_fds(&a)) {
        if (a.is_pid1)
            for (;;)
                pause(); /* PID 1 exiting panics the kernel; stay for a console */
        return 1;
    }
    log_line("up: readiness port %u, command port %u%s", a.opts.ready_port, a.opts.cmd_port,
             a.opts.transport.use_unix ? " (UNIX sockets)" : "");
    while (run_once(&a))
        ;
    log_line("exiting");
    return 0;
}
