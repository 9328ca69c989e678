/* vsnap-agent's wire protocol, free of any I/O so the host tests drive the
 * very same code the guest runs.
 *
 * Readiness (agent -> host, the shim's readiness port):
 *     READY {"boot_id":"<id>","generation":G,"mono_ns":N,"agent":"vsnap-agent"}\n
 *     ACK {"host_realtime_ns":T,"generation":G,"entropy":"<hex>"}\n   (host -> agent)
 * Command port (host -> agent, host-initiated): one line in, one line out:
 *     PING -> PONG, VERSION -> VERSION <version>, anything else -> ERR <why>.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_VERSION "0.1.0"
#define AGENT_LINE_MAX 1024
#define AGENT_ENTROPY_MAX 64

/* Returns the line length (with its "\n"), or 0 if it does not fit. */
size_t agent_format_ready(char *buf, size_t size, const char *boot_id, uint64_t generation,
                          uint64_t mono_ns);

struct agent_ack {
    int64_t host_realtime_ns;
    uint64_t generation;
    uint8_t entropy[AGENT_ENTROPY_MAX];
    size_t entropy_len;
};

/* Parse one line (without "\n"). false with a reason in why otherwise. */
bool agent_parse_ack(const char *line, struct agent_ack *ack, char *why, size_t why_size);

/* The answer to one command line (without "\n"), written with its "\n". */
void agent_command_reply(const char *line, char *reply, size_t size);

/* Splitting a byte stream into lines, with a bound. */
struct line_reader {
    char buf[AGENT_LINE_MAX];
    size_t len;
    bool overflow; /* the current line is longer than the buffer: it is cut */
};

/* Take bytes up to and including the next "\n". Returns how many bytes of data
 * were used; *line_done says a full line (NUL-terminated in buf, cut if it
 * overflowed) is ready, to be consumed with line_reader_reset(). */
size_t line_reader_feed(struct line_reader *r, const char *data, size_t len, bool *line_done);
void line_reader_reset(struct line_reader *r);
