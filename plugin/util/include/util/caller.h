/* Who a call is made for, and opening a file the way that caller could.
 *
 * The daemon runs as root, but a read-only client (anyone on the read-only
 * socket) must not learn through it what it could not read itself: a path it
 * names is opened with its own credentials (file-system uid and gid and
 * supplementary groups, switched on the calling thread only), never as root.
 * Every such open is also O_NONBLOCK and accepts regular files only, so a
 * FIFO or a device never parks a worker thread in open() or read(). */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#define CALLER_MAX_GROUPS 256

struct caller {
    bool as_daemon;     /* the daemon's own credentials (read-write clients) */
    uid_t uid;
    gid_t gid;
    int ngroups;
    gid_t groups[CALLER_MAX_GROUPS];
};

/* The caller a read-write client is: the daemon itself. */
extern const struct caller caller_daemon;

/* A regular file opened for reading with the caller's credentials
 * (O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY). Returns the fd, or -1 with
 * error set: VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR for open's own failure
 * (its errno, as the caller would have seen it), VIR_ERR_OPERATION_FAILED
 * for a path that is not a regular file. The message names the path. */
int caller_open_regular(const struct caller *caller, const char *path, GError **error);
