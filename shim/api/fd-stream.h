/* The stream libsoup reads an API client through: a connected UNIX socket
 * whose reads keep the descriptors that come with the bytes (SCM_RIGHTS), as
 * Cloud Hypervisor's API takes tap descriptors (vm.create, vm.add-net,
 * vm.restore). A plain read of such a socket would have the kernel discard
 * them. Writes go to the socket as usual. */
#pragma once

#include <gio/gio.h>

/* The first 64 descriptors waiting on a connection are kept; more are
 * closed as they arrive (a client has no reason to send that many). */
#define FD_STREAM_MAX_FDS 64

/* A stream over connection's socket (takes a reference to it). */
GIOStream *fd_stream_new(GSocketConnection *connection);
/* The descriptors received so far and not taken yet, in arrival order; the
 * caller owns them (closes them). *n gets their number; NULL when none. */
int *fd_stream_take_fds(GIOStream *stream, unsigned *n);
/* Close every descriptor waiting (the request they came with is done). */
void fd_stream_drop_fds(GIOStream *stream);
