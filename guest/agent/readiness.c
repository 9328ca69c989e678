/* Announcing readiness: connect to the host's readiness port, send READY,
 * read the ACK; on a reset, announce again with generation + 1. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "clock.h"
#include "log.h"
#include "restore.h"

static void readiness_schedule_retry(struct agent *a, bool was_announced)
{
    struct readiness *r = &a->ready;
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    if (was_announced) {
        r->generation++; /* a new announcement, not a retry of a failed one */
        r->retry_ms = 0;
    } else {
        r->retry_ms = r->retry_ms ? r->retry_ms * 2 : RETRY_FIRST_MS;
        if (r->retry_ms > RETRY_MAX_MS)
            r->retry_ms = RETRY_MAX_MS;
    }
    r->retry_at_ms = monotonic_ms() + r->retry_ms;
    r->state = READY_IDLE;
}

void readiness_connect(struct agent *a)
{
    struct readiness *r = &a->ready;
    r->fd = transport_connect(&a->opts.transport, a->opts.ready_port);
    if (r->fd < 0) {
        readiness_schedule_retry(a, false);
        return;
    }
    r->state = READY_CONNECTING;
}

void readiness_announce(struct agent *a)
{
    struct readiness *r = &a->ready;
    int error = transport_connect_result(r->fd);
    if (error) {
        readiness_schedule_retry(a, false);
        return;
    }
    char line[AGENT_LINE_MAX];
    size_t len = agent_format_ready(line, sizeof line, a->boot_id, r->generation, monotonic_ns());
    if (len == 0 || send(r->fd, line, len, MSG_NOSIGNAL) != (ssize_t)len) {
        log_line("cannot send READY: %s", len ? strerror(errno) : "boot id unusable");
        readiness_schedule_retry(a, false);
        return;
    }
    line_reader_reset(&r->reader);
    r->state = READY_WAIT_ACK;
}

static void apply_ack(struct agent *a, const struct agent_ack *ack)
{
    struct readiness *r = &a->ready;
    log_line("ready generation=%" PRIu64 " acknowledged", r->generation);
    if (ack->entropy_len > 0) {
        if (restore_add_entropy(ack->entropy, ack->entropy_len))
            log_line("added %zu bytes of host entropy", ack->entropy_len);
        else
            log_line("cannot add host entropy: %s", strerror(errno));
    }
    if (r->generation == 0)
        return; /* first boot: the clock came from the kernel's own sources */
    if (!restore_set_clock(ack->host_realtime_ns, a->opts.set_clock))
        log_line("cannot set the clock: %s", strerror(errno));
    else
        log_line("clock %s host time %" PRId64 " ns", a->opts.set_clock ? "set to" : "not set (--no-set-clock):",
                 ack->host_realtime_ns);
}

void readiness_read(struct agent *a)
{
    struct readiness *r = &a->ready;
    char buf[512];
    ssize_t n = recv(r->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        log_line("readiness connection %s; announcing again", n == 0 ? "closed" : "reset");
        readiness_schedule_retry(a, true);
        return;
    }
    for (size_t off = 0; off < (size_t)n;) {
        bool done;
        off += line_reader_feed(&r->reader, buf + off, (size_t)n - off, &done);
        if (!done)
            continue;
        struct agent_ack ack;
        char why[128];
        if (r->state != READY_WAIT_ACK)
            log_line("unexpected line from the host: '%.60s'", r->reader.buf);
        else if (!agent_parse_ack(r->reader.buf, &ack, why, sizeof why))
            log_line("bad answer to READY: %s", why);
        else {
            r->state = READY_ACKED;
            apply_ack(a, &ack);
        }
        line_reader_reset(&r->reader);
    }
}
