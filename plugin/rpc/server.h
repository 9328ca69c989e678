/* The libvirt RPC server: listening UNIX sockets (read-write and read-only),
 * connections, packet framing, keepalive, a worker pool for calls. The top of
 * the RPC layer: it hands calls to dispatch.c and stream packets to
 * stream.c, and nothing in the layer calls back into it. */
#pragma once

#include <glib.h>
#include <stdbool.h>

struct vsnap_driver;
struct rpc_server;

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
/* Only this uid may use read-write sockets (root in system mode, the user in
 * session mode). */
void rpc_server_set_owner_uid(struct rpc_server *server, uid_t uid);
