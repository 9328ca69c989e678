/* The network benchmark's client: UDP round trips to an echo service (the
 * test guest's port 7, or vsnap-udp-echo), in C so the client is not what
 * is measured. Prints one JSON object.
 *
 *   vsnap-udp-bench latency DEST ROUNDS
 *       one 64-byte datagram at a time: {"rounds", "answered", "median_us", "p99_us"}
 *   vsnap-udp-bench stream DEST MIB SIZE WINDOW
 *       MIB MiB as datagrams of SIZE bytes, WINDOW in flight, every echo
 *       checked against what was sent for its sequence number, lost ones
 *       sent again after 200 ms: {"mib", "seconds", "mib_per_s", "sent", "ok"}
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Datagram seq's bytes: its number, then bytes that depend on it. */
static void fill(uint8_t *buf, size_t size, uint64_t seq)
{
    memcpy(buf, &seq, 8);
    for (size_t i = 8; i < size; i++)
        buf[i] = (uint8_t)(seq * 131 + i * 7);
}

static int wait_readable(int s, int ms)
{
    struct pollfd p = { .fd = s, .events = POLLIN };
    return poll(&p, 1, ms);
}

static int latency(int s, long rounds)
{
    double *rtt = calloc((size_t)rounds, sizeof *rtt);
    long answered = 0;
    uint8_t out[64], in[2048];
    for (long n = 0; n < rounds; n++) {
        fill(out, sizeof out, (uint64_t)n);
        double start = now_s();
        if (send(s, out, sizeof out, 0) < 0)
            return perror("send"), 1;
        while (wait_readable(s, 1000) > 0) {
            ssize_t got = recv(s, in, sizeof in, 0);
            if (got == (ssize_t)sizeof out && memcmp(in, out, sizeof out) == 0) {
                rtt[answered++] = (now_s() - start) * 1e6;
                break;
            }
        }
    }
    if (answered == 0)
        return fprintf(stderr, "no answers\n"), 1;
    qsort(rtt, (size_t)answered, sizeof *rtt, cmp_double);
    double median = answered % 2 ? rtt[answered / 2] : (rtt[answered / 2 - 1] + rtt[answered / 2]) / 2;
    long p99 = (long)(0.99 * (double)(answered - 1) + 0.5);
    printf("{\"rounds\": %ld, \"answered\": %ld, \"median_us\": %.3f, \"p99_us\": %.3f}\n", rounds, answered, median,
           rtt[p99]);
    return 0;
}

static int stream(int s, long mib, size_t size, long window)
{
    uint64_t count = ((uint64_t)mib << 20) / size + (((uint64_t)mib << 20) % size != 0);
    uint8_t *done = calloc(count, 1);
    double *sent_at = calloc(count, sizeof *sent_at);
    uint8_t *out = malloc(size), *in = malloc(65536);
    uint64_t next = 0, received = 0, sent = 0, scan = 0;
    long outstanding = 0;
    double start = now_s(), deadline = start + 300;
    while (received < count) {
        if (now_s() > deadline)
            return fprintf(stderr, "stream: %llu of %llu echoed\n", (unsigned long long)received,
                           (unsigned long long)count), 1;
        while (outstanding < window && next < count) {
            fill(out, size, next);
            if (send(s, out, size, 0) >= 0)
                sent++;
            sent_at[next++] = now_s();
            outstanding++;
        }
        if (wait_readable(s, 200) <= 0) { /* lost: send the oldest ones again */
            double t = now_s();
            for (uint64_t q = scan; q < next; q++) {
                if (!done[q] && t - sent_at[q] > 0.2) {
                    fill(out, size, q);
                    if (send(s, out, size, 0) >= 0)
                        sent++;
                    sent_at[q] = t;
                }
            }
            continue;
        }
        ssize_t got = recv(s, in, 65536, 0);
        uint64_t seq;
        if (got != (ssize_t)size)
            continue;
        memcpy(&seq, in, 8);
        if (seq >= next || done[seq])
            continue;
        fill(out, size, seq);
        if (memcmp(in, out, size) != 0)
            return fprintf(stderr, "stream: datagram %llu came back changed\n", (unsigned long long)seq), 1;
        done[seq] = 1;
        received++;
        outstanding--;
        while (scan < next && done[scan])
            scan++;
    }
    double seconds = now_s() - start;
    printf("{\"mib\": %ld, \"seconds\": %.4f, \"mib_per_s\": %.3f, \"sent\": %llu, \"ok\": true}\n", mib, seconds,
           (double)mib / seconds, (unsigned long long)sent);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: vsnap-udp-bench latency DEST ROUNDS | stream DEST MIB SIZE WINDOW\n");
        return 2;
    }
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    int buf = 1 << 22;
    struct sockaddr_in dest = { .sin_family = AF_INET, .sin_port = htons(7) };
    if (s < 0 || inet_pton(AF_INET, argv[2], &dest.sin_addr) != 1 ||
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) < 0 ||
        connect(s, (struct sockaddr *)&dest, sizeof dest) < 0)
        return perror("vsnap-udp-bench"), 1;
    if (strcmp(argv[1], "latency") == 0)
        return latency(s, atol(argv[3]));
    if (strcmp(argv[1], "stream") == 0 && argc == 6)
        return stream(s, atol(argv[3]), (size_t)atol(argv[4]), atol(argv[5]));
    fprintf(stderr, "vsnap-udp-bench: unknown mode %s\n", argv[1]);
    return 2;
}
