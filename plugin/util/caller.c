#include "util/caller.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/virt-error.h"

const struct caller caller_daemon = {.as_daemon = true};

/* The thread's file-system identity (fsuid, fsgid, supplementary groups).
 * The raw setgroups syscall changes the calling thread only; glibc's
 * setgroups() would change every thread of the daemon. setfsuid/setfsgid
 * are per thread already, and a thread whose fsuid is not 0 has lost the
 * capabilities that bypass permission checks (CAP_DAC_OVERRIDE and the
 * like) until its fsuid is 0 again. */
struct fs_identity {
    uid_t uid;
    gid_t gid;
    int ngroups;
    gid_t groups[CALLER_MAX_GROUPS];
};

static bool set_groups(int n, const gid_t *groups)
{
    return syscall(SYS_setgroups, (size_t)n, groups) == 0;
}

/* setfsuid and setfsgid report no errors: reading the value back is how
 * one learns whether the switch happened. */
static bool switch_to(uid_t uid, gid_t gid, int ngroups, const gid_t *groups)
{
    if (!set_groups(ngroups, groups))
        return false;
    setfsgid(gid);
    setfsuid(uid);
    return (uid_t)setfsuid((uid_t)-1) == uid && (gid_t)setfsgid((gid_t)-1) == gid;
}

static bool save_identity(struct fs_identity *id)
{
    id->uid = (uid_t)setfsuid((uid_t)-1);
    id->gid = (gid_t)setfsgid((gid_t)-1);
    id->ngroups = (int)syscall(SYS_getgroups, CALLER_MAX_GROUPS, id->groups);
    return id->ngroups >= 0;
}

/* Returns the fd or -errno. */
static int open_as(const struct caller *c, const char *path)
{
    const int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    /* The daemon's own user (root on the read-only socket, the session
     * user) may open what the daemon opens. */
    if (c->as_daemon || c->uid == geteuid()) {
        int fd = open(path, flags);
        return fd >= 0 ? fd : -errno;
    }
    struct fs_identity own;
    if (!save_identity(&own))
        return -EPERM;
    /* Fail closed: a caller we cannot become (a daemon that is not root can
     * only act as itself) gets nothing. */
    if (!switch_to(c->uid, c->gid, c->ngroups, c->groups)) {
        if (!switch_to(own.uid, own.gid, own.ngroups, own.groups))
            g_error("cannot return to the daemon's own credentials after a failed switch");
        return -EACCES;
    }
    int fd = open(path, flags);
    int err = errno;
    if (!switch_to(own.uid, own.gid, own.ngroups, own.groups))
        g_error("cannot return to the daemon's own credentials after opening %s as uid %u",
                path, c->uid);
    return fd >= 0 ? fd : -err;
}

int caller_open_regular(const struct caller *caller, const char *path, GError **error)
{
    int fd = open_as(caller, path);
    if (fd < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot open %s: %s", path,
                    g_strerror(-fd));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int err = errno;
        close(fd);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot stat %s: %s", path,
                    g_strerror(err));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "%s is not a regular file", path);
        return -1;
    }
    return fd;
}
