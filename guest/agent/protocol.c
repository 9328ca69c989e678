#include "protocol.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t agent_format_ready(char *buf, size_t size, const char *boot_id, uint64_t generation,
                          uint64_t mono_ns)
{
    /* boot_id comes from the kernel (a UUID) or our own hex: no quoting needed,
     * but refuse anything that would break the JSON. */
    if (strpbrk(boot_id, "\"\\\n") != NULL)
        return 0;
    int n = snprintf(buf, size,
                     "READY {\"boot_id\":\"%s\",\"generation\":%" PRIu64 ",\"mono_ns\":%" PRIu64
                     ",\"agent\":\"vsnap-agent\"}\n",
                     boot_id, generation, mono_ns);
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

/* Where the value of "key": starts in a flat JSON object, or NULL. Enough for
 * the shim's ACK, whose members are numbers and hex strings. */
static const char *member_value(const char *json, const char *key)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    const char *p = strstr(json, quoted);
    if (!p)
        return NULL;
    p += strlen(quoted);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

static bool member_number(const char *json, const char *key, bool allow_negative, int64_t *out)
{
    const char *p = member_value(json, key);
    if (!p || !((*p >= '0' && *p <= '9') || (allow_negative && *p == '-')))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno || (*end != ',' && *end != '}' && *end != ' '))
        return false;
    *out = v;
    return true;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "entropy" is optional; when present it must be well-formed hex. */
static bool member_entropy(const char *json, struct agent_ack *ack)
{
    ack->entropy_len = 0;
    const char *p = member_value(json, "entropy");
    if (!p)
        return true;
    if (*p++ != '"')
        return false;
    while (*p != '"') {
        int hi = hex_digit(p[0]), lo = hi < 0 ? -1 : hex_digit(p[1]);
        if (hi < 0 || lo < 0 || ack->entropy_len == AGENT_ENTROPY_MAX)
            return false;
        ack->entropy[ack->entropy_len++] = (uint8_t)(hi << 4 | lo);
        p += 2;
    }
    return true;
}

bool agent_parse_ack(const char *line, struct agent_ack *ack, char *why, size_t why_size)
{
    int64_t generation;
    memset(ack, 0, sizeof *ack);
    if (strncmp(line, "ACK {", 5) != 0 || line[strlen(line) - 1] != '}') {
        snprintf(why, why_size, "not an ACK line: '%.60s'", line);
        return false;
    }
    const char *json = line + 4;
    if (!member_number(json, "host_realtime_ns", false, &ack->host_realtime_ns) ||
        !member_number(json, "generation", false, &generation)) {
        snprintf(why, why_size, "ACK without host_realtime_ns or generation: '%.60s'", line);
        return false;
    }
    ack->generation = (uint64_t)generation;
    if (!member_entropy(json, ack)) {
        snprintf(why, why_size, "ACK with malformed entropy");
        return false;
    }
    return true;
}

void agent_command_reply(const char *line, char *reply, size_t size)
{
    if (strcmp(line, "PING") == 0)
        snprintf(reply, size, "PONG\n");
    else if (strcmp(line, "VERSION") == 0)
        snprintf(reply, size, "VERSION %s\n", AGENT_VERSION);
    else if (line[0] == '\0')
        snprintf(reply, size, "ERR empty line\n");
    else
        snprintf(reply, size, "ERR unknown command (PING, VERSION)\n");
}

size_t line_reader_feed(struct line_reader *r, const char *data, size_t len, bool *line_done)
{
    *line_done = false;
    for (size_t i = 0; i < len; i++) {
        if (data[i] == '\n') {
            if (r->len > 0 && r->buf[r->len - 1] == '\r')
                r->len--;
            r->buf[r->len] = '\0';
            *line_done = true;
            return i + 1;
        }
        if (r->len < sizeof r->buf - 1)
            r->buf[r->len++] = data[i];
        else
            r->overflow = true;
    }
    return len;
}

void line_reader_reset(struct line_reader *r)
{
    r->len = 0;
    r->overflow = false;
}
