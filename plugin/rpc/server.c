#include "server.h"

#include <errno.h>
#include <glib-unix.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "dispatch.h"
#include "events-registry.h"
#include "stream.h"

/* How long a send may wait for a client that does not read before the
 * client is dropped; keeps one stuck client from holding a worker forever. */
#define SEND_TIMEOUT_MS 30000
#define WORKER_THREADS 32
/* libvirt clients wait for each reply (a threaded client has a few calls
 * out at once); with this many running, the daemon stops reading from the
 * client until one finishes, so a client that pipelines calls neither queues
 * unbounded memory in the daemon nor makes the main loop write to it. */
#define MAX_CALLS_PER_CLIENT 16
#define MAX_CLIENTS 1024

struct listener {
    int fd;
    bool readonly;
    GSource *source;
    struct rpc_server *server;
};

struct rpc_server {
    struct vsnap_driver *driver;
    GPtrArray *listeners;      /* struct listener * */
    GMutex lock;               /* protects clients */
    GPtrArray *clients;        /* struct rpc_client * (one reference each) */
    unsigned next_client_id;
    uid_t owner_uid;
    GThreadPool *pool;
    struct event_registry *events;
    struct stream_registry *streams;
};

struct rpc_job {
    struct rpc_client *client;
    struct wire_header hdr;
    uint8_t *body;
    size_t body_len;
};

static void client_close(struct rpc_client *client);
static void watch_client(struct rpc_client *client);

/* ---- client references and sending ---- */

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
    g_free(client->msg);
    g_mutex_clear(&client->lock);
    g_free(client);
}

void rpc_client_set_opened(struct rpc_client *client, bool readonly)
{
    g_mutex_lock(&client->lock);
    client->opened = true;
    client->readonly = client->readonly_socket || readonly;
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
    g_mutex_lock(&client->lock);
    bool opened = client->opened;
    g_mutex_unlock(&client->lock);
    return opened;
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
        client_close(client);
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
        client_close(client);
    return ok;
}

/* ---- reading and framing (main loop) ---- */

static void client_close(struct rpc_client *client)
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

static void client_remove(struct rpc_client *client)
{
    struct rpc_server *server = client->server;
    client_close(client);
    if (client->source) {
        g_source_destroy(client->source);
        g_source_unref(client->source);
        client->source = NULL;
    }
    client->reading_paused = false;
    event_registry_remove_client(server->events, client);
    stream_registry_remove_client(server->streams, client);
    g_mutex_lock(&server->lock);
    bool found = g_ptr_array_remove(server->clients, client);
    g_mutex_unlock(&server->lock);
    if (found)
        rpc_client_unref(client);
}

static void job_free(struct rpc_job *job)
{
    rpc_client_unref(job->client);
    g_free(job->body);
    g_free(job);
}

/* Main loop: a call finished on a client whose reading was paused at the
 * limit; watch it again. Not client->lock: a worker may hold it for a long
 * send. A client closed meanwhile was shut down, so the new watch sees its
 * EOF and removes it as usual. */
static gboolean resume_reading(gpointer data)
{
    struct rpc_client *client = data;
    if (!client->reading_paused ||
        g_atomic_int_get(&client->calls_in_flight) >= MAX_CALLS_PER_CLIENT)
        return G_SOURCE_REMOVE;
    client->reading_paused = false;
    watch_client(client);
    return G_SOURCE_REMOVE;
}

static void worker(gpointer data, gpointer user_data)
{
    struct rpc_job *job = data;
    rpc_dispatch_call(user_data, job->client, &job->hdr, job->body, job->body_len);
    /* Dropping from the limit is what the main loop may be waiting for. */
    if (g_atomic_int_add(&job->client->calls_in_flight, -1) == MAX_CALLS_PER_CLIENT)
        g_main_context_invoke_full(NULL, G_PRIORITY_DEFAULT, resume_reading,
                                   rpc_client_ref(job->client),
                                   (GDestroyNotify)rpc_client_unref);
    job_free(job);
}

static void answer_keepalive(struct rpc_client *client, const struct wire_header *hdr)
{
    if (hdr->proc != KEEPALIVE_PROC_PING)
        return;   /* PONG answers to our own pings, which we do not send */
    struct wire_header pong = {
        .prog = KEEPALIVE_PROGRAM, .vers = KEEPALIVE_PROTOCOL_VERSION,
        .proc = KEEPALIVE_PROC_PONG, .type = RPC_MESSAGE, .serial = 0, .status = RPC_STATUS_OK,
    };
    rpc_client_send(client, &pong, NULL, NULL);
}

/* One complete packet. Returns false when the connection must be dropped. */
static bool handle_packet(struct rpc_client *client, uint8_t *msg, size_t len)
{
    XDR xdrs;
    struct wire_header hdr;
    xdrmem_create(&xdrs, (char *)msg, len, XDR_DECODE);
    bool ok = xdr_wire_header(&xdrs, &hdr);
    xdr_destroy(&xdrs);
    if (!ok)
        return false;

    if (hdr.prog == KEEPALIVE_PROGRAM) {
        if (hdr.type != RPC_MESSAGE)
            return false;
        answer_keepalive(client, &hdr);
        return true;
    }
    if (hdr.type == RPC_STREAM && hdr.prog == REMOTE_PROGRAM) {
        stream_handle_packet(client->server->streams, client, &hdr, msg + RPC_HEADER_SIZE,
                             len - RPC_HEADER_SIZE);
        return true;
    }
    if (hdr.type != RPC_CALL)
        return false;   /* anything else from a client is a protocol violation */
    if (hdr.prog != REMOTE_PROGRAM || hdr.vers != REMOTE_PROTOCOL_VERSION) {
        g_autofree char *text = g_strdup_printf(
            "unknown program 0x%x version %u (virtvsnapd serves 0x%x version %u)", hdr.prog,
            hdr.vers, REMOTE_PROGRAM, REMOTE_PROTOCOL_VERSION);
        rpc_send_error_reply(client, &hdr, VIR_ERR_RPC, VIR_FROM_RPC, text);
        return true;
    }
    g_atomic_int_inc(&client->calls_in_flight);
    struct rpc_job *job = g_new0(struct rpc_job, 1);
    job->client = rpc_client_ref(client);
    job->hdr = hdr;
    job->body_len = len - RPC_HEADER_SIZE;
    job->body = g_memdup2(msg + RPC_HEADER_SIZE, job->body_len);
    g_thread_pool_push(client->server->pool, job, NULL);
    return true;
}

/* Stop watching the client's socket while it has the most calls running;
 * the worker that finishes one resumes it (resume_reading). */
static void pause_reading(struct rpc_client *client)
{
    client->reading_paused = true;
    g_source_destroy(client->source);
    g_source_unref(client->source);
    client->source = NULL;
}

/* Read what is available; false on EOF, error or a malformed frame. */
static bool client_read(struct rpc_client *client)
{
    for (;;) {
        if (client->len_have == 0 &&
            g_atomic_int_get(&client->calls_in_flight) >= MAX_CALLS_PER_CLIENT) {
            pause_reading(client);
            return true;
        }
        uint8_t *dst;
        size_t want;
        if (client->len_have < RPC_LEN_WORD_SIZE) {
            dst = client->len_buf + client->len_have;
            want = RPC_LEN_WORD_SIZE - client->len_have;
        } else {
            dst = client->msg + client->msg_have;
            want = client->msg_len - client->msg_have;
        }
        ssize_t n = recv(client->fd, dst, want, 0);
        if (n == 0)
            return false;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;

        if (client->len_have < RPC_LEN_WORD_SIZE) {
            client->len_have += n;
            if (client->len_have < RPC_LEN_WORD_SIZE)
                continue;
            uint32_t total = (uint32_t)client->len_buf[0] << 24 | client->len_buf[1] << 16 |
                             client->len_buf[2] << 8 | client->len_buf[3];
            if (total < RPC_LEN_WORD_SIZE + RPC_HEADER_SIZE ||
                total > RPC_LEN_WORD_SIZE + RPC_MESSAGE_MAX) {
                g_message("client %u: packet length %u outside [%u, %u], closing", client->id,
                          total, RPC_LEN_WORD_SIZE + RPC_HEADER_SIZE,
                          RPC_LEN_WORD_SIZE + RPC_MESSAGE_MAX);
                return false;
            }
            client->msg_len = total - RPC_LEN_WORD_SIZE;
            client->msg_have = 0;
            client->msg = g_malloc(client->msg_len);
            continue;
        }
        client->msg_have += n;
        if (client->msg_have < client->msg_len)
            continue;
        uint8_t *msg = client->msg;
        size_t len = client->msg_len;
        client->msg = NULL;
        client->len_have = 0;
        bool ok = handle_packet(client, msg, len);
        g_free(msg);
        if (!ok) {
            g_message("client %u: malformed packet, closing", client->id);
            return false;
        }
    }
}

static gboolean on_client_io(gint fd, GIOCondition cond, gpointer data)
{
    struct rpc_client *client = data;
    if ((cond & G_IO_IN) && client_read(client))
        return G_SOURCE_CONTINUE;
    if (!(cond & G_IO_IN) && !(cond & (G_IO_HUP | G_IO_ERR)))
        return G_SOURCE_CONTINUE;
    client_remove(client);
    return G_SOURCE_REMOVE;
}

/* ---- listening ---- */

static gboolean on_accept(gint fd, GIOCondition cond, gpointer data)
{
    struct listener *lst = data;
    struct rpc_server *server = lst->server;
    int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) {
        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
            g_warning("accept: %s", g_strerror(errno));
        return G_SOURCE_CONTINUE;
    }
    struct ucred cred;
    socklen_t clen = sizeof(cred);
    if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
        g_warning("SO_PEERCRED: %s; refusing the connection", g_strerror(errno));
        close(cfd);
        return G_SOURCE_CONTINUE;
    }
    if (rpc_server_client_count(server) >= MAX_CLIENTS) {
        g_message("refusing connection from pid %d: %d clients already", cred.pid, MAX_CLIENTS);
        close(cfd);
        return G_SOURCE_CONTINUE;
    }
    if (!lst->readonly && cred.uid != server->owner_uid && cred.uid != 0) {
        g_message("refusing read-write connection from uid %u (pid %d): only uid %u may use it",
                  cred.uid, cred.pid, server->owner_uid);
        close(cfd);
        return G_SOURCE_CONTINUE;
    }
    struct rpc_client *client = g_new0(struct rpc_client, 1);
    client->refs = 1;
    client->server = server;
    client->fd = cfd;
    client->readonly_socket = lst->readonly;
    client->readonly = lst->readonly;
    client->uid = cred.uid;
    client->pid = cred.pid;
    g_mutex_init(&client->lock);
    g_mutex_lock(&server->lock);
    client->id = ++server->next_client_id;
    g_ptr_array_add(server->clients, client);
    g_mutex_unlock(&server->lock);
    watch_client(client);
    return G_SOURCE_CONTINUE;
}

static void watch_client(struct rpc_client *client)
{
    client->source = g_unix_fd_source_new(client->fd, G_IO_IN | G_IO_HUP | G_IO_ERR);
    g_source_set_callback(client->source, (GSourceFunc)(void (*)(void))on_client_io, client,
                          NULL);
    g_source_attach(client->source, NULL);
}

bool rpc_server_listen_fd(struct rpc_server *server, int fd, bool readonly, GError **error)
{
    if (!g_unix_set_fd_nonblocking(fd, TRUE, error))
        return false;
    struct listener *lst = g_new0(struct listener, 1);
    lst->fd = fd;
    lst->readonly = readonly;
    lst->server = server;
    lst->source = g_unix_fd_source_new(fd, G_IO_IN);
    g_source_set_callback(lst->source, (GSourceFunc)(void (*)(void))on_accept, lst, NULL);
    g_source_attach(lst->source, NULL);
    g_ptr_array_add(server->listeners, lst);
    return true;
}

/* A socket file nobody answers on is left over from a crash: replace it. */
static bool remove_stale_socket(const char *path, struct sockaddr_un *addr, GError **error)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return true;
    if (!S_ISSOCK(st.st_mode)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                    "%s exists and is not a socket; not replacing it", path);
        return false;
    }
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && connect(probe, (struct sockaddr *)addr, sizeof(*addr)) == 0;
    if (probe >= 0)
        close(probe);
    if (live) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                    "another daemon is already listening on %s", path);
        return false;
    }
    unlink(path);
    return true;
}

bool rpc_server_listen_path(struct rpc_server *server, const char *path, bool readonly,
                            GError **error)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(addr.sun_path)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NAMETOOLONG,
                    "socket path %s is longer than %zu bytes", path, sizeof(addr.sun_path) - 1);
        return false;
    }
    strcpy(addr.sun_path, path);
    if (!remove_stale_socket(path, &addr, error))
        return false;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        chmod(path, readonly ? 0777 : 0700) < 0 || listen(fd, 64) < 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err), "cannot listen on %s: %s",
                    path, g_strerror(err));
        return false;
    }
    return rpc_server_listen_fd(server, fd, readonly, error);
}

/* ---- server object ---- */

struct rpc_server *rpc_server_new(struct vsnap_driver *driver)
{
    struct rpc_server *server = g_new0(struct rpc_server, 1);
    server->driver = driver;
    server->listeners = g_ptr_array_new();
    server->clients = g_ptr_array_new();
    server->owner_uid = geteuid();
    g_mutex_init(&server->lock);
    server->pool = g_thread_pool_new(worker, server, WORKER_THREADS, FALSE, NULL);
    server->events = event_registry_new(driver);
    server->streams = stream_registry_new();
    return server;
}

void rpc_server_free(struct rpc_server *server)
{
    if (!server)
        return;
    for (guint i = 0; i < server->listeners->len; i++) {
        struct listener *lst = server->listeners->pdata[i];
        g_source_destroy(lst->source);
        g_source_unref(lst->source);
        close(lst->fd);
        g_free(lst);
    }
    g_ptr_array_free(server->listeners, TRUE);
    while (server->clients->len > 0)
        client_remove(server->clients->pdata[0]);
    g_thread_pool_free(server->pool, FALSE, TRUE);
    event_registry_free(server->events);
    stream_registry_free(server->streams);
    g_ptr_array_free(server->clients, TRUE);
    g_mutex_clear(&server->lock);
    g_free(server);
}

unsigned rpc_server_client_count(struct rpc_server *server)
{
    g_mutex_lock(&server->lock);
    unsigned n = server->clients->len;
    g_mutex_unlock(&server->lock);
    return n;
}

struct vsnap_driver *rpc_server_driver(struct rpc_server *server)
{
    return server->driver;
}

struct event_registry *rpc_server_events(struct rpc_server *server)
{
    return server->events;
}

struct stream_registry *rpc_server_streams(struct rpc_server *server)
{
    return server->streams;
}

void rpc_server_set_owner_uid(struct rpc_server *server, uid_t uid)
{
    server->owner_uid = uid;
}
