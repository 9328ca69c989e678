#include "rpc/server.h"

#include <errno.h>
#include <glib-unix.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rpc/client.h"
#include "rpc/dispatch.h"
#include "event-registry.h"
#include "stream.h"

/* Messages of clients that have not opened a read-write connection: before
 * CONNECT_OPEN (any socket) and from the read-only socket. What they may
 * send (the handshake, look-ups, a path) fits easily; only the owner on the
 * read-write socket sends definitions and stream data. */
#define LIMITED_MESSAGE_MAX (64u * 1024)
/* Bytes that all read-only clients together may hold in the daemon: packets
 * being received and calls waiting for a worker. A read-only client whose
 * packet would go beyond is dropped. */
#define READONLY_BYTES_MAX (32u * 1024 * 1024)
/* A packet's buffer starts this large and doubles as its data arrives, so
 * announcing a large packet costs nothing until it is actually sent. */
#define BODY_FIRST_CHUNK (16u * 1024)
/* After accept() ran out of file descriptors (or memory), wait this long
 * before trying again instead of spinning on a listening socket that stays
 * readable. */
#define ACCEPT_BACKOFF_MS 250

struct listener {
    int fd;
    bool readonly;
    GSource *source;           /* NULL while accepting is paused */
    struct rpc_server *server;
};

/* At most one line a second for messages a hostile peer can cause at will
 * (main loop only). */
struct log_limit {
    gint64 next_us;
    unsigned suppressed;
};

struct rpc_server {
    struct rpc_context ctx;    /* driver, event registry, streams */
    struct rpc_limits limits;
    GPtrArray *listeners;      /* struct listener * */
    GMutex lock;               /* protects clients */
    GPtrArray *clients;        /* struct rpc_client * (one reference each) */
    unsigned next_client_id;
    uid_t owner_uid;
    GThreadPool *pool;         /* calls of read-write clients */
    GThreadPool *ro_pool;      /* calls of read-only clients */
    GThreadPool *prio_pool;    /* read-write clients' calls that wait for no job, pool busy */
    gint busy;                 /* atomic: calls running or queued in pool */
    gint readonly_bytes;       /* atomic: held for read-only clients */
    guint backoff_source;      /* main loop: accepting resumes then; 0 when accepting */
    bool accept_paused;        /* main loop */
    struct log_limit refused_log, accept_log, dropped_log;   /* main loop */
};

struct rpc_job {
    struct rpc_client *client;
    bool counted;              /* in server->busy */
    struct wire_header hdr;
    uint8_t *body;
    size_t body_len;
    size_t charged;            /* of readonly_bytes */
};

static void watch_client(struct rpc_client *client);

static void limited_message(struct log_limit *l, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void limited_message(struct log_limit *l, const char *fmt, ...)
{
    gint64 now = g_get_monotonic_time();
    if (now < l->next_us) {
        l->suppressed++;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (l->suppressed)
        g_message("%s (and %u more like it in the last second)", text, l->suppressed);
    else
        g_message("%s", text);
    l->suppressed = 0;
    l->next_us = now + G_USEC_PER_SEC;
}

/* ---- the read-only clients' share of memory ---- */

static bool charge(struct rpc_server *server, size_t bytes)
{
    for (;;) {
        gint held = g_atomic_int_get(&server->readonly_bytes);
        if ((size_t)held + bytes > READONLY_BYTES_MAX)
            return false;
        if (g_atomic_int_compare_and_exchange(&server->readonly_bytes, held,
                                              held + (gint)bytes))
            return true;
    }
}

static void release(struct rpc_server *server, size_t bytes)
{
    if (bytes)
        g_atomic_int_add(&server->readonly_bytes, -(gint)bytes);
}

/* ---- reading and framing (main loop) ---- */

static void drop_partial_packet(struct rpc_client *client)
{
    release(client->server, client->charged);
    client->charged = 0;
    g_clear_pointer(&client->body, g_free);
    client->body_len = client->body_have = client->body_cap = 0;
    client->head_have = 0;
}

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
    drop_partial_packet(client);
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
    release(job->client->server, job->charged);
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
        g_atomic_int_get(&client->calls_in_flight) >=
            (gint)client->server->limits.max_client_requests)
        return G_SOURCE_REMOVE;
    client->reading_paused = false;
    watch_client(client);
    return G_SOURCE_REMOVE;
}

static void worker(gpointer data, gpointer user_data)
{
    struct rpc_job *job = data;
    struct rpc_server *server = user_data;
    struct rpc_client *client = job->client;
    rpc_dispatch_call(&server->ctx, client, &job->hdr, job->body, job->body_len);
    if (job->counted)
        g_atomic_int_add(&server->busy, -1);
    /* The call's memory goes before the client may send the next one. */
    g_clear_pointer(&job->body, g_free);
    release(server, job->charged);
    job->charged = 0;
    /* Dropping from the limit is what the main loop may be waiting for. */
    if (g_atomic_int_add(&client->calls_in_flight, -1) == (gint)server->limits.max_client_requests)
        g_main_context_invoke_full(NULL, G_PRIORITY_DEFAULT, resume_reading,
                                   rpc_client_ref(client),
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

/* What a client may send at all; anything else is a protocol violation. */
static bool header_acceptable(const struct wire_header *hdr)
{
    if (hdr->prog == KEEPALIVE_PROGRAM)
        return hdr->type == RPC_MESSAGE;
    if (hdr->type == RPC_STREAM)
        return hdr->prog == REMOTE_PROGRAM;
    return hdr->type == RPC_CALL;
}

/* What the main loop answers itself: keepalive, stream data, calls to a
 * program we do not serve. */
static void handle_here(struct rpc_client *client, const struct wire_header *h,
                        const uint8_t *body, size_t len)
{
    if (h->prog == KEEPALIVE_PROGRAM) {
        answer_keepalive(client, h);
    } else if (h->type == RPC_STREAM) {
        stream_handle_packet(client->server->ctx.streams, client, h, body, len);
    } else {
        g_autofree char *text = g_strdup_printf(
            "unknown program 0x%x version %u (virtvsnapd serves 0x%x version %u)", h->prog,
            h->vers, REMOTE_PROGRAM, REMOTE_PROTOCOL_VERSION);
        rpc_send_error_reply(client, h, VIR_ERR_RPC, VIR_FROM_RPC, text);
    }
}

/* Where a call runs. A read-write client's calls share max_workers, and
 * calls that wait for a domain's job (a start, a delete, a revert behind a
 * revert that pulls from a snapshot store for minutes) can take them all:
 * then the calls that wait for none (every one that changes nothing, and
 * those marked PROC_NO_JOB) run on the priority workers, as libvirtd's
 * prio_workers do, so that list, domjobinfo and dominfo still answer. */
static GThreadPool *pool_for(struct rpc_server *server, struct rpc_job *job)
{
    if (job->client->readonly_socket)
        return server->ro_pool;
    const struct proc_entry *e = rpc_find_proc(job->hdr.proc);
    bool waits_for_none = e && (!(e->flags & PROC_WRITE) || (e->flags & PROC_NO_JOB));
    if (waits_for_none && g_atomic_int_get(&server->busy) >= (gint)server->limits.max_workers)
        return server->prio_pool;
    job->counted = true;
    g_atomic_int_inc(&server->busy);
    return server->pool;
}

/* One complete packet; body (owned, charged bytes of the read-only share)
 * goes to a worker with its call, or is freed here. */
static void handle_packet(struct rpc_client *client, uint8_t *body, size_t len, size_t charged)
{
    struct rpc_server *server = client->server;
    const struct wire_header *h = &client->hdr;
    bool call = h->type == RPC_CALL && h->prog == REMOTE_PROGRAM &&
                h->vers == REMOTE_PROTOCOL_VERSION;
    if (!call) {
        handle_here(client, h, body, len);
        release(server, charged);
        g_free(body);
        return;
    }
    g_atomic_int_inc(&client->calls_in_flight);
    struct rpc_job *job = g_new0(struct rpc_job, 1);
    job->client = rpc_client_ref(client);
    job->hdr = *h;
    job->body = body;
    job->body_len = len;
    job->charged = charged;
    g_thread_pool_push(pool_for(server, job), job, NULL);
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

/* The largest message this client may send now. */
static uint32_t message_max(struct rpc_client *client)
{
    bool limited = client->readonly_socket || !rpc_client_is_opened(client);
    return limited ? LIMITED_MESSAGE_MAX : RPC_MESSAGE_MAX;
}

/* The length word is in: check it before waiting for the header. */
static bool check_length(struct rpc_client *client)
{
    const uint8_t *b = client->head;
    uint32_t total = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    uint32_t max = message_max(client);
    if (total < RPC_LEN_WORD_SIZE + RPC_HEADER_SIZE || total > RPC_LEN_WORD_SIZE + max) {
        limited_message(&client->server->dropped_log,
                        "client %u (uid %u): packet length %u outside [%u, %u], closing",
                        client->id, client->uid, total, RPC_LEN_WORD_SIZE + RPC_HEADER_SIZE,
                        RPC_LEN_WORD_SIZE + max);
        return false;
    }
    client->body_len = total - RPC_LEN_WORD_SIZE - RPC_HEADER_SIZE;
    return true;
}

/* The header is in: check it before any allocation. */
static bool check_header(struct rpc_client *client)
{
    XDR xdrs;
    xdrmem_create(&xdrs, (char *)client->head + RPC_LEN_WORD_SIZE, RPC_HEADER_SIZE, XDR_DECODE);
    bool ok = xdr_wire_header(&xdrs, &client->hdr) && header_acceptable(&client->hdr);
    xdr_destroy(&xdrs);
    if (!ok)
        limited_message(&client->server->dropped_log, "client %u (uid %u): malformed packet, "
                        "closing", client->id, client->uid);
    client->body_have = client->body_cap = 0;
    return ok;
}

/* Room for the next bytes of the body: the buffer doubles as data arrives,
 * read-only clients paying for it from their shared budget. */
static bool grow_body(struct rpc_client *client)
{
    size_t cap = MIN(MAX(client->body_cap * 2, (size_t)BODY_FIRST_CHUNK), client->body_len);
    size_t more = cap - client->body_cap;
    if (client->readonly_socket) {
        if (!charge(client->server, more)) {
            limited_message(&client->server->dropped_log,
                            "client %u (uid %u): read-only clients hold %u bytes already; "
                            "closing", client->id, client->uid, READONLY_BYTES_MAX);
            return false;
        }
        client->charged += more;
    }
    client->body = g_realloc(client->body, cap);
    client->body_cap = cap;
    return true;
}

static void finish_packet(struct rpc_client *client)
{
    uint8_t *body = g_steal_pointer(&client->body);
    size_t len = client->body_len, charged = client->charged;
    client->charged = 0;
    client->body_len = client->body_have = client->body_cap = 0;
    client->head_have = 0;
    handle_packet(client, body, len, charged);
}

/* Read what is available; false on EOF, error or a malformed frame. */
static bool client_read(struct rpc_client *client)
{
    const size_t head_size = RPC_LEN_WORD_SIZE + RPC_HEADER_SIZE;
    for (;;) {
        if (client->head_have == 0 &&
            g_atomic_int_get(&client->calls_in_flight) >=
                (gint)client->server->limits.max_client_requests) {
            pause_reading(client);
            return true;
        }
        bool in_head = client->head_have < head_size;
        if (!in_head && client->body_have == client->body_cap && !grow_body(client))
            return false;
        uint8_t *dst = in_head ? client->head + client->head_have
                               : client->body + client->body_have;
        size_t want = in_head ? head_size - client->head_have
                              : client->body_cap - client->body_have;
        ssize_t n = recv(client->fd, dst, want, 0);
        if (n == 0)
            return false;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        if (in_head) {
            size_t before = client->head_have;
            client->head_have += (size_t)n;
            if (before < RPC_LEN_WORD_SIZE && client->head_have >= RPC_LEN_WORD_SIZE &&
                !check_length(client))
                return false;
            if (client->head_have < head_size)
                continue;
            if (!check_header(client))
                return false;
        } else {
            client->body_have += (size_t)n;
        }
        if (client->body_have == client->body_len)
            finish_packet(client);
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

static gboolean on_accept(gint fd, GIOCondition cond, gpointer data);

static void watch_listener(struct listener *lst)
{
    lst->source = g_unix_fd_source_new(lst->fd, G_IO_IN);
    g_source_set_callback(lst->source, (GSourceFunc)(void (*)(void))on_accept, lst, NULL);
    g_source_attach(lst->source, NULL);
}

static gboolean resume_accepting(gpointer data)
{
    struct rpc_server *server = data;
    server->accept_paused = false;
    server->backoff_source = 0;
    for (guint i = 0; i < server->listeners->len; i++)
        watch_listener(server->listeners->pdata[i]);
    return G_SOURCE_REMOVE;
}

/* Out of file descriptors (or memory): the pending connection stays in the
 * backlog and the socket stays readable, so polling it again at once would
 * spin. Stop watching every listener for a while. */
static void back_off_accepting(struct rpc_server *server, int err)
{
    limited_message(&server->accept_log, "cannot accept connections: %s; pausing for %d ms "
                    "(%u clients connected)", g_strerror(err), ACCEPT_BACKOFF_MS,
                    rpc_server_client_count(server));
    server->accept_paused = true;
    for (guint i = 0; i < server->listeners->len; i++) {
        struct listener *lst = server->listeners->pdata[i];
        g_source_destroy(lst->source);
        g_source_unref(lst->source);
        lst->source = NULL;
    }
    server->backoff_source = g_timeout_add(ACCEPT_BACKOFF_MS, resume_accepting, server);
}

struct census {
    unsigned all, readonly, anonymous;   /* anonymous: read-only, not yet opened */
};

static struct census count_clients(struct rpc_server *server)
{
    struct census c = {0};
    g_mutex_lock(&server->lock);
    for (guint i = 0; i < server->clients->len; i++) {
        struct rpc_client *client = server->clients->pdata[i];
        c.all++;
        if (client->readonly_socket) {
            c.readonly++;
            c.anonymous += !rpc_client_is_opened(client);
        }
    }
    g_mutex_unlock(&server->lock);
    return c;
}

/* Why a new connection is refused, or NULL. Read-only connections never
 * take the last reserved_rw_clients places, and only a few of them may be
 * waiting to open at once, so anyone on the read-only socket can neither
 * lock the owner out nor hold every place with idle connections. */
static char *refusal(struct rpc_server *server, const struct listener *lst,
                     const struct ucred *cred)
{
    const struct rpc_limits *l = &server->limits;
    if (!lst->readonly && cred->uid != server->owner_uid && cred->uid != 0)
        return g_strdup_printf("a read-write connection from uid %u: only uid %u may use it",
                               cred->uid, server->owner_uid);
    struct census c = count_clients(server);
    if (c.all >= l->max_clients)
        return g_strdup_printf("max_clients (%u) reached", l->max_clients);
    if (!lst->readonly)
        return NULL;
    if (c.readonly >= l->max_clients - l->reserved_rw_clients)
        return g_strdup_printf("%u read-only clients already (max_clients %u less "
                               "reserved_rw_clients %u)", c.readonly, l->max_clients,
                               l->reserved_rw_clients);
    if (c.anonymous >= l->max_anonymous_clients)
        return g_strdup_printf("max_anonymous_clients (%u) read-only clients have not opened "
                               "a connection yet", l->max_anonymous_clients);
    return NULL;
}

static void peer_groups(int fd, struct rpc_client *client, gid_t gid)
{
    gid_t groups[CALLER_MAX_GROUPS];
    socklen_t len = sizeof(groups);
    /* More groups than we keep: the caller is checked with none of them,
     * which can only refuse it more. */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
        len = 0;
    rpc_client_set_peer_groups(client, gid, groups, (int)(len / sizeof(gid_t)));
}

static gboolean on_accept(gint fd, GIOCondition cond, gpointer data)
{
    struct listener *lst = data;
    struct rpc_server *server = lst->server;
    int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) {
        int err = errno;
        if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
            back_off_accepting(server, err);
            return G_SOURCE_REMOVE;
        }
        if (err != EAGAIN && err != EINTR && err != ECONNABORTED)
            limited_message(&server->accept_log, "accept: %s", g_strerror(err));
        return G_SOURCE_CONTINUE;
    }
    struct ucred cred;
    socklen_t clen = sizeof(cred);
    if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
        limited_message(&server->refused_log, "SO_PEERCRED: %s; refusing the connection",
                        g_strerror(errno));
        close(cfd);
        return G_SOURCE_CONTINUE;
    }
    g_autofree char *why = refusal(server, lst, &cred);
    if (why) {
        limited_message(&server->refused_log, "refusing a connection from uid %u (pid %d): %s",
                        cred.uid, cred.pid, why);
        close(cfd);
        return G_SOURCE_CONTINUE;
    }
    struct rpc_client *client = rpc_client_new(server, cfd, lst->readonly, cred.uid, cred.pid);
    peer_groups(cfd, client, cred.gid);
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
    g_ptr_array_add(server->listeners, lst);
    if (!server->accept_paused)
        watch_listener(lst);
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

void rpc_limits_init(struct rpc_limits *l)
{
    *l = (struct rpc_limits){
        .max_clients = 1024, .max_anonymous_clients = 20, .reserved_rw_clients = 16,
        .max_client_requests = 16, .max_workers = 32, .max_readonly_workers = 8,
        .prio_workers = 5,
    };
}

bool rpc_limits_check(const struct rpc_limits *l, GError **error)
{
    const char *bad = l->max_clients < 2                           ? "max_clients must be 2 or more"
                      : l->reserved_rw_clients >= l->max_clients   ? "reserved_rw_clients must be "
                                                                     "less than max_clients"
                      : l->max_anonymous_clients == 0              ? "max_anonymous_clients must be "
                                                                     "1 or more"
                      : l->max_client_requests == 0                ? "max_client_requests must be "
                                                                     "1 or more"
                      : l->max_workers == 0 || l->max_readonly_workers == 0 || l->prio_workers == 0
                          ? "max_workers, max_readonly_workers and prio_workers must be 1 or more"
                          : NULL;
    if (bad)
        g_set_error_literal(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE, bad);
    return bad == NULL;
}

struct rpc_server *rpc_server_new(struct vsnap_driver *driver, const struct rpc_limits *limits)
{
    struct rpc_server *server = g_new0(struct rpc_server, 1);
    server->ctx.driver = driver;
    server->limits = *limits;
    server->listeners = g_ptr_array_new();
    server->clients = g_ptr_array_new();
    server->owner_uid = geteuid();
    g_mutex_init(&server->lock);
    server->pool = g_thread_pool_new(worker, server, (gint)limits->max_workers, FALSE, NULL);
    server->ro_pool =
        g_thread_pool_new(worker, server, (gint)limits->max_readonly_workers, FALSE, NULL);
    server->prio_pool = g_thread_pool_new(worker, server, (gint)limits->prio_workers, FALSE, NULL);
    server->ctx.events = event_registry_new(driver);
    server->ctx.streams = stream_registry_new();
    return server;
}

void rpc_server_free(struct rpc_server *server)
{
    if (!server)
        return;
    if (server->backoff_source)
        g_source_remove(server->backoff_source);
    for (guint i = 0; i < server->listeners->len; i++) {
        struct listener *lst = server->listeners->pdata[i];
        if (lst->source) {
            g_source_destroy(lst->source);
            g_source_unref(lst->source);
        }
        close(lst->fd);
        g_free(lst);
    }
    g_ptr_array_free(server->listeners, TRUE);
    while (server->clients->len > 0)
        client_remove(server->clients->pdata[0]);
    g_thread_pool_free(server->pool, FALSE, TRUE);
    g_thread_pool_free(server->ro_pool, FALSE, TRUE);
    g_thread_pool_free(server->prio_pool, FALSE, TRUE);
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
