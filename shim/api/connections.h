/* The API socket's clients: each accepted connection is served by a
 * SoupServer of its own, closed when the client hangs up or stays idle (see
 * connections.c for why one server per connection). Main thread only. */
#pragma once

#include <gio/gio.h>
#include <libsoup/soup.h>

/* Installs the request handlers on a connection's new server. */
typedef void (*api_server_setup_func)(SoupServer *soup, void *data);

struct api_connections;

struct api_connections *api_connections_new(api_server_setup_func setup, void *data);
/* Serve one accepted client socket (takes a reference). */
void api_connections_add(struct api_connections *conns, GSocket *client);
/* The descriptors that came (SCM_RIGHTS) with the request being answered on
 * soup's connection, in order; the caller owns them. Those not taken are
 * closed when the request is done. */
int *api_connections_take_fds(SoupServer *soup, unsigned *n);
/* Disconnect every client (a request in progress ends without an answer). */
void api_connections_free(struct api_connections *conns);
typedef struct api_connections api_connections;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(api_connections, api_connections_free)
