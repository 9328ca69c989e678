/* libvsnap-crashpoint.so: an LD_PRELOAD library for crash-point walks.
 *
 * Every write (write, pwrite, writev, pwritev), fsync (fsync, fdatasync),
 * rename (rename, renameat, renameat2) and unlink (unlink, unlinkat) that a
 * process makes on a path under $VSNAP_CRASH_UNDER is a crash point. While
 * the file $VSNAP_CRASH_CONTROL/armed exists, each point takes the next number
 * of one sequence shared by every process of the walk (the daemon and its
 * shims; a counter file under flock), appends "<n> <program> <op> <path>" to
 * $VSNAP_CRASH_CONTROL/log, and if $VSNAP_CRASH_CONTROL/at holds n, the
 * process kills itself with SIGKILL before doing the operation: kill -9 at
 * exactly that point. A walk first counts an operation's points (at = 0), then
 * repeats it killing at each one.
 *
 * Without VSNAP_CRASH_CONTROL and VSNAP_CRASH_UNDER set the library only
 * passes calls through. Its own bookkeeping uses raw syscalls, so it never
 * counts itself. */
/* Both pwrite and pwrite64 are defined here, so the large-file renaming
 * (which would turn the first into the second) must be off in this file. */
#undef _FILE_OFFSET_BITS
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static const char *control_dir(void)
{
    static const char *dir;
    static bool looked;
    if (!looked) {
        dir = getenv("VSNAP_CRASH_CONTROL");
        looked = true;
    }
    return dir && *dir ? dir : NULL;
}

static const char *watched_prefix(void)
{
    static const char *prefix;
    static bool looked;
    if (!looked) {
        prefix = getenv("VSNAP_CRASH_UNDER");
        looked = true;
    }
    return prefix && *prefix ? prefix : NULL;
}

static int raw_open(const char *path, int flags, mode_t mode)
{
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC, mode);
}

static void raw_close(int fd)
{
    syscall(SYS_close, fd);
}

static bool control_path(char *out, size_t size, const char *name)
{
    int n = snprintf(out, size, "%s/%s", control_dir(), name);
    return n > 0 && (size_t)n < size;
}

static bool armed(void)
{
    char path[PATH_MAX];
    struct stat st;
    return control_path(path, sizeof path, "armed") &&
           syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) == 0;
}

static long read_number(int fd)
{
    char buf[32] = {0};
    long n = (long)syscall(SYS_pread64, fd, buf, sizeof buf - 1, (off_t)0);
    return n > 0 ? strtol(buf, NULL, 10) : 0;
}

static long file_number(const char *name)
{
    char path[PATH_MAX];
    if (!control_path(path, sizeof path, name))
        return 0;
    int fd = raw_open(path, O_RDONLY, 0);
    if (fd < 0)
        return 0;
    long n = read_number(fd);
    raw_close(fd);
    return n;
}

/* The walk's sequence lock (the count file, flocked), or -1. A point holds
 * it until it has logged itself and, if it is the one, killed its process
 * (the kernel drops the lock with the process): a walk that disarms and then
 * takes this lock once knows that no point is still on its way. */
static int lock_sequence(void)
{
    char path[PATH_MAX];
    if (!control_path(path, sizeof path, "count"))
        return -1;
    int fd = raw_open(path, O_RDWR | O_CREAT, 0600);
    if (fd >= 0)
        syscall(SYS_flock, fd, LOCK_EX);
    return fd;
}

/* The next number of the walk's sequence, shared by all processes. */
static long next_point(int fd)
{
    long n = read_number(fd) + 1;
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%ld\n", n);
    syscall(SYS_ftruncate, fd, (off_t)0);
    syscall(SYS_pwrite64, fd, buf, (size_t)len, (off_t)0);
    return n;
}

static void log_point(long n, const char *op, const char *target)
{
    char path[PATH_MAX];
    if (!control_path(path, sizeof path, "log"))
        return;
    int fd = raw_open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0)
        return;
    char line[PATH_MAX + 128];
    int len = snprintf(line, sizeof line, "%ld %d %s %s %s\n", n, (int)getpid(),
                       program_invocation_short_name, op, target);
    if (len > 0)
        syscall(SYS_write, fd, line, (size_t)(len < (int)sizeof line ? len : (int)sizeof line - 1));
    raw_close(fd);
}

static bool under_prefix(const char *path)
{
    const char *prefix = watched_prefix();
    return path && prefix && strncmp(path, prefix, strlen(prefix)) == 0;
}

static void crash_point(const char *op, const char *path)
{
    if (!control_dir() || !under_prefix(path) || !armed())
        return;
    int seq = lock_sequence();
    if (seq < 0)
        return;
    if (!armed()) {   /* disarmed while this point waited for the lock */
        raw_close(seq);
        return;
    }
    long n = next_point(seq);
    log_point(n, op, path);
    if (n == file_number("at")) {
        /* A confined shim is the first process of its PID namespace, which
         * ignores a SIGKILL of its own: it ends as abruptly by exit_group. */
        if (getpid() == 1)
            syscall(SYS_exit_group, 128 + SIGKILL);
        syscall(SYS_kill, getpid(), SIGKILL);
    }
    raw_close(seq);
}

/* A write or sync on a descriptor counts when it is a regular file under the
 * watched prefix (sockets, pipes and logs elsewhere do not). */
static void fd_point(const char *op, int fd)
{
    if (!control_dir() || !watched_prefix())
        return;
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0 || !S_ISREG(st.st_mode))
        return;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    long n = (long)syscall(SYS_readlinkat, AT_FDCWD, link, path, sizeof path - 1);
    if (n <= 0)
        return;
    path[n] = '\0';
    crash_point(op, path);
}

/* A path relative to dirfd, made absolute for the prefix check. */
static void at_point(const char *op, int dirfd, const char *path)
{
    if (!control_dir() || !watched_prefix() || !path)
        return;
    if (path[0] == '/' || dirfd == AT_FDCWD) {
        char abs[PATH_MAX];
        if (path[0] != '/' && getcwd(abs, sizeof abs)) {
            size_t len = strlen(abs);
            snprintf(abs + len, sizeof abs - len, "/%s", path);
            crash_point(op, abs);
        } else {
            crash_point(op, path);
        }
        return;
    }
    char link[64], dir[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
    long n = (long)syscall(SYS_readlinkat, AT_FDCWD, link, dir, sizeof dir - 2);
    if (n <= 0)
        return;
    dir[n] = '\0';
    char abs[PATH_MAX * 2];
    snprintf(abs, sizeof abs, "%s/%s", dir, path);
    crash_point(op, abs);
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void *buf, size_t count)
{
    fd_point("write", fd);
    return REAL(write)(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
    fd_point("pwrite", fd);
    return REAL(pwrite)(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset)
{
    fd_point("pwrite", fd);
    return REAL(pwrite64)(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    fd_point("writev", fd);
    return REAL(writev)(fd, iov, iovcnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
    fd_point("pwritev", fd);
    return REAL(pwritev)(fd, iov, iovcnt, offset);
}

int fsync(int fd)
{
    fd_point("fsync", fd);
    return REAL(fsync)(fd);
}

int fdatasync(int fd)
{
    fd_point("fdatasync", fd);
    return REAL(fdatasync)(fd);
}

int rename(const char *from, const char *to)
{
    at_point("rename", AT_FDCWD, to);
    return REAL(rename)(from, to);
}

int renameat(int fromfd, const char *from, int tofd, const char *to)
{
    at_point("rename", tofd, to);
    return REAL(renameat)(fromfd, from, tofd, to);
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned flags)
{
    at_point("rename", tofd, to);
    return REAL(renameat2)(fromfd, from, tofd, to, flags);
}

int unlink(const char *path)
{
    at_point("unlink", AT_FDCWD, path);
    return REAL(unlink)(path);
}

int unlinkat(int dirfd, const char *path, int flags)
{
    at_point("unlink", dirfd, path);
    return REAL(unlinkat)(dirfd, path, flags);
}
