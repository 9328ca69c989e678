#include "server.h"

#include <errno.h>
#include <glib-unix.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "dispatch.h"
#include "event-registry.h"
#include "stream.h"

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
    struct rpc_context ctx;    /* driver, event registry, streams */
    GPtrArray *listeners;      /* struct listener * */
    GMutex lock;               /* protects clients */
    GPtrArray *clients;        /* struct rpc_client * (one reference each) */
    unsigned next_client_id;
    uid_t owner_uid;
    GThreadPool *pool;
};

struct rpc_job {
    struct rpc_client *client;
    struct wire_header hdr;
    uint8_t *body;
    size_t body_len;
};

static void watch_client(struct rpc_client *client);

/* ---- reading and framing (main loop) ---- */

static void client_remove(struct rpc_client *client)
{
    struct rpc_server *server = client->server;
    rpc_client_close(client);
    if (client->source) {
        g_source_destroy(client->source);
        g_source_unref(client->source);
        client->source = NULL;
    }
    client->reading_paused = false;
    event_registry_remove_client(server->ctx.events, client);
    stream_registry_remove_client(server->ctx.streams, client);
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
    struct rpc_server *server = user_data;
    rpc_dispatch_call(&server->ctx, job->client, &job->hdr, job->body, job->body_len);
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
        stream_handle_packet(client->server->ctx.streams, client, &hdr, msg + RPC_HEADER_SIZE,
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
    struct rpc_client *client = rpc_client_new(server, cfd, lst->readonly, cred.uid, cred.pid);
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
    server->ctx.driver = driver;
    server->listeners = g_ptr_array_new();
    server->clients = g_ptr_array_new();
    server->owner_uid = geteuid();
    g_mutex_init(&server->lock);
    server->pool = g_thread_pool_new(worker, server, WORKER_THREADS, FALSE, NULL);
    server->ctx.events = event_registry_new(driver);
    server->ctx.streams = stream_registry_new();
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
    event_registry_free(server->ctx.events);
    stream_registry_free(server->ctx.streams);
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

void rpc_server_set_owner_uid(struct rpc_server *server, uid_t uid)
{
    server->owner_uid = uid;
}
