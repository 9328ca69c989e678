/* HTTP server: socket set-up, dispatch by path and method, replies. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "api/api.h"

#include <string.h>
#include <unistd.h>

#include "api-socket.h"
#include "connections.h"
#include "routes.h"
#include "json/vjson.h"

#define API_PREFIX "/api/v1/"

struct api_server {
    struct vmm *vmm;
    struct api_store *store;
    struct api_connections *clients;
    GSocket *listener;
    GSource *accept_source;
    char *path; /* the socket we bound, removed at the end; NULL for fd= */
};

/* ---- replies ----------------------------------------------------------------- */

/* Cloud Hypervisor answers an error with a JSON list of messages, from the
 * outermost error to its cause; ours are one message that says it all. */
static char *error_body(const char *message)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_array_begin(b, NULL);
    vjson_str(b, NULL, message);
    vjson_array_end(b);
    return vjson_finish(b, false);
}

void reply_error_message(SoupServerMessage *msg, unsigned status, const char *message)
{
    char *text = error_body(message);

    soup_server_message_set_status(msg, status, NULL);
    soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_TAKE, text,
                                     strlen(text));
}

void reply_error(struct api_request *req, const GError *error)
{
    unsigned status = shim_error_http_status(error);
    g_info("%s %s -> %u: %s", soup_server_message_get_method(req->msg),
           g_uri_get_path(soup_server_message_get_uri(req->msg)), status, error->message);
    reply_error_message(req->msg, status, error->message);
}

/* libsoup 3.2 writes a 204 without Content-Length (as it must), and then
 * reads the headers it wrote as a response whose body ends when the
 * connection closes: it would close the connection after every 204, without
 * "Connection: close". Once the headers are on the wire, saying that the
 * response had no body keeps the connection open (the wire is unchanged). */
static void no_body_written(SoupServerMessage *msg)
{
    soup_message_headers_set_encoding(soup_server_message_get_response_headers(msg),
                                      SOUP_ENCODING_NONE);
}

void reply_no_content(struct api_request *req)
{
    soup_server_message_set_status(req->msg, SOUP_STATUS_NO_CONTENT, NULL);
    g_signal_connect(req->msg, "wrote-headers", G_CALLBACK(no_body_written), NULL);
}

void reply_json(struct api_request *req, unsigned status, JsonNode *json)
{
    char *text = json_to_string(json, FALSE);
    json_node_unref(json);
    soup_server_message_set_status(req->msg, status, NULL);
    soup_server_message_set_response(req->msg, "application/json", SOUP_MEMORY_TAKE, text,
                                     strlen(text));
}

void reply_result(struct api_request *req, bool ok, const GError *error)
{
    if (ok)
        reply_no_content(req);
    else
        reply_error(req, error);
}

/* ---- dispatch ---------------------------------------------------------------- */

static const struct route *const route_tables[] = {
    vmm_routes, vm_routes, info_routes, ready_routes,
    snapshot_routes, disk_job_routes,
};

/* The route for path, and whether some route has that path at all. */
static const struct route *find_route(const char *name, const char *method, bool *path_known)
{
    *path_known = false;
    for (size_t t = 0; t < G_N_ELEMENTS(route_tables); t++) {
        for (const struct route *r = route_tables[t]; r->path; r++) {
            if (strcmp(r->path, name) != 0)
                continue;
            *path_known = true;
            if (strcmp(r->method, method) == 0)
                return r;
        }
    }
    return NULL;
}

static GBytes *request_body(SoupServerMessage *msg)
{
    SoupMessageBody *body = soup_server_message_get_request_body(msg);
    return soup_message_body_flatten(body);
}

static void handle_request(SoupServer *soup, SoupServerMessage *msg, const char *path,
                           GHashTable *query, gpointer data)
{
    struct api_server *server = data;
    const char *method = soup_server_message_get_method(msg);
    bool path_known;

    g_debug("%s %s", method, path);
    if (!g_str_has_prefix(path, API_PREFIX)) {
        reply_error_message(msg, SOUP_STATUS_NOT_FOUND, "unknown endpoint: the API is under /api/v1/");
        return;
    }
    const struct route *route = find_route(path + strlen(API_PREFIX), method, &path_known);
    if (!route) {
        g_autofree char *why = path_known
            ? g_strdup_printf("method %s is not allowed on %s", method, path)
            : g_strdup_printf("unknown endpoint %s", path);
        /* As Cloud Hypervisor: a method an endpoint does not take is a bad request. */
        reply_error_message(msg, path_known ? SOUP_STATUS_BAD_REQUEST : SOUP_STATUS_NOT_FOUND, why);
        return;
    }
    g_autoptr(GBytes) body = request_body(msg);
    if (!route->takes_body && g_bytes_get_size(body) > 0) {
        reply_error_message(msg, SOUP_STATUS_BAD_REQUEST, "this endpoint takes no request body");
        return;
    }
    struct api_request req = {
        .vmm = server->vmm, .store = server->store, .server = soup, .msg = msg, .body = body, .query = query,
    };
    req.fds = api_connections_take_fds(soup, &req.nfds);
    route->handle(&req);
    for (unsigned i = 0; i < req.nfds; i++) /* what the handler did not take */
        if (req.fds[i] >= 0)
            close(req.fds[i]);
    g_free(req.fds);
}

/* The response says "Connection: close" whenever the connection ends after
 * it, as HTTP/1.1 asks: libsoup closes without saying so. */
static void say_close(SoupServerMessage *msg)
{
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Connection",
                                 "close");
}

/* Answer 413 and hang up, in the middle of the body: the rest is never
 * read. The connection is taken from libsoup, which would otherwise go on
 * reading (and keeping) all of it before anyone could answer. */
static void refuse_body_as_it_arrives(SoupServerMessage *msg)
{
    g_info("%s %s -> 413: the chunked body grew past %u bytes", soup_server_message_get_method(msg),
           g_uri_get_path(soup_server_message_get_uri(msg)), API_MAX_BODY_BYTES);
    g_autoptr(GIOStream) stream = soup_server_message_steal_connection(msg);
    if (!stream)
        return;
    g_autofree char *body = error_body("request body too large");
    g_autofree char *reply = g_strdup_printf("HTTP/1.1 413 Payload Too Large\r\nServer: vsnap-shim\r\n"
                                             "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                                             "Connection: close\r\n\r\n%s",
                                             strlen(body), body);
    GOutputStream *out = g_io_stream_get_output_stream(stream);
    /* Best effort, never blocking: a client that reads nothing gets nothing. */
    if (G_IS_POLLABLE_OUTPUT_STREAM(out))
        g_pollable_output_stream_write_nonblocking(G_POLLABLE_OUTPUT_STREAM(out), reply, strlen(reply), NULL,
                                                   NULL);
    g_io_stream_close(stream, NULL, NULL);
}

/* A chunked body has no length up front: count it as it arrives. */
static void count_body_chunk(SoupServerMessage *msg, GBytes *chunk, gpointer data)
{
    if (soup_server_message_get_request_body(msg)->length > API_MAX_BODY_BYTES)
        refuse_body_as_it_arrives(msg);
}

/* An early handler runs when the headers are in, before the body is read.
 * A body refused here is never read, so the connection cannot go on. */
static void check_request_headers(SoupServer *soup, SoupServerMessage *msg, const char *path,
                                  GHashTable *query, gpointer data)
{
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    goffset len = soup_message_headers_get_content_length(headers);
    bool close = soup_server_message_get_http_version(msg) == SOUP_HTTP_1_0
                     ? !soup_message_headers_header_contains(headers, "Connection", "keep-alive")
                     : soup_message_headers_header_contains(headers, "Connection", "close");

    g_debug("%s %s: %" G_GINT64_FORMAT " body bytes announced",
            soup_server_message_get_method(msg), path, (gint64)len);
    if (len > API_MAX_BODY_BYTES) {
        reply_error_message(msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, "request body too large");
        close = true;
    } else if (soup_message_headers_get_encoding(headers) == SOUP_ENCODING_CHUNKED) {
        g_signal_connect(msg, "got-chunk", G_CALLBACK(count_body_chunk), NULL);
    }
    if (close)
        say_close(msg);
}

/* We accept connections ourselves and hand each to libsoup as a stream:
 * libsoup 3.2's own listener leaks every accepted socket object. */
static gboolean accept_client(GSocket *listener, GIOCondition cond, gpointer data)
{
    struct api_server *server = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GSocket) client = g_socket_accept(listener, NULL, &error);

    if (!client) {
        if (!g_error_matches(error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
            g_warning("API socket: accept failed: %s", error->message);
        return G_SOURCE_CONTINUE;
    }
    api_connections_add(server->clients, client);
    return G_SOURCE_CONTINUE;
}

/* Every connection's server routes the same way. */
static void add_handlers(SoupServer *soup, void *data)
{
    struct api_server *server = data;
    soup_server_add_early_handler(soup, NULL, check_request_headers, server, NULL);
    soup_server_add_handler(soup, NULL, handle_request, server, NULL);
}

struct api_server *api_server_new(struct vmm *vmm, const char *spec, struct api_store *store,
                                  GError **error)
{
    g_autoptr(api_server) server = g_new0(struct api_server, 1);
    server->vmm = vmm;
    server->store = store;

    g_autoptr(GSocket) sock = api_socket_open(spec, &server->path, error);
    if (!sock)
        return NULL;
    server->clients = api_connections_new(add_handlers, server);
    server->listener = g_steal_pointer(&sock);
    g_socket_set_blocking(server->listener, FALSE);
    server->accept_source = g_socket_create_source(server->listener, G_IO_IN, NULL);
    g_source_set_callback(server->accept_source, G_SOURCE_FUNC(accept_client), server, NULL);
    g_source_attach(server->accept_source, NULL);
    g_info("API listening on %s", server->path ? server->path : spec);
    return g_steal_pointer(&server);
}

void api_server_free(struct api_server *server)
{
    if (!server)
        return;
    if (server->accept_source) {
        g_source_destroy(server->accept_source);
        g_source_unref(server->accept_source);
    }
    g_clear_pointer(&server->clients, api_connections_free);
    /* Only remove the path if we bound it (a failed bind leaves someone else's). */
    if (server->path && server->listener)
        unlink(server->path);
    g_clear_object(&server->listener);
    g_free(server->path);
    g_free(server);
}
