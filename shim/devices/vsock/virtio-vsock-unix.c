/* The hybrid side of virtio-vsock: the UNIX socket host programs use.
 *
 * Host-initiated: accept, read "CONNECT <port>\n" (only that line: MSG_PEEK
 * finds its end so stream bytes behind it stay in the socket), send REQUEST to
 * the guest, answer "OK <local port>\n" on RESPONSE. Guest-initiated: dial
 * "<socket>_<port>".
 */
#include <errno.h>
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/virtio-vsock-priv.h"

static bool make_address(const char *path, struct sockaddr_un *addr, GError **error)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr->sun_path) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FILENAME_TOO_LONG,
                    "vsock socket path '%s' is longer than %zu bytes", path,
                    sizeof addr->sun_path - 1);
        return false;
    }
    strcpy(addr->sun_path, path);
    return true;
}

/* A socket file left by a dead shim is replaced; one a live process still
 * listens on, or a file that is not a socket, is an error. */
static bool remove_stale_socket(const char *path, const struct sockaddr_un *addr, GError **error)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return true; /* nothing there */
    if (!S_ISSOCK(st.st_mode)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_EXISTS,
                    "vsock socket path '%s' exists and is not a socket", path);
        return false;
    }
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && connect(probe, (const struct sockaddr *)addr, sizeof *addr) == 0;
    if (probe >= 0)
        close(probe);
    if (live) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE,
                    "vsock socket '%s' is in use by another process", path);
        return false;
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
                    "cannot remove stale vsock socket '%s': %s", path, g_strerror(errno));
        return false;
    }
    return true;
}

bool vsock_unix_listen(struct virtio_vsock *dev, GError **error)
{
    struct sockaddr_un addr;
    if (!make_address(dev->socket_path, &addr, error) ||
        !remove_stale_socket(dev->socket_path, &addr, error))
        return false;
    dev->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (dev->listen_fd < 0 || bind(dev->listen_fd, (struct sockaddr *)&addr, sizeof addr) < 0 ||
        listen(dev->listen_fd, 128) < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
                    "cannot listen on vsock socket '%s': %s", dev->socket_path,
                    g_strerror(errno));
        return false;
    }
    dev->socket_bound = true;
    uint32_t current = 0;
    dev->listen_watch.kind = WATCH_LISTENER;
    dev->listen_watch.owner = dev;
    vsock_epoll_set(dev, dev->listen_fd, &dev->listen_watch, &current, EPOLLIN);
    return true;
}

void vsock_unix_close_listener(struct virtio_vsock *dev)
{
    if (dev->listen_fd >= 0)
        close(dev->listen_fd);
    dev->listen_fd = -1;
    if (dev->socket_bound && unlink(dev->socket_path) < 0 && errno != ENOENT)
        g_warning("virtio-vsock: cannot remove '%s': %s", dev->socket_path, g_strerror(errno));
    dev->socket_bound = false;
}

void vsock_unix_accept(struct virtio_vsock *dev)
{
    for (;;) {
        int fd = accept4(dev->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR)
                g_message("virtio-vsock: accept: %s", g_strerror(errno));
            return;
        }
        struct vsock_handshake *hs = g_new0(struct vsock_handshake, 1);
        hs->fd = fd;
        hs->watch.kind = WATCH_HANDSHAKE;
        hs->watch.owner = hs;
        hs->deadline_us = g_get_monotonic_time() + VSOCK_HANDSHAKE_TIMEOUT_US;
        vsock_epoll_set(dev, fd, &hs->watch, &hs->epoll_events, EPOLLIN);
        dev->handshakes = g_list_prepend(dev->handshakes, hs);
    }
}

void vsock_unix_handshake_free(struct virtio_vsock *dev, struct vsock_handshake *hs)
{
    dev->handshakes = g_list_remove(dev->handshakes, hs);
    if (hs->fd >= 0) {
        vsock_epoll_remove(dev, hs->fd, &hs->epoll_events);
        close(hs->fd);
        hs->fd = -1;
    }
    hs->dead = true;
    dev->dead_handshakes = g_slist_prepend(dev->dead_handshakes, hs);
}

/* Tell the client why, then drop it. The listening socket is unaffected. */
static void refuse(struct virtio_vsock *dev, struct vsock_handshake *hs, const char *why)
{
    g_autofree char *line = g_strdup_printf("ERR %s\n", why);
    if (send(hs->fd, line, strlen(line), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        g_debug("virtio-vsock: could not tell a client '%s': %s", why, g_strerror(errno));
    /* Closing a UNIX socket with unread input resets it, and the client
     * would lose the line above: read out what is there (bounded). */
    char sink[256];
    for (int i = 0; i < 16 && recv(hs->fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
    vsock_unix_handshake_free(dev, hs);
}

bool vsock_parse_connect_line(const char *line, size_t len, uint32_t *port, GError **error)
{
    static const char prefix[] = "CONNECT ";
    size_t plen = sizeof prefix - 1;
    if (len < plen || memcmp(line, prefix, plen) != 0) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                    "expected 'CONNECT <port>'");
        return false;
    }
    uint64_t value = 0;
    size_t i = plen;
    if (i == len) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "CONNECT without a port");
        return false;
    }
    for (; i < len; i++) {
        if (line[i] < '0' || line[i] > '9' || value > UINT32_MAX) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                        "port must be a decimal number up to 4294967295");
            return false;
        }
        value = value * 10 + (uint64_t)(line[i] - '0');
    }
    if (value > UINT32_MAX) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                    "port must be a decimal number up to 4294967295");
        return false;
    }
    *port = (uint32_t)value;
    return true;
}

static uint32_t allocate_local_port(struct virtio_vsock *dev)
{
    uint32_t port;
    do {
        port = dev->next_local_port++;
        if (dev->next_local_port < VSOCK_LOCAL_PORT_FIRST)
            dev->next_local_port = VSOCK_LOCAL_PORT_FIRST;
    } while (vsock_local_port_in_use(dev, port));
    return port;
}

/* The CONNECT line is complete: hand the socket over to a connection. */
static void start_host_connection(struct virtio_vsock *dev, struct vsock_handshake *hs,
                                  uint32_t port)
{
    if (!virtio_mmio_is_active(&dev->transport)) {
        refuse(dev, hs, "the guest has no active vsock driver");
        return;
    }
    struct vsock_conn *conn = vsock_conn_new(dev, allocate_local_port(dev), port, BACKEND_UNIX,
                                             hs->fd);
    vsock_epoll_remove(dev, hs->fd, &hs->epoll_events);
    hs->fd = -1; /* now the connection's */
    vsock_unix_handshake_free(dev, hs);
    conn->host_initiated = true;
    conn->state = CONN_CONNECTING;
    conn->deadline_us = g_get_monotonic_time() + VSOCK_CONNECT_TIMEOUT_US;
    dev->counters.connections_host++;
    vsock_queue_ctrl(dev, conn->local_port, conn->peer_port, VIRTIO_VSOCK_OP_REQUEST, 0);
    vsock_conn_update_interest(dev, conn); /* HUP only, until the guest answers */
}

void vsock_unix_handshake_event(struct virtio_vsock *dev, struct vsock_handshake *hs)
{
    char buf[VSOCK_CONNECT_LINE_MAX];
    ssize_t n = recv(hs->fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        vsock_unix_handshake_free(dev, hs); /* the client left */
        return;
    }
    char *newline = memchr(buf, '\n', (size_t)n);
    if (!newline) {
        if ((size_t)n == sizeof buf)
            refuse(dev, hs, "CONNECT line too long");
        return; /* wait for the rest of the line */
    }
    size_t line_len = (size_t)(newline - buf);
    /* Consume exactly the line; anything behind it is stream data. */
    if (recv(hs->fd, buf, line_len + 1, MSG_DONTWAIT) != (ssize_t)(line_len + 1)) {
        vsock_unix_handshake_free(dev, hs);
        return;
    }
    if (line_len > 0 && buf[line_len - 1] == '\r')
        line_len--;
    uint32_t port;
    g_autoptr(GError) error = NULL;
    if (!vsock_parse_connect_line(buf, line_len, &port, &error))
        refuse(dev, hs, error->message);
    else
        start_host_connection(dev, hs, port);
}

void vsock_unix_check_timeouts(struct virtio_vsock *dev, gint64 now_us)
{
    GList *next;
    for (GList *l = dev->handshakes; l; l = next) {
        next = l->next;
        struct vsock_handshake *hs = l->data;
        if (now_us >= hs->deadline_us)
            refuse(dev, hs, "no CONNECT line in time");
    }
}

int vsock_unix_dial(struct virtio_vsock *dev, uint32_t port)
{
    g_autofree char *path = g_strdup_printf("%s_%u", dev->socket_path, port);
    struct sockaddr_un addr;
    g_autoptr(GError) error = NULL;
    if (!make_address(path, &addr, &error)) {
        vsock_log_guest_error(dev, "guest connection to port %u: %s", port, error->message);
        return -1;
    }
    /* Non-blocking: a UNIX connect completes at once, or fails at once with
     * EAGAIN when the listener's backlog is full. A blocking one would stall
     * the device thread (and with it every vCPU touching the device). */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

bool vsock_unix_send_ok(struct vsock_conn *conn)
{
    char line[32];
    int len = snprintf(line, sizeof line, "OK %u\n", conn->local_port);
    /* The socket's send buffer is empty this early, so a short line fits. */
    return send(conn->fd, line, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) == len;
}
