/* The API socket's clients, one SoupServer each (see connections.h).
 *
 * Why a server per connection: libsoup 3.2 reads a persistent connection's
 * next request into a message that only starts when its first bytes arrive.
 * If the connection ends before that (the client hangs up, or libsoup's idle
 * timeout fires), libsoup drops the message and never closes the connection:
 * every client that reused a connection and then hung up leaked a descriptor
 * and its buffers (the daemon's every call did: libcurl closes its connection
 * when done). libsoup's API cannot close one connection, but dropping a whole
 * SoupServer closes its connections; so each connection gets a server and
 * the server goes with the connection.
 *
 * A connection ends when libsoup is done with it (a response with
 * "Connection: close", a bad request, a request left half-sent for
 * API_IDLE_TIMEOUT_S: libsoup drops the stream, which we watch), when the
 * client hangs up (the socket reports HUP), when no next request starts
 * within API_IDLE_TIMEOUT_S of the last answer, or when a request is not
 * all read within API_IDLE_TIMEOUT_S of its start (libsoup's own timeout
 * restarts with every byte: a client sending one every few seconds kept its
 * half-sent request, and the connection, forever). A request being answered
 * (a long vm.wait-ready) is never idle. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "connections.h"

#include "fd-stream.h"

#include <errno.h>
#include <glib-unix.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

/* A client that sends nothing for this long, halfway through a request or
 * between requests, is disconnected: clients reconnect, idle ones do not
 * pile up. */
#define API_IDLE_TIMEOUT_S 30u

struct api_connections {
    api_server_setup_func setup;
    void *data;
    GHashTable *all; /* struct connection * */
};

struct connection {
    struct api_connections *conns;
    SoupServer *soup;
    GSocket *sock;
    GIOStream *stream; /* weak: libsoup holds it while it serves the connection (fd-stream.h) */
    GSource *hangup;           /* HUP or ERR on the socket */
    GSource *idle;             /* between two requests */
    GSource *reading;          /* from a request's start until it is all read */
    guint drop_id;             /* the drop, deferred out of libsoup's own call */
};

static void destroy_source(GSource **source)
{
    if (*source) {
        g_source_destroy(*source);
        g_clear_pointer(source, g_source_unref);
    }
}

static void on_stream_gone(gpointer data, GObject *gone);

/* Drops the server, which closes the connection if libsoup still has it. */
static void connection_free(struct connection *c)
{
    destroy_source(&c->hangup);
    destroy_source(&c->idle);
    destroy_source(&c->reading);
    if (c->drop_id)
        g_source_remove(c->drop_id);
    if (c->stream)
        g_object_weak_unref(G_OBJECT(c->stream), on_stream_gone, c);
    soup_server_disconnect(c->soup);
    g_object_unref(c->soup);
    g_socket_close(c->sock, NULL);
    g_object_unref(c->sock);
    g_free(c);
}

static void drop_connection(struct connection *c)
{
    g_hash_table_remove(c->conns->all, c); /* frees c */
}

static gboolean drop_deferred(gpointer data)
{
    struct connection *c = data;
    c->drop_id = 0;
    drop_connection(c);
    return G_SOURCE_REMOVE;
}

/* libsoup closed the connection and let go of it: drop the server too, once
 * libsoup has returned. The socket may be reused by the next client before
 * then, so nothing watches it any more. */
static void on_stream_gone(gpointer data, GObject *gone)
{
    struct connection *c = data;
    c->stream = NULL;
    destroy_source(&c->hangup);
    destroy_source(&c->idle);
    destroy_source(&c->reading);
    if (!c->drop_id)
        c->drop_id = g_idle_add(drop_deferred, c);
}

static gboolean on_hangup(int fd, GIOCondition cond, gpointer data)
{
    struct connection *c = data;
    g_debug("API client hung up");
    g_clear_pointer(&c->hangup, g_source_unref); /* destroyed by returning REMOVE */
    drop_connection(c);
    return G_SOURCE_REMOVE;
}

static gboolean on_idle(gpointer data)
{
    struct connection *c = data;
    g_debug("API client idle for %u s: disconnected", API_IDLE_TIMEOUT_S);
    g_clear_pointer(&c->idle, g_source_unref);
    drop_connection(c);
    return G_SOURCE_REMOVE;
}

static gboolean on_reading_too_long(gpointer data)
{
    struct connection *c = data;
    g_debug("API client took over %u s to send a request: disconnected", API_IDLE_TIMEOUT_S);
    g_clear_pointer(&c->reading, g_source_unref);
    drop_connection(c);
    return G_SOURCE_REMOVE;
}

/* The first bytes of a request arrived (or, for the first request, the
 * connection was set up): all of it must arrive within the timeout. */
static void on_request_started(SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
    struct connection *c = data;
    destroy_source(&c->idle);
    destroy_source(&c->reading);
    c->reading = g_timeout_source_new_seconds(API_IDLE_TIMEOUT_S);
    g_source_set_callback(c->reading, on_reading_too_long, c, NULL);
    g_source_attach(c->reading, NULL);
}

/* All of it arrived: its handler may take as long as it takes. */
static void on_request_read(SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
    struct connection *c = data;
    destroy_source(&c->reading);
}

/* An answer went out (or a request failed): until the next request starts,
 * the connection is idle. */
static void on_request_done(SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
    struct connection *c = data;
    destroy_source(&c->idle);
    destroy_source(&c->reading);
    if (!c->stream)
        return;
    fd_stream_drop_fds(c->stream); /* descriptors the request came with and did not use */
    c->idle = g_timeout_source_new_seconds(API_IDLE_TIMEOUT_S);
    g_source_set_callback(c->idle, on_idle, c, NULL);
    g_source_attach(c->idle, NULL);
}

/* libsoup 3.2 keeps a connection open after a response only when the server
 * has a listener of its own (soup-server.c: request_finished); without one, a
 * connection handed over with soup_server_accept_iostream gets one request
 * and is closed without "Connection: close" (clients that reuse connections
 * fail). A listener that can never accept gives the connection HTTP/1.1
 * persistence: one end of a socket pair whose other end is closed, so nobody
 * can reach it (it sees end-of-file once, its accept fails, and libsoup stops
 * watching it). */
static bool add_unreachable_listener(SoupServer *soup, GError **error)
{
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "API server: socketpair: %s",
                    g_strerror(errno));
        return false;
    }
    close(pair[1]);
    g_autoptr(GSocket) sock = g_socket_new_from_fd(pair[0], error);
    if (!sock) {
        close(pair[0]);
        return false;
    }
    return soup_server_listen_socket(soup, sock, 0, error);
}

/* A plain descriptor watch: a GSocket source would time out with the
 * socket's timeout (and mark the socket timed out under libsoup). */
static void watch_hangup(struct connection *c)
{
    c->hangup = g_unix_fd_source_new(g_socket_get_fd(c->sock), G_IO_HUP | G_IO_ERR);
    /* Low: whatever the client sent before hanging up is read (and answered,
     * if it can be) first. */
    g_source_set_priority(c->hangup, G_PRIORITY_LOW);
    g_source_set_callback(c->hangup, G_SOURCE_FUNC(on_hangup), c, NULL);
    g_source_attach(c->hangup, NULL);
}

static bool serve(struct connection *c, GError **error)
{
    c->soup = soup_server_new("server-header", "vsnap-shim", NULL);
    if (!add_unreachable_listener(c->soup, error))
        return false;
    c->conns->setup(c->soup, c->conns->data);
    g_signal_connect(c->soup, "request-started", G_CALLBACK(on_request_started), c);
    g_signal_connect(c->soup, "request-read", G_CALLBACK(on_request_read), c);
    g_signal_connect(c->soup, "request-finished", G_CALLBACK(on_request_done), c);
    g_signal_connect(c->soup, "request-aborted", G_CALLBACK(on_request_done), c);

    g_socket_set_timeout(c->sock, API_IDLE_TIMEOUT_S);
    g_autoptr(GSocketConnection) connection = g_socket_connection_factory_create_connection(c->sock);
    g_autoptr(GIOStream) stream = fd_stream_new(connection);
    g_autoptr(GSocketAddress) local = g_socket_get_local_address(c->sock, error);
    g_autoptr(GSocketAddress) remote = local ? g_socket_get_remote_address(c->sock, error) : NULL;
    if (!remote)
        return false;
    c->stream = stream;
    g_object_set_data(G_OBJECT(c->soup), "vsnap-connection", c);
    g_object_weak_ref(G_OBJECT(stream), on_stream_gone, c);
    watch_hangup(c);
    return soup_server_accept_iostream(c->soup, G_IO_STREAM(stream), local, remote, error);
}

void api_connections_add(struct api_connections *conns, GSocket *client)
{
    struct connection *c = g_new0(struct connection, 1);
    c->conns = conns;
    c->sock = g_object_ref(client);
    g_hash_table_add(conns->all, c);
    g_autoptr(GError) error = NULL;
    if (!serve(c, &error)) {
        g_warning("API socket: cannot serve a client: %s", error->message);
        drop_connection(c);
    }
}

int *api_connections_take_fds(SoupServer *soup, unsigned *n)
{
    struct connection *c = g_object_get_data(G_OBJECT(soup), "vsnap-connection");
    *n = 0;
    return c && c->stream ? fd_stream_take_fds(c->stream, n) : NULL;
}

struct api_connections *api_connections_new(api_server_setup_func setup, void *data)
{
    struct api_connections *conns = g_new0(struct api_connections, 1);
    conns->setup = setup;
    conns->data = data;
    conns->all = g_hash_table_new_full(NULL, NULL, (GDestroyNotify)connection_free, NULL);
    return conns;
}

void api_connections_free(struct api_connections *conns)
{
    if (!conns)
        return;
    g_hash_table_destroy(conns->all);
    g_free(conns);
}
