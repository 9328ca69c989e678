#include "readiness.h"

#include "io.h"
#include "libc.h"
#include "serial.h"
#include "vsockdrv.h"

#define RETRY_MS 100

enum phase {
    PHASE_CONNECT,   /* no socket: connect when retry_at_tsc has passed */
    PHASE_CONNECTING,
    PHASE_WAIT_ACK,
    PHASE_DONE,      /* ACKed; watch for a reset */
};

static void append(char *buf, size_t *len, const char *s)
{
    size_t n = strlen(s);
    memcpy(buf + *len, s, n);
    *len += n;
}

static void append_dec(char *buf, size_t *len, uint64_t v)
{
    char digits[21];
    format_dec(v, digits);
    append(buf, len, digits);
}

static size_t build_announcement(const struct readiness *r, char *buf)
{
    char hex[17];
    size_t len = 0;
    format_hex64(r->boot_id, hex);
    append(buf, &len, "READY {\"boot_id\":\"");
    append(buf, &len, hex);
    append(buf, &len, "\",\"generation\":");
    append_dec(buf, &len, r->generation);
    append(buf, &len, ",\"mono_ns\":");
    /* TSC ticks to ns without overflow for any plausible uptime. */
    uint64_t tsc = rdtsc();
    append_dec(buf, &len, tsc / r->tsc_khz * 1000000 + tsc % r->tsc_khz * 1000000 / r->tsc_khz);
    append(buf, &len, ",\"cid\":");
    append_dec(buf, &len, vsock_guest_cid());
    append(buf, &len, "}\n");
    return len;
}

static void announce(struct readiness *r)
{
    char line[200];
    size_t len = build_announcement(r, line);
    /* A fresh connection has the host's full credit: one short line fits. */
    if (vsock_send(r->sock, line, len) != len) {
        serial_log("error: could not send READY");
        return;
    }
    r->reply_len = 0;
    r->phase = PHASE_WAIT_ACK;
}

static void retry_later(struct readiness *r, bool was_up)
{
    if (r->sock)
        vsock_release(r->sock);
    r->sock = NULL;
    if (was_up)
        r->generation++; /* a new announcement, not a retry of a failed one */
    r->phase = PHASE_CONNECT;
    r->retry_at_tsc = rdtsc() + (was_up ? 0 : RETRY_MS * r->tsc_khz);
}

void readiness_start(struct readiness *r, uint32_t port, uint64_t tsc_khz, uint64_t boot_id)
{
    memset(r, 0, sizeof *r);
    r->port = port;
    r->tsc_khz = tsc_khz ? tsc_khz : 1000000;
    r->boot_id = boot_id;
    r->resets_seen = vsock_transport_resets();
    r->phase = PHASE_CONNECT;
    readiness_poll(r);
}

static void read_ack(struct readiness *r)
{
    while (vsock_readable(r->sock)) {
        char c;
        vsock_recv(r->sock, &c, 1);
        if (c != '\n') {
            if (r->reply_len < sizeof r->reply - 1)
                r->reply[r->reply_len++] = c;
            continue;
        }
        r->reply[r->reply_len] = '\0';
        bool ack = r->reply_len >= 4 && r->reply[0] == 'A' && r->reply[1] == 'C' &&
                   r->reply[2] == 'K' && r->reply[3] == ' ';
        serial_puts(ack ? "vsnap-testguest: readiness acknowledged generation="
                        : "vsnap-testguest: error: readiness answer was not ACK, generation=");
        serial_put_dec(r->generation);
        serial_puts("\n");
        r->phase = PHASE_DONE;
        return;
    }
}

#define PIECE (64u << 10)

static uint8_t touch_range(const struct readiness *r, uint64_t off, uint64_t len)
{
    uint8_t sink = 0;
    for (uint64_t end = off + len; off < end; off += 4096)
        sink ^= r->working_set[off];
    return sink;
}

/* A step through the pieces that visits each once: a prime not dividing
 * their count. */
static uint64_t scatter_stride(uint64_t pieces)
{
    static const uint64_t primes[] = { 7919, 7927, 7933 };
    for (unsigned i = 0; i < sizeof primes / sizeof primes[0]; i++)
        if (pieces % primes[i])
            return primes[i] % pieces ? primes[i] % pieces : 1;
    return 1;
}

/* One read per page: on an on-demand restore each first touch is what brings
 * the page back, so this is the guest's working set coming home. With
 * working_set_touch, only that much of it, 64 KiB pieces in a fixed
 * scattered order that readahead cannot guess (and a record can). */
static void touch_working_set(const struct readiness *r)
{
    uint8_t sink = 0;
    uint64_t pieces = r->working_set_len / PIECE, want = r->working_set_touch / PIECE;
    if (!want || !pieces) {
        sink ^= touch_range(r, 0, r->working_set_len);
    } else {
        uint64_t stride = scatter_stride(pieces);
        for (uint64_t k = 0; k < want && k < pieces; k++)
            sink ^= touch_range(r, (k * stride) % pieces * PIECE, PIECE);
    }
    (void)sink;
}

void readiness_poll(struct readiness *r)
{
    if (vsock_transport_resets() != r->resets_seen) {
        r->resets_seen = vsock_transport_resets();
        touch_working_set(r); /* a reset means a restore: working set first */
        if (r->sock)
            retry_later(r, true); /* the driver already dropped the socket's state */
    }
    if (r->sock && vsock_socket_state(r->sock) == VS_RESET) {
        retry_later(r, r->phase != PHASE_CONNECTING);
        return;
    }
    switch (r->phase) {
    case PHASE_CONNECT:
        if (rdtsc() < r->retry_at_tsc)
            return;
        r->sock = vsock_connect(r->port);
        if (r->sock)
            r->phase = PHASE_CONNECTING;
        else
            r->retry_at_tsc = rdtsc() + RETRY_MS * r->tsc_khz;
        break;
    case PHASE_CONNECTING:
        if (vsock_socket_state(r->sock) == VS_ESTABLISHED)
            announce(r);
        break;
    case PHASE_WAIT_ACK:
        read_ack(r);
        break;
    case PHASE_DONE:
        /* Later lines are not expected; drain them so credit keeps flowing. */
        while (vsock_readable(r->sock)) {
            char sink[64];
            vsock_recv(r->sock, sink, sizeof sink);
        }
        break;
    }
}
