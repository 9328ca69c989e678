/* The REST API: Cloud Hypervisor's HTTP/1.1 API under /api/v1/, served by a
 * SoupServer on a UNIX socket, on the main thread. */
#pragma once

#include <glib.h>

#include "api/store-refs.h"
#include "vmm/vmm.h"

struct api_server;

/* spec is the --api-socket value: "path=<p>" (a stale socket file is replaced;
 * a live one is refused) or "fd=<n>" (a bound socket handed over by the caller).
 * store (kept, not copied; NULL: store URLs are refused) serves store URLs in
 * vm.snapshot and vm.restore. */
struct api_server *api_server_new(struct vmm *vmm, const char *spec, struct api_store *store,
                                  GError **error);
/* Stop serving; the socket path, if we made it, is removed. */
void api_server_free(struct api_server *server);
typedef struct api_server api_server;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(api_server, api_server_free)
