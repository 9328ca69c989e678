#include "rpc/client.h"

#include <errno.h>
#include <libvirt/virterror.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long a send may wait for a client that does not read before the
 * client is dropped; keeps one stuck client from holding a worker forever. */
#define SEND_TIMEOUT_MS 30000

struct rpc_client *rpc_client_new(struct rpc_server *server, int fd, bool readonly_socket,
                                  uid_t uid, pid_t pid)
{
    struct rpc_client *client = g_new0(struct rpc_client, 1);
    client->refs = 1;
    client->server = server;
    client->fd = fd;
    client->readonly_socket = readonly_socket;
    client->readonly = readonly_socket;
    client->uid = uid;
    client->pid = pid;
    client->peer.uid = uid;
    client->peer.gid = (gid_t)-1;   /* no group until SO_PEERCRED says so */
    g_mutex_init(&client->lock);
    return client;
}

struct rpc_client *rpc_client_ref(struct rpc_client *client)
{
    g_atomic_int_inc(&client->refs);
    return client;
}

void rpc_client_unref(struct rpc_client *client)
{
    if (!client || !g_atomic_int_dec_and_test(&client->refs))
        return;
    if (client->fd >= 0)
        close(client->fd);
    g_free(client->body);
    g_mutex_clear(&client->lock);
    g_free(client);
}

void rpc_client_set_peer_groups(struct rpc_client *client, gid_t gid, const gid_t *groups,
                                int ngroups)
{
    client->peer.gid = gid;
    client->peer.ngroups = CLAMP(ngroups, 0, CALLER_MAX_GROUPS);
    memcpy(client->peer.groups, groups, sizeof(gid_t) * client->peer.ngroups);
}

const struct caller *rpc_client_caller(struct rpc_client *client)
{
    return client->readonly_socket ? &client->peer : &caller_daemon;
}

void rpc_client_set_opened(struct rpc_client *client, bool readonly)
{
    g_mutex_lock(&client->lock);
    client->readonly = client->readonly_socket || readonly;
    g_atomic_int_set(&client->opened, 1);
    g_mutex_unlock(&client->lock);
}

bool rpc_client_is_readonly(struct rpc_client *client)
{
    g_mutex_lock(&client->lock);
    bool ro = client->readonly || client->readonly_socket;
    g_mutex_unlock(&client->lock);
    return ro;
}

bool rpc_client_is_opened(struct rpc_client *client)
{
    return g_atomic_int_get(&client->opened) != 0;
}

/* Serialise length word + header + body. The buffer grows until the packet
 * fits or exceeds the protocol's limit. */
static uint8_t *encode_packet(const struct wire_header *hdr, xdrproc_t body_filter, void *body,
                              size_t *out_len)
{
    static const size_t sizes[] = {64 * 1024, 1024 * 1024, 8 * 1024 * 1024,
                                   RPC_MESSAGE_MAX + RPC_LEN_WORD_SIZE};
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
        size_t size = sizes[i];
        uint8_t *buf = g_malloc(size);
        XDR xdrs;
        xdrmem_create(&xdrs, (char *)buf, size, XDR_ENCODE);
        uint32_t len = 0;
        struct wire_header h = *hdr;
        bool ok = xdr_u_int(&xdrs, &len) && xdr_wire_header(&xdrs, &h) &&
                  (!body_filter || body_filter(&xdrs, body, 0));
        if (ok) {
            len = xdr_getpos(&xdrs);
            xdr_setpos(&xdrs, 0);
            xdr_u_int(&xdrs, &len);
            xdr_destroy(&xdrs);
            *out_len = len;
            return buf;
        }
        xdr_destroy(&xdrs);
        g_free(buf);
    }
    return NULL;
}

static bool write_all(int fd, const uint8_t *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            if (poll(&pfd, 1, SEND_TIMEOUT_MS) <= 0)
                return false;
            continue;
        }
        return false;
    }
    return true;
}

bool rpc_client_send(struct rpc_client *client, const struct wire_header *hdr,
                     xdrproc_t body_filter, void *body)
{
    size_t len;
    g_autofree uint8_t *buf = encode_packet(hdr, body_filter, body, &len);
    if (!buf) {
        /* Too large even at the protocol limit: tell the client rather than
         * leave it waiting for a reply that never comes. */
        g_warning("reply to procedure %d does not fit in %u bytes", hdr->proc, RPC_MESSAGE_MAX);
        if (hdr->type == RPC_REPLY && hdr->status == RPC_STATUS_OK)
            return rpc_send_error_reply(client, hdr, VIR_ERR_RPC, VIR_FROM_RPC,
                                        "reply is larger than the protocol's message limit");
        return false;
    }
    g_mutex_lock(&client->lock);
    bool ok = !client->closed && write_all(client->fd, buf, len);
    g_mutex_unlock(&client->lock);
    if (!ok)
        rpc_client_close(client);
    return ok;
}

bool rpc_client_send_raw(struct rpc_client *client, const struct wire_header *hdr,
                         const void *data, size_t len)
{
    if (len > RPC_MESSAGE_MAX - RPC_HEADER_SIZE)
        return false;
    g_autofree uint8_t *buf = g_malloc(RPC_LEN_WORD_SIZE + RPC_HEADER_SIZE + len);
    XDR xdrs;
    uint32_t total = RPC_LEN_WORD_SIZE + RPC_HEADER_SIZE + len;
    struct wire_header h = *hdr;
    xdrmem_create(&xdrs, (char *)buf, RPC_LEN_WORD_SIZE + RPC_HEADER_SIZE, XDR_ENCODE);
    bool ok = xdr_u_int(&xdrs, &total) && xdr_wire_header(&xdrs, &h);
    xdr_destroy(&xdrs);
    if (!ok)
        return false;
    if (len)
        memcpy(buf + RPC_LEN_WORD_SIZE + RPC_HEADER_SIZE, data, len);
    g_mutex_lock(&client->lock);
    ok = !client->closed && write_all(client->fd, buf, total);
    g_mutex_unlock(&client->lock);
    if (!ok)
        rpc_client_close(client);
    return ok;
}


void rpc_client_close(struct rpc_client *client)
{
    g_mutex_lock(&client->lock);
    if (!client->closed) {
        client->closed = true;
        /* Wakes the main loop's watch with EOF; the fd itself is closed only
         * when the last reference goes, so no thread writes to a reused fd. */
        shutdown(client->fd, SHUT_RDWR);
    }
    g_mutex_unlock(&client->lock);
}

/* libvirt prefixes each message with the text of its code (virErrorMsg); we
 * do the same so virsh prints what people are used to. */
static const char *code_prefix(int code)
{
    switch (code) {
    case VIR_ERR_INTERNAL_ERROR: return "internal error";
    case VIR_ERR_NO_SUPPORT: return "this function is not supported by the connection driver";
    case VIR_ERR_INVALID_ARG: return "invalid argument";
    case VIR_ERR_OPERATION_FAILED: return "operation failed";
    case VIR_ERR_XML_ERROR: return "XML error";
    case VIR_ERR_XML_DETAIL: return "XML error";
    case VIR_ERR_NO_DOMAIN: return "Domain not found";
    case VIR_ERR_OPERATION_INVALID: return "Requested operation is not valid";
    case VIR_ERR_OPERATION_DENIED: return "operation forbidden";
    case VIR_ERR_OPERATION_UNSUPPORTED: return "Operation not supported";
    case VIR_ERR_CONFIG_UNSUPPORTED: return "unsupported configuration";
    case VIR_ERR_RPC: return "RPC error";
    case VIR_ERR_OPERATION_TIMEOUT: return "Timed out during operation";
    case VIR_ERR_OPERATION_ABORTED: return "operation aborted";
    case VIR_ERR_NO_DOMAIN_SNAPSHOT: return "Domain snapshot not found";
    case VIR_ERR_DOM_EXIST: return "operation failed";
    case VIR_ERR_SYSTEM_ERROR: return "system error";
    default: return NULL;
    }
}

bool rpc_send_error_reply(struct rpc_client *client, const struct wire_header *call_hdr,
                          int code, int domain, const char *message)
{
    const char *prefix = code_prefix(code);
    g_autofree char *text = NULL;
    if (prefix && !g_str_has_prefix(message, prefix))
        text = g_strdup_printf("%s: %s", prefix, message);
    else
        text = g_strdup(message);
    struct wire_error err = {
        .code = code, .domain = domain, .message = text, .level = VIR_ERR_ERROR,
        .str1 = text, .int1 = -1,
    };
    struct wire_header hdr = *call_hdr;
    hdr.type = RPC_REPLY;
    hdr.status = RPC_STATUS_ERROR;
    return rpc_client_send(client, &hdr, XDR_PROC(xdr_wire_error), &err);
}
