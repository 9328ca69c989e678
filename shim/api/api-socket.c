/* Opening the API socket (see api-socket.h). */
#define G_LOG_DOMAIN "vsnap-shim"

#include "api-socket.h"

#include <errno.h>
#include <stdio.h> /* rename */
#include <gio/gunixsocketaddress.h>
#include <string.h>
#include <sys/socket.h> /* SOMAXCONN */
#include <sys/stat.h>
#include <unistd.h>

#include "api/options.h"

/* A socket file nobody listens on is what a killed shim leaves behind: replace
 * it. One somebody answers on belongs to a live process: refuse. */
static bool remove_stale_socket(const char *path, GError **error)
{
    struct stat st;

    if (lstat(path, &st) != 0)
        return true;
    if (!S_ISSOCK(st.st_mode)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_EXISTS,
                    "--api-socket: %s exists and is not a socket", path);
        return false;
    }
    g_autoptr(GSocket) probe = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, 0, NULL);
    g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(path);
    if (probe && g_socket_connect(probe, addr, NULL, NULL)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE,
                    "--api-socket: %s is in use by another process", path);
        return false;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
                    "--api-socket: cannot remove the stale socket %s: %s", path, g_strerror(errno));
        return false;
    }
    return true;
}

/* GLib's default backlog is 10: an eleventh client connecting while the main
 * loop is busy (a snapshot, a burst of clients) would be refused with EAGAIN.
 * The kernel caps SOMAXCONN at net.core.somaxconn. */
static bool start_listening(GSocket *sock, GError **error)
{
    g_socket_set_listen_backlog(sock, SOMAXCONN);
    return g_socket_listen(sock, error);
}

/* Bound and listening under a temporary name, then renamed into place: a
 * client that sees the path can connect at once (no window between bind and
 * listen in which it would be refused). */
static GSocket *bind_socket_path(const char *path, GError **error)
{
    if (!remove_stale_socket(path, error))
        return NULL;
    g_autofree char *tmp = g_strdup_printf("%s.%d.tmp", path, (int)getpid());
    unlink(tmp);
    g_autoptr(GSocket) sock = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, 0, error);
    g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(tmp);
    if (!sock || !g_socket_bind(sock, addr, FALSE, error) || !start_listening(sock, error)) {
        g_prefix_error(error, "--api-socket %s: ", path);
        unlink(tmp);
        return NULL;
    }
    if (rename(tmp, path) != 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
                    "--api-socket %s: cannot move the socket into place: %s", path,
                    g_strerror(errno));
        unlink(tmp);
        return NULL;
    }
    return g_steal_pointer(&sock);
}

static GSocket *adopt_socket_fd(const char *text, GError **error)
{
    uint64_t fd;

    if (!parse_uint(text, G_MAXINT, &fd, error)) {
        g_prefix_error(error, "--api-socket fd=: ");
        return NULL;
    }
    struct stat st;
    if (fstat((int)fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "--api-socket fd=%d: not an open socket", (int)fd);
        return NULL;
    }
    g_autoptr(GSocket) sock = g_socket_new_from_fd((int)fd, error);
    if (!sock || !start_listening(sock, error)) {
        g_prefix_error(error, "--api-socket fd=%d: ", (int)fd);
        return NULL;
    }
    return g_steal_pointer(&sock);
}

/* "path=P", "fd=N", or a bare path as Cloud Hypervisor also accepts. */
GSocket *api_socket_open(const char *spec, char **bound_path, GError **error)
{
    static const char *const keys[] = { "path", "fd", NULL };

    if (spec && !strchr(spec, '=')) {
        *bound_path = g_strdup(spec);
        return bind_socket_path(spec, error);
    }
    g_autoptr(option_list) opts = option_list_parse("--api-socket", spec, keys, error);
    if (!opts)
        return NULL;
    const char *path = option_list_get(opts, "path");
    const char *fd = option_list_get(opts, "fd");
    if ((path == NULL) == (fd == NULL) || (path && !*path)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "--api-socket: give exactly one of path=<socket> or fd=<n>");
        return NULL;
    }
    if (fd)
        return adopt_socket_fd(fd, error);
    *bound_path = g_strdup(path);
    return bind_socket_path(path, error);
}
