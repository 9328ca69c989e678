/* A GIOStream whose input keeps SCM_RIGHTS descriptors (see fd-stream.h).
 *
 * The input stream is pollable (libsoup 3 reads its connections without
 * blocking and waits on a GSource); every read is g_socket_receive_message,
 * whose descriptors (GUnixFDMessage) are kept in arrival order. The output stream is the
 * socket connection's own. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "fd-stream.h"

#include <gio/gunixfdmessage.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the input stream ---- */

#define FD_TYPE_INPUT_STREAM (fd_input_stream_get_type())
G_DECLARE_FINAL_TYPE(FdInputStream, fd_input_stream, FD, INPUT_STREAM, GInputStream)

struct _FdInputStream {
    GInputStream parent;
    GSocket *sock;
    GArray *fds; /* int */
};

static void fd_input_stream_pollable_init(GPollableInputStreamInterface *iface);

G_DEFINE_TYPE_WITH_CODE(FdInputStream, fd_input_stream, G_TYPE_INPUT_STREAM,
                        G_IMPLEMENT_INTERFACE(G_TYPE_POLLABLE_INPUT_STREAM, fd_input_stream_pollable_init))

static void keep_fd(FdInputStream *self, int fd)
{
    if (self->fds->len < FD_STREAM_MAX_FDS) {
        g_array_append_val(self->fds, fd);
        return;
    }
    g_message("API client sent more than %d descriptors at once: the rest are closed", FD_STREAM_MAX_FDS);
    close(fd);
}

/* One read without blocking (the socket is non-blocking: see fd_stream_new).
 * GSocket's own receive keeps libsoup's idle timeout working: a socket whose
 * timeout passed fails the next read with G_IO_ERROR_TIMED_OUT. */
static gssize read_nonblocking(GPollableInputStream *stream, void *buffer, gsize count, GError **error)
{
    FdInputStream *self = FD_INPUT_STREAM(stream);
    GInputVector vec = { .buffer = buffer, .size = count };
    GSocketControlMessage **messages = NULL;
    gint nmessages = 0, flags = 0;
    gssize n = g_socket_receive_message(self->sock, NULL, &vec, 1, &messages, &nmessages, &flags, NULL, error);
    for (gint i = 0; i < nmessages; i++) {
        if (G_IS_UNIX_FD_MESSAGE(messages[i])) {
            gint nfds = 0;
            gint *fds = g_unix_fd_message_steal_fds(G_UNIX_FD_MESSAGE(messages[i]), &nfds);
            for (gint k = 0; k < nfds; k++)
                keep_fd(self, fds[k]);
            g_free(fds);
        }
        g_object_unref(messages[i]);
    }
    g_free(messages);
    if (flags & MSG_CTRUNC)
        g_message("API client sent more descriptors than one read takes: some were lost");
    return n;
}

/* Blocking read (libsoup does not use it; GInputStream requires it): wait for
 * input or the cancellable, then read. */
static gssize read_fn(GInputStream *stream, void *buffer, gsize count, GCancellable *cancellable, GError **error)
{
    FdInputStream *self = FD_INPUT_STREAM(stream);
    for (;;) {
        GError *local = NULL;
        gssize n = read_nonblocking(G_POLLABLE_INPUT_STREAM(stream), buffer, count, &local);
        if (n >= 0 || !g_error_matches(local, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK)) {
            if (local)
                g_propagate_error(error, local);
            return n;
        }
        g_error_free(local);
        if (!g_socket_condition_wait(self->sock, G_IO_IN, cancellable, error))
            return -1;
    }
}

static gboolean is_readable(GPollableInputStream *stream)
{
    return g_socket_condition_check(FD_INPUT_STREAM(stream)->sock, G_IO_IN | G_IO_HUP | G_IO_ERR) != 0;
}

static GSource *create_source(GPollableInputStream *stream, GCancellable *cancellable)
{
    GSource *socket_source = g_socket_create_source(FD_INPUT_STREAM(stream)->sock, G_IO_IN, cancellable);
    GSource *source = g_pollable_source_new(G_OBJECT(stream));
    g_source_set_dummy_callback(socket_source);
    g_source_add_child_source(source, socket_source);
    g_source_unref(socket_source);
    return source;
}

static void drop_all(GArray *fds)
{
    for (guint i = 0; i < fds->len; i++)
        close(g_array_index(fds, int, i));
    g_array_set_size(fds, 0);
}

static void fd_input_stream_finalize(GObject *object)
{
    FdInputStream *self = FD_INPUT_STREAM(object);
    drop_all(self->fds);
    g_array_unref(self->fds);
    g_object_unref(self->sock);
    G_OBJECT_CLASS(fd_input_stream_parent_class)->finalize(object);
}

static void fd_input_stream_class_init(FdInputStreamClass *klass)
{
    G_OBJECT_CLASS(klass)->finalize = fd_input_stream_finalize;
    G_INPUT_STREAM_CLASS(klass)->read_fn = read_fn;
}

static void fd_input_stream_pollable_init(GPollableInputStreamInterface *iface)
{
    iface->is_readable = is_readable;
    iface->create_source = create_source;
    iface->read_nonblocking = read_nonblocking;
}

static void fd_input_stream_init(FdInputStream *self)
{
    self->fds = g_array_new(FALSE, FALSE, sizeof(int));
}

/* ---- the I/O stream ---- */

#define FD_TYPE_IO_STREAM (fd_io_stream_get_type())
G_DECLARE_FINAL_TYPE(FdIOStream, fd_io_stream, FD, IO_STREAM, GIOStream)

struct _FdIOStream {
    GIOStream parent;
    GSocketConnection *connection;
    FdInputStream *input;
};

G_DEFINE_TYPE(FdIOStream, fd_io_stream, G_TYPE_IO_STREAM)

static GInputStream *get_input_stream(GIOStream *stream)
{
    return G_INPUT_STREAM(FD_IO_STREAM(stream)->input);
}

static GOutputStream *get_output_stream(GIOStream *stream)
{
    return g_io_stream_get_output_stream(G_IO_STREAM(FD_IO_STREAM(stream)->connection));
}

static gboolean close_fn(GIOStream *stream, GCancellable *cancellable, GError **error)
{
    FdIOStream *self = FD_IO_STREAM(stream);
    drop_all(self->input->fds);
    return g_io_stream_close(G_IO_STREAM(self->connection), cancellable, error);
}

static void fd_io_stream_finalize(GObject *object)
{
    FdIOStream *self = FD_IO_STREAM(object);
    g_object_unref(self->input);
    g_object_unref(self->connection);
    G_OBJECT_CLASS(fd_io_stream_parent_class)->finalize(object);
}

static void fd_io_stream_class_init(FdIOStreamClass *klass)
{
    G_OBJECT_CLASS(klass)->finalize = fd_io_stream_finalize;
    GIOStreamClass *io = G_IO_STREAM_CLASS(klass);
    io->get_input_stream = get_input_stream;
    io->get_output_stream = get_output_stream;
    io->close_fn = close_fn;
}

static void fd_io_stream_init(FdIOStream *self)
{
}

GIOStream *fd_stream_new(GSocketConnection *connection)
{
    FdIOStream *self = g_object_new(FD_TYPE_IO_STREAM, NULL);
    self->connection = g_object_ref(connection);
    self->input = g_object_new(FD_TYPE_INPUT_STREAM, NULL);
    self->input->sock = g_object_ref(g_socket_connection_get_socket(connection));
    /* Reads through g_socket_receive_message then never block; the socket
     * streams' own calls say whether they block, whatever this property. */
    g_socket_set_blocking(self->input->sock, FALSE);
    return G_IO_STREAM(self);
}

int *fd_stream_take_fds(GIOStream *stream, unsigned *n)
{
    GArray *fds = FD_IO_STREAM(stream)->input->fds;
    *n = fds->len;
    if (!fds->len)
        return NULL;
    int *out = g_memdup2(fds->data, fds->len * sizeof(int));
    g_array_set_size(fds, 0);
    return out;
}

void fd_stream_drop_fds(GIOStream *stream)
{
    drop_all(FD_IO_STREAM(stream)->input->fds);
}
