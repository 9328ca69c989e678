/* The libvirt RPC server: listening UNIX sockets (read-write and read-only),
 * connections, packet framing, keepalive, a worker pool for calls. */
#pragma once

#include <glib.h>
#include <stdbool.h>

struct vsnap_driver;
struct rpc_server;
struct event_registry;
struct stream_registry;

struct rpc_server *rpc_server_new(struct vsnap_driver *driver);
void rpc_server_free(struct rpc_server *server);

/* Create, bind and listen on path (mode 0700 for read-write sockets in
 * system mode, 0777 for read-only ones). A stale socket file is replaced;
 * a live one (another daemon answers) is an error. */
bool rpc_server_listen_path(struct rpc_server *server, const char *path, bool readonly,
                            GError **error);
/* Serve an already listening socket (systemd socket activation). */
bool rpc_server_listen_fd(struct rpc_server *server, int fd, bool readonly, GError **error);

unsigned rpc_server_client_count(struct rpc_server *server);
struct vsnap_driver *rpc_server_driver(struct rpc_server *server);
struct event_registry *rpc_server_events(struct rpc_server *server);
struct stream_registry *rpc_server_streams(struct rpc_server *server);
/* Only this uid may use read-write sockets (root in system mode, the user in
 * session mode). */
void rpc_server_set_owner_uid(struct rpc_server *server, uid_t uid);
