/* Bulk transfers through the shim's hybrid vsock, checked end to end with the
 * test pattern and FNV-1a (tests/lib/pattern.h).
 *
 *   vsock-stream echo <socket> <port> <nconn> <bytes> <seed>
 *       nconn host-initiated connections to the guest's command port, each put
 *       in ECHO mode; bytes of pattern (seed + i) go out on connection i while
 *       the echo is read back at the same time; the echo's checksum must be
 *       the pattern's.
 *   vsock-stream dial <socket> <cmd_port> <host_port> <bytes> <seed_up> <seed_down>
 *       listen on <socket>_<host_port>, ask the guest (DIAL) to connect there
 *       and send bytes of pattern seed_up; send it bytes of pattern seed_down
 *       at the same time; check what arrived here and the guest's DIALED line.
 *   vsock-stream send <socket> <cmd_port> <host_port> <bytes> <seed>
 *       the guest connects, sends bytes and closes at once; this side reads
 *       late and slowly and must still get every byte.
 *
 * Prints one JSON line with the throughput; exits 1 with a message on any
 * mismatch or when nothing moves for 30 s.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pattern.h"

#define CHUNK (64 * 1024)
#define STALL_MS 30000
#define MAX_STREAMS 64

struct stream {
    int fd;
    uint64_t seed, total;
    uint64_t sent, received;
    uint64_t hash;
    bool shut;
};

static void __attribute__((noreturn, format(printf, 1, 2))) fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("vsock-stream: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t number(const char *s)
{
    char *end;
    errno = 0;
    uint64_t v = strtoull(s, &end, 0);
    if (errno || *end || end == s)
        fail("'%s' is not a number", s);
    return v;
}

static int unix_connect(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path)
        fail("socket path %s is too long", path);
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0)
        fail("connect %s: %s", path, strerror(errno));
    return fd;
}

/* Read one line (blocking, byte by byte: only used before the stream starts). */
static void read_line(int fd, char *buf, size_t size)
{
    size_t n = 0;
    while (n + 1 < size) {
        ssize_t r = read(fd, buf + n, 1);
        if (r <= 0)
            fail("connection closed while waiting for a line (got '%.*s')", (int)n, buf);
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
}

static void write_all(int fd, const char *s)
{
    size_t len = strlen(s);
    if (write(fd, s, len) != (ssize_t)len)
        fail("write: %s", strerror(errno));
}

/* CONNECT <port> on the VM's socket and expect OK. */
static int vsock_connect(const char *socket_path, uint64_t port)
{
    int fd = unix_connect(socket_path);
    char line[128];
    snprintf(line, sizeof line, "CONNECT %" PRIu64 "\n", port);
    write_all(fd, line);
    read_line(fd, line, sizeof line);
    if (strncmp(line, "OK ", 3) != 0)
        fail("CONNECT %" PRIu64 " answered '%s'", port, line);
    return fd;
}

/* Bytes [offset, offset + len) of the pattern stream (any offset: a partial
 * send can stop in the middle of a word). */
static void pattern_chunk(uint64_t seed, uint64_t offset, uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len;) {
        uint64_t pos = offset + i;
        uint64_t word = pattern_word(seed, pos / 8);
        size_t in_word = (size_t)(pos % 8), n = 8 - in_word;
        if (n > len - i)
            n = len - i;
        memcpy(buf + i, (const uint8_t *)&word + in_word, n);
        i += n;
    }
}

static bool stream_send(struct stream *s)
{
    uint8_t buf[CHUNK];
    size_t len = s->total - s->sent < CHUNK ? (size_t)(s->total - s->sent) : CHUNK;
    pattern_chunk(s->seed, s->sent, buf, len);
    ssize_t n = send(s->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EAGAIN)
        return false;
    if (n < 0)
        fail("send after %" PRIu64 " bytes: %s", s->sent, strerror(errno));
    s->sent += (uint64_t)n;
    return n > 0;
}

static bool stream_receive(struct stream *s)
{
    uint8_t buf[CHUNK];
    ssize_t n = recv(s->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN)
        return false;
    if (n < 0)
        fail("recv after %" PRIu64 " bytes: %s", s->received, strerror(errno));
    if (n == 0) {
        if (s->received < s->total)
            fail("end of stream after %" PRIu64 " of %" PRIu64 " bytes", s->received, s->total);
        return false;
    }
    s->hash = pattern_fnv1a(s->hash, buf, (size_t)n);
    s->received += (uint64_t)n;
    if (s->received > s->total)
        fail("received %" PRIu64 " bytes, more than the %" PRIu64 " sent", s->received, s->total);
    return true;
}

/* Move data on every stream until each has sent and received total bytes. */
static void pump(struct stream *streams, unsigned n, uint64_t expect_received)
{
    double last_progress = now_s();
    for (;;) {
        struct pollfd pfd[MAX_STREAMS];
        bool done = true;
        for (unsigned i = 0; i < n; i++) {
            struct stream *s = &streams[i];
            pfd[i].fd = s->fd;
            pfd[i].events = (s->received < expect_received ? POLLIN : 0) |
                            (s->sent < s->total ? POLLOUT : 0);
            done &= s->received >= expect_received && s->sent >= s->total;
            if (s->sent >= s->total && !s->shut) {
                shutdown(s->fd, SHUT_WR);
                s->shut = true;
            }
        }
        if (done)
            return;
        if (poll(pfd, n, 1000) < 0)
            fail("poll: %s", strerror(errno));
        bool progress = false;
        for (unsigned i = 0; i < n; i++) {
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
                progress |= stream_receive(&streams[i]);
            if (pfd[i].revents & POLLOUT)
                progress |= stream_send(&streams[i]);
        }
        if (progress)
            last_progress = now_s();
        else if (now_s() - last_progress > STALL_MS / 1000.0)
            fail("no progress for %d s (stream 0: sent %" PRIu64 ", received %" PRIu64 ")",
                 STALL_MS / 1000, streams[0].sent, streams[0].received);
    }
}

static int run_echo(char **argv)
{
    const char *path = argv[0];
    uint64_t port = number(argv[1]), nconn = number(argv[2]), bytes = number(argv[3]),
             seed = number(argv[4]);
    if (nconn == 0 || nconn > MAX_STREAMS || bytes % 8)
        fail("1..%d connections and a byte count that is a multiple of 8, please", MAX_STREAMS);
    struct stream streams[MAX_STREAMS];
    for (unsigned i = 0; i < nconn; i++) {
        streams[i] = (struct stream){.seed = seed + i, .total = bytes,
                                     .hash = PATTERN_FNV_OFFSET_BASIS};
        streams[i].fd = vsock_connect(path, port);
    }
    for (unsigned i = 0; i < nconn; i++) {
        char line[64];
        write_all(streams[i].fd, "ECHO\n");
        read_line(streams[i].fd, line, sizeof line);
        if (strcmp(line, "OK") != 0)
            fail("ECHO answered '%s'", line);
    }
    double start = now_s();
    pump(streams, (unsigned)nconn, bytes);
    double elapsed = now_s() - start;
    for (unsigned i = 0; i < nconn; i++) {
        uint64_t want = pattern_checksum(streams[i].seed, bytes);
        if (streams[i].hash != want)
            fail("connection %u: echo checksum %016" PRIx64 ", sent %016" PRIx64, i,
                 streams[i].hash, want);
        close(streams[i].fd);
    }
    printf("{\"test\":\"echo\",\"connections\":%" PRIu64 ",\"bytes_each_way\":%" PRIu64
           ",\"seconds\":%.3f,\"mib_per_s_each_way\":%.1f}\n",
           nconn, bytes * nconn, elapsed, bytes * nconn / elapsed / (1 << 20));
    return 0;
}

static int listen_at(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path)
        fail("socket path %s is too long", path);
    memcpy(addr.sun_path, path, strlen(path) + 1);
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 4) < 0)
        fail("listen on %s: %s", path, strerror(errno));
    return fd;
}

static int accept_within(int listener, int timeout_ms)
{
    struct pollfd pfd = {.fd = listener, .events = POLLIN};
    if (poll(&pfd, 1, timeout_ms) != 1)
        fail("the guest did not connect within %d ms", timeout_ms);
    int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        fail("accept: %s", strerror(errno));
    return fd;
}

static int run_dial(char **argv)
{
    const char *path = argv[0];
    uint64_t cmd_port = number(argv[1]), host_port = number(argv[2]), bytes = number(argv[3]),
             seed_up = number(argv[4]), seed_down = number(argv[5]);
    if (bytes % 8)
        fail("the byte count must be a multiple of 8");
    char listen_path[200], line[160];
    snprintf(listen_path, sizeof listen_path, "%s_%" PRIu64, path, host_port);
    int listener = listen_at(listen_path);
    int cmd = vsock_connect(path, cmd_port);
    snprintf(line, sizeof line, "DIAL %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", host_port, bytes,
             seed_up);
    write_all(cmd, line);
    struct stream s = {.seed = seed_down, .total = bytes, .hash = PATTERN_FNV_OFFSET_BASIS};
    s.fd = accept_within(listener, 5000);
    double start = now_s();
    pump(&s, 1, bytes);
    /* The guest sent everything; after our SHUT_WR it sees EOF and closes. */
    char tail;
    if (read(s.fd, &tail, 1) != 0)
        fail("the guest sent more than %" PRIu64 " bytes", bytes);
    double elapsed = now_s() - start;
    close(s.fd);
    read_line(cmd, line, sizeof line);
    uint64_t want_up = pattern_checksum(seed_up, bytes), want_down = pattern_checksum(seed_down, bytes);
    char expect[160];
    snprintf(expect, sizeof expect, "DIALED %" PRIu64 " %" PRIu64 " %016" PRIx64, bytes, bytes,
             want_down);
    if (strcmp(line, expect) != 0)
        fail("guest answered '%s', expected '%s'", line, expect);
    if (s.hash != want_up)
        fail("guest-to-host checksum %016" PRIx64 ", expected %016" PRIx64, s.hash, want_up);
    close(cmd);
    close(listener);
    unlink(listen_path);
    printf("{\"test\":\"dial\",\"bytes_each_way\":%" PRIu64 ",\"seconds\":%.3f,"
           "\"mib_per_s_each_way\":%.1f}\n", bytes, elapsed, bytes / elapsed / (1 << 20));
    return 0;
}

/* The guest sends and closes at once; this side reads late and slowly, so
 * the shim still holds data for it when the guest's close arrives. */
static int run_send(char **argv)
{
    const char *path = argv[0];
    uint64_t cmd_port = number(argv[1]), host_port = number(argv[2]), bytes = number(argv[3]),
             seed = number(argv[4]);
    char listen_path[200], line[160];
    snprintf(listen_path, sizeof listen_path, "%s_%" PRIu64, path, host_port);
    int listener = listen_at(listen_path);
    int cmd = vsock_connect(path, cmd_port);
    snprintf(line, sizeof line, "SEND %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", host_port, bytes, seed);
    write_all(cmd, line);
    int fd = accept_within(listener, 5000);
    usleep(300 * 1000);
    uint64_t received = 0, hash = PATTERN_FNV_OFFSET_BASIS;
    uint8_t buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0)
            fail("read after %" PRIu64 " bytes: %s", received, strerror(errno));
        if (n == 0)
            break;
        hash = pattern_fnv1a(hash, buf, (size_t)n);
        received += (uint64_t)n;
        if (received % (256 * 1024) < (uint64_t)n)
            usleep(2000); /* a slow reader */
    }
    read_line(cmd, line, sizeof line);
    char expect[64];
    snprintf(expect, sizeof expect, "SENT %" PRIu64, bytes);
    if (strcmp(line, expect) != 0)
        fail("guest answered '%s', expected '%s'", line, expect);
    if (received != bytes || hash != pattern_checksum(seed, bytes))
        fail("received %" PRIu64 " of %" PRIu64 " bytes, checksum %016" PRIx64 " (want %016" PRIx64 ")",
             received, bytes, hash, pattern_checksum(seed, bytes));
    close(fd);
    close(cmd);
    close(listener);
    unlink(listen_path);
    printf("{\"test\":\"send-and-close\",\"bytes\":%" PRIu64 "}\n", bytes);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "send") == 0)
        return run_send(argv + 2);
    if (argc == 7 && strcmp(argv[1], "echo") == 0)
        return run_echo(argv + 2);
    if (argc == 8 && strcmp(argv[1], "dial") == 0)
        return run_dial(argv + 2);
    fprintf(stderr, "usage: vsock-stream echo <socket> <port> <nconn> <bytes> <seed>\n"
                    "       vsock-stream dial <socket> <cmd_port> <host_port> <bytes> <seed_up> <seed_down>\n"
                    "       vsock-stream send <socket> <cmd_port> <host_port> <bytes> <seed>\n");
    return 2;
}
