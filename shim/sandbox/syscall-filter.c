#include "sandbox/syscall-filter.h"

#include <errno.h>
#include <gio/gio.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/confine.h"

/* ---- the lists (docs/seccomp.md says why each call is here) ---- */

/* Every thread: memory, locks, time, signals, the log and event writers. */
static const char *const common_calls[] = {
    "read", "write", "readv", "writev", "close", "lseek", "fstat", "newfstatat",
    "futex", "futex_waitv", "sched_yield", "sched_getaffinity", "getcpu",
    "mmap", "munmap", "mprotect", "mremap", "madvise", "brk",
    "clock_gettime", "clock_getres", "gettimeofday", "nanosleep", "clock_nanosleep",
    "poll", "ppoll", "restart_syscall",
    "rt_sigreturn", "rt_sigprocmask", "rt_sigaction", "sigaltstack",
    "getpid", "gettid", "tgkill", "prctl", "getrandom", "rseq", "set_robust_list",
    "exit", "exit_group",
    /* --confine's drop to the unprivileged user: glibc makes every thread
     * call these (SIGSETXID); with no capability left they only drop. */
    "setresuid", "setresgid", "setgroups",
};

/* The vCPU: KVM_RUN and the exits' device handlers (serial output, stops
 * handed to the main loop through its eventfd); its ioctls are KVM's. */
static const char *const vcpu_calls[] = {
    "sendto", "sendmsg",
};

/* A virtio-blk I/O thread: vectored I/O between the image and guest RAM,
 * flush, discard and write-zeroes; its ioctls are the block layer's. With
 * io='io_uring' it submits and reaps on a ring the main thread set up,
 * restricted to READV and WRITEV (block/blk-uring.h). */
static const char *const disk_calls[] = {
    "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "fsync", "fdatasync", "fallocate", "sync_file_range",
    "epoll_wait", "epoll_pwait", "epoll_ctl", "getrusage", "io_uring_enter",
};

/* vsock, console, rng and serial input: epoll over eventfds, timers and
 * UNIX sockets (connecting to a host listener for a guest-initiated stream). */
static const char *const device_calls[] = {
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl",
    "connect", "accept4", "accept", "sendto", "sendmsg", "recvfrom", "recvmsg",
    "shutdown", "getsockopt", "setsockopt", "getsockname", "getpeername", "fcntl",
    "timerfd_create", "timerfd_settime", "timerfd_gettime", "eventfd2", "dup",
    "pread64", "fsync", "fdatasync",
};

/* The userfaultfd handler and prefetcher: read faults, read the layer that
 * holds the block, copy it in with UFFDIO_COPY; its ioctls are userfaultfd's. */
static const char *const uffd_calls[] = {
    "pread64", "preadv", "epoll_wait", "epoll_pwait", "epoll_ctl", "eventfd2",
};

/* The main loop: everything the VMM does outside the guest's threads (the
 * API server, building and tearing down VMs, snapshots and restores, the
 * files they name) plus what the other threads do, as they inherit it. */
static const char *const main_calls[] = {
    /* files */
    "open", "openat", "openat2", "creat", "stat", "lstat", "statx", "access", "faccessat",
    "faccessat2", "readlink", "readlinkat", "getdents64", "getcwd", "mkdir", "mkdirat",
    "rmdir", "rename", "renameat", "renameat2", "unlink", "unlinkat", "link", "linkat",
    "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "fchown", "ftruncate", "truncate",
    "fallocate", "fsync", "fdatasync", "syncfs", "sync_file_range", "fadvise64", "readahead",
    "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "copy_file_range",
    "sendfile", "splice", "statfs", "fstatfs", "flock", "utimensat", "umask", "fcntl",
    "dup", "dup2", "dup3", "pipe2", "close_range", "memfd_create", "mincore", "mlock",
    "munlock",
    /* sockets: the API server, vsock, serial Socket backends, store URLs;
     * socket and socketpair only with the families add_socket_families allows */
    "bind", "listen", "accept", "accept4", "connect", "shutdown",
    "sendto", "sendmsg", "sendmmsg", "recvfrom", "recvmsg", "getsockopt", "setsockopt", "getsockname",
    "getpeername",
    /* waiting */
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd2",
    "timerfd_create", "timerfd_settime", "timerfd_gettime", "select", "pselect6",
    /* threads and the process */
    "sched_setaffinity", "sched_getattr", "sched_setattr", "sched_getparam",
    "sched_getscheduler", "getuid", "geteuid", "getgid", "getegid", "getresuid",
    "getresgid", "getgroups", "getppid", "uname", "sysinfo", "getrusage", "times",
    "getrlimit", "prlimit64", "getpriority", "membarrier",
    /* on-demand restores of an unconfined shim; libseccomp itself */
    "userfaultfd", "seccomp",
    /* a disk's ring (io='io_uring'): set up, restricted and enabled here,
     * then used by the disk's thread; every thread's filter is below this one */
    "io_uring_setup", "io_uring_register", "io_uring_enter",
};

/* A sanitizer build only: LeakSanitizer's check at exit stops the world
 * from a task it clones without CLONE_THREAD, which ptraces every thread. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_LEAK__)
#define SANITIZER_BUILD 1
#else
#define SANITIZER_BUILD 0
#endif
static const char *const sanitizer_calls[] = {
    "ptrace", "wait4", "waitid", "clone", "getppid", "getdents",
};

/* A -Dtest_hooks build under the crash-point walk only (VSNAP_CRASH_CONTROL
 * set: tests/lib/crashpoint.c preloaded): what the walk's wrappers of write
 * and fsync call on every thread, the disks' I/O threads included. */
static const char *const crashwalk_calls[] = {
    "openat", "readlinkat", "flock", "ftruncate", "pread64", "pwrite64", "kill",
};

static bool under_crash_walk(void)
{
#if VSNAP_TEST_HOOKS
    return getenv("VSNAP_CRASH_CONTROL") != NULL;
#else
    return false;
#endif
}

/* ioctls by their type byte (_IOC_TYPE) */
#define IOCTL_KVM 0xAE      /* KVM_* */
#define IOCTL_UFFD 0xAA     /* UFFDIO_*, USERFAULTFD_IOC_NEW */
#define IOCTL_TTY 'T'       /* TCGETS, TIOCGPTN, FIONBIO, FIONREAD, TUN* */
#define IOCTL_BLOCK 0x12    /* BLKGETSIZE64, BLKDISCARD, BLKZEROOUT */
#define IOCTL_SOCK 0x89     /* SIOCOUTQ */
#define IOCTL_FICLONE 0x94  /* FICLONE, FICLONERANGE: reflink copies */
#define IOCTL_FS 'f'        /* FS_IOC_GETFLAGS */

struct thread_list {
    const char *name;
    const char *const *calls;
    size_t n_calls;
    const int *ioctl_types;
    size_t n_ioctl_types;
};

static const int main_ioctls[] = {IOCTL_KVM,  IOCTL_UFFD,    IOCTL_TTY, IOCTL_BLOCK,
                                  IOCTL_SOCK, IOCTL_FICLONE, IOCTL_FS};
static const int vcpu_ioctls[] = {IOCTL_KVM, IOCTL_TTY};
static const int disk_ioctls[] = {IOCTL_BLOCK};
static const int device_ioctls[] = {IOCTL_TTY, IOCTL_SOCK};
static const int uffd_ioctls[] = {IOCTL_UFFD};

#define LIST(name, calls, ioctls) \
    {name, calls, G_N_ELEMENTS(calls), ioctls, G_N_ELEMENTS(ioctls)}

static const struct thread_list lists[] = {
    [SANDBOX_THREAD_MAIN] = LIST("main", main_calls, main_ioctls),
    [SANDBOX_THREAD_VCPU] = LIST("vcpu", vcpu_calls, vcpu_ioctls),
    [SANDBOX_THREAD_DISK] = LIST("disk", disk_calls, disk_ioctls),
    [SANDBOX_THREAD_DEVICE] = LIST("device", device_calls, device_ioctls),
    [SANDBOX_THREAD_UFFD] = LIST("uffd", uffd_calls, uffd_ioctls),
};

/* ---- state ---- */

static enum sandbox_mode installed_mode = SANDBOX_SECCOMP_OFF;   /* set once, main thread */
static __thread const char *thread_kind;                         /* for the reporter */
static __thread char thread_name[16];
/* Names of the calls by number, resolved before any filter exists: the
 * reporter runs in a signal handler and may not allocate. */
#define SYSCALL_NAMES 512
static char *syscall_names[SYSCALL_NAMES];

static void resolve_syscall_names(void)
{
    for (int nr = 0; nr < SYSCALL_NAMES; nr++)
        if (!syscall_names[nr])
            syscall_names[nr] = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
}

const char *sandbox_thread_kind_name(enum sandbox_thread kind)
{
    return lists[kind].name;
}

bool sandbox_parse_mode(const char *text, enum sandbox_mode *out, GError **error)
{
    if (g_str_equal(text, "true"))
        *out = SANDBOX_SECCOMP_KILL;
    else if (g_str_equal(text, "false"))
        *out = SANDBOX_SECCOMP_OFF;
    else if (g_str_equal(text, "log"))
        *out = SANDBOX_SECCOMP_LOG;
    else {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--seccomp %s: expected true, false or log", text);
        return false;
    }
    return true;
}

/* ---- the SIGSYS reporter ---- */

static size_t append(char *buf, size_t at, size_t size, const char *text)
{
    while (*text && at + 1 < size)
        buf[at++] = *text++;
    return at;
}

static size_t append_int(char *buf, size_t at, size_t size, long value)
{
    char digits[24];
    int n = 0;
    bool negative = value < 0;
    unsigned long v = negative ? -(unsigned long)value : (unsigned long)value;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (negative && at + 1 < size)
        buf[at++] = '-';
    while (n > 0 && at + 1 < size)
        buf[at++] = digits[--n];
    return at;
}

/* Async-signal-safe: a line on stderr (the shim's log when the daemon runs
 * it), then the default action of SIGSYS ends the process (SA_RESETHAND). */
static void on_sigsys(int sig, siginfo_t *info, void *context)
{
    (void)context;
    char line[256];
    size_t at = 0;
    at = append(line, at, sizeof(line), "vsnap-shim: seccomp: thread ");
    at = append(line, at, sizeof(line), thread_name[0] ? thread_name : "?");
    at = append(line, at, sizeof(line), " (");
    at = append(line, at, sizeof(line), thread_kind ? thread_kind : "main");
    at = append(line, at, sizeof(line), " list) made the forbidden system call ");
    int nr = info->si_syscall;
    at = append(line, at, sizeof(line), nr >= 0 && nr < SYSCALL_NAMES && syscall_names[nr]
                                            ? syscall_names[nr] : "?");
    at = append(line, at, sizeof(line), " (");
    at = append_int(line, at, sizeof(line), nr);
    at = append(line, at, sizeof(line), "); the shim is killed\n");
    (void)!write(STDERR_FILENO, line, at);
    /* Trapped again with SIGSYS back at its default: the kernel forces it,
     * even on a PID namespace's init, and the process dies of SIGSYS. */
    (void)sig;
    syscall(SYS_personality, 0xffffffffUL);
    _exit(128 + SIGSYS);
}

static bool install_reporter(GError **error)
{
    struct sigaction sa = {0};
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSYS, &sa, NULL) < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "sigaction(SIGSYS): %s",
                    g_strerror(errno));
        return false;
    }
    return true;
}

/* ---- building and loading ---- */

static int add_calls(scmp_filter_ctx ctx, const char *const *calls, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int nr = seccomp_syscall_resolve_name(calls[i]);
        if (nr == __NR_SCMP_ERROR)
            continue;   /* not a call of this architecture */
        int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int add_ioctls(scmp_filter_ctx ctx, const int *types, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff00, (scmp_datum_t)types[i] << 8));
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Threads only (CLONE_THREAD): no child processes. clone3's flags sit in
 * memory a filter cannot read, so it answers ENOSYS and glibc falls back
 * to clone. */
static int add_thread_creation(scmp_filter_ctx ctx)
{
    int rc = SANITIZER_BUILD
                 ? add_calls(ctx, sanitizer_calls, G_N_ELEMENTS(sanitizer_calls))
                 : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                                    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    return rc;
}

/* Sockets of the UNIX family: the API, vsock's hybrid backend, serial
 * Socket backends. */
static int add_unix_sockets(scmp_filter_ctx ctx)
{
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
                              SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
    return rc;
}

/* The datagram socket a tap's SIOCSIF* ioctls are made on (devices/backend/tap.c:
 * its address, MAC and link), exactly as tap.c asks for it. */
static int add_ifreq_socket(scmp_filter_ctx ctx)
{
    return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, AF_INET),
                            SCMP_A1(SCMP_CMP_EQ, SOCK_DGRAM | SOCK_CLOEXEC));
}

/* The main list of a shim that is not confined also has the network: store
 * URLs in vm.snapshot / vm.restore (libcurl's TCP connections, glibc's
 * resolver over UDP and its NETLINK_ROUTE look at the host's addresses).
 * A confined shim refuses store URLs, so its list has none of them. */
static int add_network_sockets(scmp_filter_ctx ctx)
{
    int rc = 0;
    const int families[] = { AF_INET, AF_INET6 };
    for (size_t i = 0; rc == 0 && i < G_N_ELEMENTS(families); i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, families[i]));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
                              SCMP_A2(SCMP_CMP_EQ, 0 /* NETLINK_ROUTE */));
    return rc;
}

static bool load_list(enum sandbox_thread kind, enum sandbox_mode mode, GError **error)
{
    const struct thread_list *list = &lists[kind];
    uint32_t deny = mode == SANDBOX_SECCOMP_LOG ? SCMP_ACT_LOG : SCMP_ACT_TRAP;
    scmp_filter_ctx ctx = seccomp_init(deny);
    int rc = ctx ? 0 : -ENOMEM;
    if (rc == 0 && kind == SANDBOX_THREAD_MAIN)
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    if (rc == 0)
        rc = add_calls(ctx, common_calls, G_N_ELEMENTS(common_calls));
    if (rc == 0)
        rc = add_calls(ctx, list->calls, list->n_calls);
    if (rc == 0 && under_crash_walk())
        rc = add_calls(ctx, crashwalk_calls, G_N_ELEMENTS(crashwalk_calls));
    if (rc == 0)
        rc = add_ioctls(ctx, list->ioctl_types, list->n_ioctl_types);
    if (rc == 0 && kind == SANDBOX_THREAD_MAIN)
        rc = add_thread_creation(ctx);
    if (rc == 0 && (kind == SANDBOX_THREAD_MAIN || kind == SANDBOX_THREAD_DEVICE))
        rc = add_unix_sockets(ctx);
    if (rc == 0 && kind == SANDBOX_THREAD_MAIN)
        rc = sandbox_is_confined() ? add_ifreq_socket(ctx) : add_network_sockets(ctx);
    if (rc == 0)
        rc = seccomp_load(ctx);
    if (ctx)
        seccomp_release(ctx);
    if (rc < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(-rc),
                    "cannot install the seccomp filter of the %s threads: %s", list->name,
                    g_strerror(-rc));
        return false;
    }
    return true;
}

/* ---- the test trigger ---- */

/* With -Dtest_hooks=true only (tests/plugin/test_confine.py):
 * personality(0xffffffff) only reads the persona: harmless where it is
 * allowed, and on no list. */
static void maybe_trigger(enum sandbox_thread kind)
{
#if VSNAP_TEST_HOOKS
    const char *want = getenv(SANDBOX_TEST_TRIGGER_ENV);
    if (!want || !g_str_equal(want, lists[kind].name))
        return;
    fprintf(stderr, "vsnap-shim: test trigger: a forbidden system call on thread %s (%s list)\n",
            thread_name, lists[kind].name);
    fflush(stderr);
    syscall(SYS_personality, 0xffffffffUL);
#else
    (void)kind;
#endif
}

static void remember_thread(enum sandbox_thread kind)
{
    thread_kind = lists[kind].name;
    if (pthread_getname_np(pthread_self(), thread_name, sizeof(thread_name)) != 0)
        g_strlcpy(thread_name, lists[kind].name, sizeof(thread_name));
}

bool sandbox_seccomp_install_main(enum sandbox_mode mode, GError **error)
{
    if (mode == SANDBOX_SECCOMP_OFF)
        return true;
    remember_thread(SANDBOX_THREAD_MAIN);
    resolve_syscall_names();
    if (!install_reporter(error) || !load_list(SANDBOX_THREAD_MAIN, mode, error))
        return false;
    installed_mode = mode;
    g_info("seccomp: the %s list is installed (%s)", lists[SANDBOX_THREAD_MAIN].name,
           mode == SANDBOX_SECCOMP_LOG ? "log" : "kill");
    maybe_trigger(SANDBOX_THREAD_MAIN);
    return true;
}

void sandbox_seccomp_enter_thread(enum sandbox_thread kind)
{
    if (installed_mode == SANDBOX_SECCOMP_OFF)
        return;
    remember_thread(kind);
    /* Threads that block every signal (vCPUs) still get the reporter:
     * a blocked SIGSYS would kill them without a word. */
    sigset_t sys;
    sigemptyset(&sys);
    sigaddset(&sys, SIGSYS);
    pthread_sigmask(SIG_UNBLOCK, &sys, NULL);
    g_autoptr(GError) error = NULL;
    if (!load_list(kind, installed_mode, &error))
        g_error("%s", error->message);   /* never run a thread unfiltered */
    maybe_trigger(kind);
}
