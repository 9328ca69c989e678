#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#define HOST_CID 2

static bool unix_address(const struct transport *t, const char *infix, uint32_t port,
                         struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    int n = snprintf(addr->sun_path, sizeof addr->sun_path, "%s%s%u", t->prefix, infix, port);
    if (n < 0 || (size_t)n >= sizeof addr->sun_path) {
        errno = ENAMETOOLONG;
        return false;
    }
    return true;
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
    int r;
    if (t->use_unix) {
        struct sockaddr_un addr;
        r = unix_address(t, "_", port, &addr) ? connect(fd, (struct sockaddr *)&addr, sizeof addr) : -1;
    } else {
        struct sockaddr_vm addr = {.svm_family = AF_VSOCK, .svm_cid = HOST_CID, .svm_port = port};
        r = connect(fd, (struct sockaddr *)&addr, sizeof addr);
    }
    if (r < 0 && errno != EINPROGRESS)
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
    int r;
    if (t->use_unix) {
        struct sockaddr_un addr;
        r = unix_address(t, ".listen_", port, &addr) ? 0 : -1;
        if (r == 0) {
            unlink(addr.sun_path); /* a leftover from an earlier run */
            r = bind(fd, (struct sockaddr *)&addr, sizeof addr);
        }
    } else {
        struct sockaddr_vm addr = {.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port};
        r = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    }
    if (r < 0 || listen(fd, 16) < 0)
        return close_failed(fd);
    return fd;
}
