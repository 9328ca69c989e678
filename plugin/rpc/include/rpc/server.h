/* The libvirt RPC server: listening UNIX sockets (read-write and read-only),
 * connections, packet framing, keepalive, a worker pool for calls. The top of
 * the RPC layer: it hands calls to dispatch.c and stream packets to
 * stream.c, and nothing in the layer calls back into it. */
#pragma once

#include <glib.h>
#include <stdbool.h>

struct vsnap_driver;
struct rpc_server;

/* What libvirtd bounds, with its names (virtvsnapd.conf documents each). */
struct rpc_limits {
    unsigned max_clients;            /* connections on both sockets */
    unsigned max_anonymous_clients;  /* read-only connections not yet opened */
    unsigned reserved_rw_clients;    /* places read-only connections never take */
    unsigned max_client_requests;    /* calls queued or running per connection */
    unsigned max_workers;            /* threads running read-write clients' calls */
    unsigned max_readonly_workers;   /* threads running read-only clients' calls */
    unsigned prio_workers;           /* threads for read-write clients' calls that wait
                                      * for no domain job, once max_workers are busy */
};
void rpc_limits_init(struct rpc_limits *limits);
/* G_KEY_FILE_ERROR_INVALID_VALUE naming the setting that is out of range. */
bool rpc_limits_check(const struct rpc_limits *limits, GError **error);

struct rpc_server *rpc_server_new(struct vsnap_driver *driver, const struct rpc_limits *limits);
void rpc_server_free(struct rpc_server *server);

/* Create, bind and listen on path (mode 0700 for read-write sockets in
 * system mode, 0777 for read-only ones). A stale socket file is replaced;
 * a live one (another daemon answers) is an error. */
bool rpc_server_listen_path(struct rpc_server *server, const char *path, bool readonly,
                            GError **error);
/* Serve an already listening socket (systemd socket activation). */
bool rpc_server_listen_fd(struct rpc_server *server, int fd, bool readonly, GError **error);

unsigned rpc_server_client_count(struct rpc_server *server);
/* Only this uid may use read-write sockets (root in system mode, the user in
 * session mode). */
void rpc_server_set_owner_uid(struct rpc_server *server, uid_t uid);
