/* The API's listening socket: --api-socket path=<p> or fd=<n>. */
#pragma once

#include <gio/gio.h>

/* "path=P" (a stale socket file is replaced, a live one refused, anything that
 * is not a socket left alone), "fd=N" (a socket handed over by the caller), or
 * a bare path as Cloud Hypervisor also accepts. *bound_path is set to the path
 * we bound, for removal at exit. */
GSocket *api_socket_open(const char *spec, char **bound_path, GError **error);
