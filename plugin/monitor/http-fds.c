#include "http-fds.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/virt-error.h"

/* An answer larger than this is not the shim's. */
#define ANSWER_MAX_BYTES (4u << 20)

static bool failed(GError **error, const char *socket_path, const char *what, int err)
{
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "cannot reach the VM's API at %s: %s%s%s",
                socket_path, what, err ? ": " : "", err ? g_strerror(err) : "");
    return false;
}

static int connect_to(const char *socket_path, GError **error)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof(addr.sun_path)) {
        failed(error, socket_path, "the socket's path is too long", 0);
        return -1;
    }
    strcpy(addr.sun_path, socket_path);
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0 || connect(sock, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        int err = errno;
        if (sock >= 0)
            close(sock);
        failed(error, socket_path, "connect", err);
        return -1;
    }
    return sock;
}

static int remaining_ms(gint64 deadline)
{
    gint64 left = (deadline - g_get_monotonic_time()) / 1000;
    return left > 0 ? (int)MIN(left, INT32_MAX) : 0;
}

/* Wait until sock is ready for events; false on timeout. */
static bool wait_for(int sock, short events, gint64 deadline)
{
    struct pollfd pfd = {.fd = sock, .events = events};
    int rc;
    do {
        rc = poll(&pfd, 1, remaining_ms(deadline));
    } while (rc < 0 && errno == EINTR);
    return rc > 0;
}

/* The whole request; the descriptors ride with the first sendmsg. */
static bool send_request(int sock, const GString *request, const int *fds, size_t n_fds, gint64 deadline,
                         int *err)
{
    size_t sent = 0;
    while (sent < request->len) {
        if (!wait_for(sock, POLLOUT, deadline)) {
            *err = ETIMEDOUT;
            return false;
        }
        struct iovec iov = {.iov_base = request->str + sent, .iov_len = request->len - sent};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        union {
            char buf[CMSG_SPACE(sizeof(int) * HTTP_FDS_MAX)];
            struct cmsghdr align;
        } control;
        if (sent == 0 && n_fds > 0) {
            memset(&control, 0, sizeof(control));
            msg.msg_control = control.buf;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
            struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
            cmsg->cmsg_level = SOL_SOCKET;
            cmsg->cmsg_type = SCM_RIGHTS;
            cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
            memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * n_fds);
        }
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0) {
            *err = errno;
            return false;
        }
        sent += (size_t)n;
    }
    return true;
}

/* Where the body starts and how long it is (-1: to the end), once the
 * headers are complete; false while they are not. */
static bool parse_head(const GString *answer, long *status, size_t *body_start, gssize *length)
{
    const char *end = g_strstr_len(answer->str, (gssize)answer->len, "\r\n\r\n");
    if (!end)
        return false;
    *body_start = (size_t)(end - answer->str) + 4;
    *status = 0;
    *length = -1;
    if (sscanf(answer->str, "HTTP/1.%*d %ld", status) != 1)
        *status = -1;
    g_autofree char *head = g_ascii_strdown(answer->str, (gssize)*body_start);
    const char *cl = strstr(head, "\r\ncontent-length:");
    if (cl)
        *length = (gssize)g_ascii_strtoll(cl + strlen("\r\ncontent-length:"), NULL, 10);
    return true;
}

static bool read_answer(int sock, GString *answer, long *status, size_t *body_start, gint64 deadline, int *err)
{
    gssize length = -1;
    bool have_head = false;
    char buf[16384];
    for (;;) {
        if (have_head && length >= 0 && answer->len >= *body_start + (size_t)length)
            return true;
        if (!wait_for(sock, POLLIN, deadline)) {
            *err = ETIMEDOUT;
            return false;
        }
        ssize_t n = recv(sock, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0) {
            *err = errno;
            return false;
        }
        if (n == 0)
            return have_head || (*err = ECONNRESET, false);
        g_string_append_len(answer, buf, n);
        if (answer->len > ANSWER_MAX_BYTES) {
            *err = EMSGSIZE;
            return false;
        }
        if (!have_head)
            have_head = parse_head(answer, status, body_start, &length);
    }
}

bool http_fds_request(const char *socket_path, const char *method, const char *uri_path, const char *json,
                      const int *fds, size_t n_fds, long timeout_ms, long *status, GString *body,
                      GError **error)
{
    *status = 0;
    if (n_fds > HTTP_FDS_MAX)
        return failed(error, socket_path, "too many descriptors for one request", 0);
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    int sock = connect_to(socket_path, error);
    if (sock < 0)
        return false;
    size_t len = json ? strlen(json) : 0;
    g_autoptr(GString) request = g_string_new(NULL);
    g_string_printf(request,
                    "%s %s HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\nConnection: close\r\n"
                    "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                    method, uri_path, len);
    g_string_append_len(request, json ? json : "", (gssize)len);
    g_autoptr(GString) answer = g_string_new(NULL);
    size_t body_start = 0;
    int err = 0;
    bool ok = send_request(sock, request, fds, n_fds, deadline, &err) &&
              read_answer(sock, answer, status, &body_start, deadline, &err);
    close(sock);
    if (!ok && err == ETIMEDOUT) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_TIMEOUT,
                    "the VM's API at %s did not answer %s within %ld s", socket_path, uri_path, timeout_ms / 1000);
        return false;
    }
    if (!ok)
        return failed(error, socket_path, uri_path, err);
    if (*status <= 0)
        return failed(error, socket_path, "the answer is not HTTP", 0);
    g_string_assign(body, answer->str + body_start);
    return true;
}
