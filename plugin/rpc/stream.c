#include "stream.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Console output is small; one chunk per packet keeps latency low. */
#define CHUNK 4096

struct rpc_stream {
    gint refs;
    struct stream_registry *reg;
    struct rpc_client *client;
    struct wire_header hdr;     /* procedure and serial of the opening call */
    unsigned char uuid[16];
    int fd;
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
    shutdown(st->fd, SHUT_RDWR);
    forget(st);
}

static gpointer relay_output(gpointer data)
{
    struct rpc_stream *st = data;
    char buf[CHUNK];
    for (;;) {
        ssize_t n = read(st->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
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
    memcpy(st->uuid, uuid, 16);
    g_mutex_init(&st->lock);
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
        shutdown(st->fd, SHUT_RDWR);   /* its reader sends end of file */
    }
    stream_unref(st);
    return !force;
}

static void write_all(int fd, const uint8_t *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
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
        shutdown(st->fd, SHUT_RDWR);
        forget(st);
    }
}
