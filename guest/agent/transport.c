#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#define HOST_CID 2

union socket_address {
    struct sockaddr sa;
    struct sockaddr_un un;
    struct sockaddr_vm vm;
};

/* The address of port: vsock (cid, port) or, in UNIX test mode, the file
 * <prefix><infix><port>. Returns its length; 0 (errno set) when the path
 * does not fit. */
static socklen_t address_of(const struct transport *t, const char *infix, uint32_t cid,
                            uint32_t port, union socket_address *a)
{
    memset(a, 0, sizeof *a);
    if (!t->use_unix) {
        a->vm.svm_family = AF_VSOCK;
        a->vm.svm_cid = cid;
        a->vm.svm_port = port;
        return sizeof a->vm;
    }
    a->un.sun_family = AF_UNIX;
    int n = snprintf(a->un.sun_path, sizeof a->un.sun_path, "%s%s%u", t->prefix, infix, port);
    if (n < 0 || (size_t)n >= sizeof a->un.sun_path) {
        errno = ENAMETOOLONG;
        return 0;
    }
    return sizeof a->un;
}

static int stream_socket(const struct transport *t)
{
    return socket(t->use_unix ? AF_UNIX : AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

/* Close fd after a failed call, keeping that call's errno for the caller. */
static int close_failed(int fd)
{
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

int transport_connect(const struct transport *t, uint32_t port)
{
    int fd = stream_socket(t);
    if (fd < 0)
        return -1;
    union socket_address a;
    socklen_t len = address_of(t, "_", HOST_CID, port, &a);
    if (!len || (connect(fd, &a.sa, len) < 0 && errno != EINPROGRESS))
        return close_failed(fd);
    return fd;
}

int transport_connect_result(int fd)
{
    int error = 0;
    socklen_t len = sizeof error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0)
        return errno;
    return error;
}

int transport_listen(const struct transport *t, uint32_t port)
{
    int fd = stream_socket(t);
    if (fd < 0)
        return -1;
    union socket_address a;
    socklen_t len = address_of(t, ".listen_", VMADDR_CID_ANY, port, &a);
    if (len && t->use_unix)
        unlink(a.un.sun_path); /* a leftover from an earlier run */
    if (!len || bind(fd, &a.sa, len) < 0 || listen(fd, 16) < 0)
        return close_failed(fd);
    return fd;
}
