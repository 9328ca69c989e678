/* One HTTP/1.1 request over a UNIX socket that carries file descriptors
 * (SCM_RIGHTS) with its first bytes, as Cloud Hypervisor takes tap
 * descriptors with vm.create, vm.add-net and vm.restore and as libvirt's ch
 * driver sends them. libcurl cannot attach descriptors, so the monitor uses
 * this for the requests that have some. The request says "Connection:
 * close"; the answer is read to its Content-Length (or to the end). */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>

/* At most this many descriptors per request (SCM_MAX_FD is 253). */
#define HTTP_FDS_MAX 64

/* *status is the answer's HTTP status (0 when none came) and body its body.
 * false only when no answer came: VIR_ERR_OPERATION_TIMEOUT after
 * timeout_ms in all, VIR_ERR_OPERATION_FAILED when the socket cannot be
 * reached or the answer is not HTTP. */
bool http_fds_request(const char *socket_path, const char *method, const char *uri_path, const char *json,
                      const int *fds, size_t n_fds, long timeout_ms, long *status, GString *body,
                      GError **error);
