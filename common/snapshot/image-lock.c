/* Image locks (see image-lock.h). */
#include "snapshot/image-lock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/layer.h"

static struct flock whole_file(bool exclusive)
{
    /* l_pid must be 0 for the OFD commands. */
    return (struct flock){ .l_type = exclusive ? F_WRLCK : F_RDLCK, .l_whence = SEEK_SET };
}

/* Whether /proc/PID/fdinfo/FD lists an OFD lock of the kind asked for
 * ("lock:\t1: OFDLCK ADVISORY  WRITE -1 ..."; /proc/locks gives no pid
 * for OFD locks). */
static bool fdinfo_has_lock(int fdinfo_dir, const char *fd, bool writers_only)
{
    int f = openat(fdinfo_dir, fd, O_RDONLY | O_CLOEXEC);
    FILE *in = f < 0 ? NULL : fdopen(f, "re");
    if (!in) {
        if (f >= 0)
            close(f);
        return false;
    }
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof line, in))
        found = g_str_has_prefix(line, "lock:") && strstr(line, "OFDLCK") &&
                (!writers_only || strstr(line, " WRITE "));
    fclose(in);
    return found;
}

/* Whether process `pid` (a /proc entry) has an open of the file st that
 * holds such a lock. */
static bool process_holds(const char *pid, const struct stat *st, bool writers_only)
{
    g_autofree char *fd_path = g_strdup_printf("/proc/%s/fd", pid);
    g_autofree char *info_path = g_strdup_printf("/proc/%s/fdinfo", pid);
    DIR *fds = opendir(fd_path);
    int info = fds ? open(info_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    bool found = false;
    for (struct dirent *e; info >= 0 && !found && (e = readdir(fds));) {
        struct stat target;
        if (e->d_name[0] != '.' && fstatat(dirfd(fds), e->d_name, &target, 0) == 0 &&
            target.st_dev == st->st_dev && target.st_ino == st->st_ino)
            found = fdinfo_has_lock(info, e->d_name, writers_only);
    }
    if (info >= 0)
        close(info);
    if (fds)
        closedir(fds);
    return found;
}

/* The first process /proc shows holding a conflicting lock on st's file, or
 * -1 (none visible: another pid namespace, no /proc in a jail). Only on the
 * way to an error: it reads every process's descriptors. */
static pid_t find_holder(const struct stat *st, bool exclusive)
{
    DIR *proc = opendir("/proc");
    pid_t found = -1;
    for (struct dirent *e; proc && found < 0 && (e = readdir(proc));)
        if (g_ascii_isdigit(e->d_name[0]) && process_holds(e->d_name, st, !exclusive))
            found = (pid_t)atoi(e->d_name);
    if (proc)
        closedir(proc);
    return found;
}

pid_t snap_image_lock_holder(int fd, bool exclusive)
{
    struct flock fl = whole_file(exclusive);
    if (fcntl(fd, F_OFD_GETLK, &fl) < 0 || fl.l_type == F_UNLCK)
        return 0;
    struct stat st;
    return fstat(fd, &st) == 0 ? find_holder(&st, exclusive) : -1;
}

static void set_busy_error(GError **error, int fd, const char *what, const char *path, bool exclusive)
{
    pid_t pid = snap_image_lock_holder(fd, exclusive);
    g_autofree char *holder = pid > 0 ? g_strdup_printf("another process (pid %d)", (int)pid)
                                      : g_strdup("another process");
    if (exclusive)
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_BUSY,
                    "%s %s is in use: %s has it open (locked), writing it or reading it as the base of "
                    "disk layers; an image has one writer, or readers and no writer", what, path, holder);
    else
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_BUSY,
                    "%s %s is in use: %s is writing it (locked); it cannot be read meanwhile as the base "
                    "of disk layers or as a read-only disk", what, path, holder);
}

bool snap_image_lock(int fd, const char *what, const char *path, bool exclusive, GError **error)
{
    struct flock fl = whole_file(exclusive);
    while (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EACCES) {
            set_busy_error(error, fd, what, path, exclusive);
            return false;
        }
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO, "cannot lock %s %s: %s", what, path, g_strerror(errno));
        return false;
    }
    return true;
}

bool snap_image_lock_free(int fd, const char *what, const char *path, bool exclusive, GError **error)
{
    struct flock fl = whole_file(exclusive);
    if (fcntl(fd, F_OFD_GETLK, &fl) < 0) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO, "cannot test the lock of %s %s: %s", what, path,
                    g_strerror(errno));
        return false;
    }
    if (fl.l_type == F_UNLCK)
        return true;
    set_busy_error(error, fd, what, path, exclusive);
    return false;
}
