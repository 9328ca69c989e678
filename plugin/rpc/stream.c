#include "stream.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Console output is small; one chunk per packet keeps latency low. */
#define CHUNK 4096
/* Console input waits this long for a guest that does not read (its pty is
 * full), then is dropped: the main loop writes it and must not stall. */
#define INPUT_WAIT_MS 100

struct rpc_stream {
    gint refs;
    struct stream_registry *reg;
    struct rpc_client *client;
    struct wire_header hdr;     /* procedure and serial of the opening call */
    unsigned char uuid[16];
    int fd;                     /* the console's end: the serial's pty, non-blocking */
    int wake_fd;                /* eventfd: the reader stops (stop_reader) */
    GMutex lock;
    bool eof_sent;              /* the guest side ended: empty CONTINUE sent */
    bool closed;                /* the client finished or aborted, or is gone */
    bool superseded;            /* forced out by a newer console */
};

struct stream_registry {
    GMutex lock;
    GPtrArray *streams;         /* struct rpc_stream *, one reference each */
};

static struct rpc_stream *stream_ref(struct rpc_stream *st)
{
    g_atomic_int_inc(&st->refs);
    return st;
}

static void stream_unref(struct rpc_stream *st)
{
    if (!st || !g_atomic_int_dec_and_test(&st->refs))
        return;
    close(st->fd);
    if (st->wake_fd >= 0)
        close(st->wake_fd);
    rpc_client_unref(st->client);
    g_mutex_clear(&st->lock);
    g_free(st);
}

struct stream_registry *stream_registry_new(void)
{
    struct stream_registry *reg = g_new0(struct stream_registry, 1);
    g_mutex_init(&reg->lock);
    reg->streams = g_ptr_array_new_with_free_func((GDestroyNotify)stream_unref);
    return reg;
}

void stream_registry_free(struct stream_registry *reg)
{
    if (!reg)
        return;
    g_ptr_array_free(reg->streams, TRUE);
    g_mutex_clear(&reg->lock);
    g_free(reg);
}

static void send_packet(struct rpc_stream *st, uint32_t status, const void *data, size_t len)
{
    struct wire_header hdr = st->hdr;
    hdr.type = RPC_STREAM;
    hdr.status = status;
    rpc_client_send_raw(st->client, &hdr, data, len);
}

/* The guest side is done (the VM stopped, or a forced console took over):
 * an empty CONTINUE packet is end of file for the client, which then
 * finishes the stream. */
static void send_eof(struct rpc_stream *st)
{
    g_mutex_lock(&st->lock);
    if (!st->eof_sent && !st->closed)
        send_packet(st, RPC_STATUS_CONTINUE, NULL, 0);
    st->eof_sent = true;
    g_mutex_unlock(&st->lock);
}

/* The reader sends end of file and exits; the fd is closed with the last
 * reference, so no thread reads or writes a reused fd. */
static void stop_reader(struct rpc_stream *st)
{
    uint64_t one = 1;
    (void)!write(st->wake_fd, &one, sizeof(one));
}

static void forget(struct rpc_stream *st)
{
    g_mutex_lock(&st->reg->lock);
    g_ptr_array_remove(st->reg->streams, st);
    g_mutex_unlock(&st->reg->lock);
}

/* The client finished (OK) or aborted (ERROR): confirm with an empty OK. */
static void close_by_client(struct rpc_stream *st)
{
    g_mutex_lock(&st->lock);
    if (!st->closed)
        send_packet(st, RPC_STATUS_OK, NULL, 0);
    st->closed = true;
    g_mutex_unlock(&st->lock);
    stop_reader(st);
    forget(st);
}

/* Until the guest side ends (the shim closed the pty's master: end of file
 * or EIO) or someone stops the reader. */
static gpointer relay_output(gpointer data)
{
    struct rpc_stream *st = data;
    char buf[CHUNK];
    for (;;) {
        struct pollfd fds[2] = {{.fd = st->fd, .events = POLLIN},
                                {.fd = st->wake_fd, .events = POLLIN}};
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[1].revents)
            break;
        ssize_t n = read(st->fd, buf, sizeof(buf));
        bool hung_up = fds[0].revents & (POLLHUP | POLLERR | POLLNVAL);
        if (n < 0 && (errno == EINTR || (errno == EAGAIN && !hung_up)))
            continue;
        if (n <= 0)
            break;
        g_mutex_lock(&st->lock);
        if (!st->closed && !st->eof_sent)
            send_packet(st, RPC_STATUS_CONTINUE, buf, n);
        g_mutex_unlock(&st->lock);
    }
    send_eof(st);   /* stays registered until the client finishes it */
    stream_unref(st);
    return NULL;
}

void stream_start(struct stream_registry *reg, struct rpc_client *client,
                  const struct wire_header *hdr, int fd, const unsigned char uuid[16])
{
    struct rpc_stream *st = g_new0(struct rpc_stream, 1);
    st->refs = 1;
    st->reg = reg;
    st->client = rpc_client_ref(client);
    st->hdr = *hdr;
    st->fd = fd;
    st->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    memcpy(st->uuid, uuid, 16);
    g_mutex_init(&st->lock);
    if (st->wake_fd < 0) {
        g_warning("console stream: eventfd: %s; ending the stream", g_strerror(errno));
        send_eof(st);
        stream_unref(st);
        return;
    }
    g_mutex_lock(&reg->lock);
    g_ptr_array_add(reg->streams, stream_ref(st));
    g_mutex_unlock(&reg->lock);
    g_thread_unref(g_thread_new("console", relay_output, st));   /* owns the first ref */
}

static struct rpc_stream *find(struct stream_registry *reg, struct rpc_client *client,
                               const unsigned char *uuid, const struct wire_header *hdr)
{
    struct rpc_stream *found = NULL;
    g_mutex_lock(&reg->lock);
    for (guint i = 0; i < reg->streams->len && !found; i++) {
        struct rpc_stream *st = reg->streams->pdata[i];
        if (uuid && memcmp(st->uuid, uuid, 16) == 0 && !st->superseded && !st->eof_sent &&
            !st->closed)
            found = stream_ref(st);
        else if (client && st->client == client && st->hdr.proc == hdr->proc &&
                 st->hdr.serial == hdr->serial)
            found = stream_ref(st);
    }
    g_mutex_unlock(&reg->lock);
    return found;
}

bool stream_registry_console_busy(struct stream_registry *reg, const unsigned char uuid[16],
                                  bool force)
{
    struct rpc_stream *st = find(reg, NULL, uuid, NULL);
    if (!st)
        return false;
    if (force) {
        g_mutex_lock(&st->lock);
        st->superseded = true;
        g_mutex_unlock(&st->lock);
        stop_reader(st);   /* it sends end of file */
    }
    stream_unref(st);
    return !force;
}

static void write_all(int fd, const uint8_t *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            if (poll(&pfd, 1, INPUT_WAIT_MS) > 0)
                continue;
            return;   /* the guest does not read: drop the rest */
        }
        if (n <= 0)
            return;   /* the guest side is gone; the reader reports the end */
        data += n;
        len -= n;
    }
}

void stream_handle_packet(struct stream_registry *reg, struct rpc_client *client,
                          const struct wire_header *hdr, const uint8_t *body, size_t len)
{
    struct rpc_stream *st = find(reg, client, NULL, hdr);
    if (!st)
        return;   /* late packets of a stream that already ended */
    if (hdr->status == RPC_STATUS_CONTINUE)
        write_all(st->fd, body, len);
    else
        close_by_client(st);
    stream_unref(st);
}

void stream_registry_remove_client(struct stream_registry *reg, struct rpc_client *client)
{
    g_autoptr(GPtrArray) mine = g_ptr_array_new_with_free_func((GDestroyNotify)stream_unref);
    g_mutex_lock(&reg->lock);
    for (guint i = 0; i < reg->streams->len; i++) {
        struct rpc_stream *st = reg->streams->pdata[i];
        if (st->client == client)
            g_ptr_array_add(mine, stream_ref(st));
    }
    g_mutex_unlock(&reg->lock);
    for (guint i = 0; i < mine->len; i++) {
        struct rpc_stream *st = mine->pdata[i];
        g_mutex_lock(&st->lock);
        st->closed = true;   /* nobody to tell */
        g_mutex_unlock(&st->lock);
        stop_reader(st);
        forget(st);
    }
}
