/* The command port server (see commands.h). Every connection is a small state
 * machine driven by commands_poll(); nothing blocks except the memory
 * commands themselves, which run to completion. */
#include "commands.h"

#include <stddef.h>

#include "acpi.h"
#include "blk-commands.h"
#include "boot_params.h"
#include "cpl0.h"
#include "gen.h"
#include "io.h"
#include "keyboard.h"
#include "layout.h"
#include "libc.h"
#include "netdrv.h"
#include "notify.h"
#include "pattern.h"
#include "rngdrv.h"
#include "vmgenid.h"
#include "serial.h"
#include "vsockdrv.h"

#define MAX_CLIENTS 36
#define LINE_MAX 256
#define OUT_MAX (64u * 1024u)
#define CHUNK (16u * 1024u)
#define PAGE 4096u

enum mode {
    MODE_LINES,
    MODE_ECHO,
    MODE_DIAL, /* waiting for its DIAL job */
    MODE_HALT, /* sent OK, powering off once it is out */
};

struct dial {
    struct vsock_socket *sock;
    uint64_t len, seed, sent, received, sum;
    bool shut;
    bool close_when_sent; /* SEND: close right after the last byte, read nothing */
};

struct client {
    struct vsock_socket *sock; /* NULL: slot free */
    enum mode mode;
    char line[LINE_MAX];
    size_t line_len;
    bool line_overflow;
    uint8_t out[OUT_MAX];
    size_t out_len;
    struct dial dial;
};

static struct {
    uint32_t port;
    const uint8_t *boot_params;
    struct client clients[MAX_CLIENTS];
    uint8_t chunk[CHUNK];
} server;

/* ---- output ---- */

static void queue_out(struct client *c, const void *data, size_t len)
{
    if (len > OUT_MAX - c->out_len)
        len = OUT_MAX - c->out_len; /* only ECHO can fill it, and it waits first */
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
}

static void reply(struct client *c, const char *text)
{
    queue_out(c, text, strlen(text));
    queue_out(c, "\n", 1);
}

static void flush_out(struct client *c)
{
    size_t done = 0;
    while (done < c->out_len) {
        size_t n = vsock_send(c->sock, c->out + done, c->out_len - done);
        if (n == 0)
            break;
        done += n;
    }
    if (done == 0)
        return;
    for (size_t i = done; i < c->out_len; i++)
        c->out[i - done] = c->out[i];
    c->out_len -= done;
}

/* ---- arguments ---- */

/* Split line into at most max words (in place). */
static unsigned split_words(char *line, char **words, unsigned max)
{
    unsigned n = 0;
    char *p = line;
    while (*p) {
        while (*p == ' ')
            *p++ = '\0';
        if (!*p)
            break;
        if (n == max)
            return max + 1; /* too many */
        words[n++] = p;
        while (*p && *p != ' ')
            p++;
    }
    return n;
}

static bool number(const char *word, uint64_t *out)
{
    return parse_u64(word, strlen(word), out);
}

/* A region a command may touch: RAM from 16 MiB up, 8-byte aligned. */
static bool region(struct client *c, char **args, uint64_t *gpa, uint64_t *len)
{
    if (!number(args[0], gpa) || !number(args[1], len)) {
        reply(c, "ERR address and length must be numbers");
        return false;
    }
    if (*gpa < GUEST_FILL_BASE || *gpa % 8 || *len % 8 ||
        !boot_params_is_ram(server.boot_params, *gpa, *len)) {
        reply(c, "ERR region must be 8-byte aligned RAM at or above 16 MiB");
        return false;
    }
    return true;
}

/* ---- commands ---- */

static void cmd_fill(struct client *c, char **args)
{
    uint64_t gpa, len, seed;
    if (!region(c, args, &gpa, &len))
        return;
    if (!number(args[2], &seed)) {
        reply(c, "ERR seed must be a number");
        return;
    }
    pattern_fill((uint64_t *)(uintptr_t)gpa, 0, len / 8, seed);
    reply(c, "OK");
}

static void cmd_zero(struct client *c, char **args)
{
    uint64_t gpa, len;
    if (!region(c, args, &gpa, &len))
        return;
    void *dst = (void *)(uintptr_t)gpa;
    __asm__ volatile("rep stosb" : "+D"(dst), "+c"(len) : "a"(0) : "memory");
    reply(c, "OK");
}

static void cmd_sum(struct client *c, char **args)
{
    uint64_t gpa, len;
    if (!region(c, args, &gpa, &len))
        return;
    char text[4 + 17] = "SUM ";
    format_hex64(fnv1a64_update(FNV1A64_OFFSET_BASIS, (const void *)(uintptr_t)gpa, len), text + 4);
    reply(c, text);
}

static void cmd_touch(struct client *c, char **args)
{
    uint64_t gpa, len;
    if (!region(c, args, &gpa, &len))
        return;
    volatile const uint8_t *p = (volatile const uint8_t *)(uintptr_t)gpa;
    for (uint64_t off = 0; off < len; off += PAGE)
        (void)p[off];
    reply(c, "OK");
}

static void start_dial(struct client *c, char **args, bool close_when_sent)
{
    uint64_t port, len, seed;
    if (!number(args[0], &port) || port > UINT32_MAX || !number(args[1], &len) || len % 8 ||
        !number(args[2], &seed)) {
        reply(c, "ERR usage: DIAL|SEND <port> <length, multiple of 8> <seed>");
        return;
    }
    struct vsock_socket *s = vsock_connect((uint32_t)port);
    if (!s) {
        reply(c, "ERR no free socket");
        return;
    }
    c->dial = (struct dial){.sock = s, .len = len, .seed = seed, .sum = FNV1A64_OFFSET_BASIS,
                            .close_when_sent = close_when_sent};
    c->mode = MODE_DIAL;
}

static void cmd_dial(struct client *c, char **args) { start_dial(c, args, false); }
static void cmd_send(struct client *c, char **args) { start_dial(c, args, true); }

struct command {
    const char *name;
    unsigned nargs;
    void (*run)(struct client *c, char **args);
};

static void cmd_ping(struct client *c, char **args) { reply(c, "PONG"); }

static void cmd_echo(struct client *c, char **args)
{
    reply(c, "OK");
    c->mode = MODE_ECHO;
}

static void cmd_halt(struct client *c, char **args)
{
    reply(c, "OK");
    c->mode = MODE_HALT;
}

static void cmd_badpkt(struct client *c, char **args)
{
    char text[32] = "OK ";
    format_dec(vsock_send_malformed(), text + 3);
    reply(c, text);
}

/* NET <mac> <link 0|1> <rx packets> <tx packets> */
static void cmd_netinfo(struct client *c, char **args)
{
    if (!net_active()) {
        reply(c, "ERR no network");
        return;
    }
    struct net_info info;
    net_get_info(&info);
    static const char hex[] = "0123456789abcdef";
    char text[96] = "NET ";
    size_t n = 4;
    for (unsigned i = 0; i < 6; i++) {
        text[n++] = hex[info.mac[i] >> 4];
        text[n++] = hex[info.mac[i] & 15];
        text[n++] = i < 5 ? ':' : ' ';
    }
    text[n++] = info.link_up ? '1' : '0';
    text[n++] = ' ';
    format_dec(info.rx_packets, text + n);
    n = strlen(text);
    text[n++] = ' ';
    format_dec(info.tx_packets, text + n);
    reply(c, text);
}

static void cmd_netbadpkt(struct client *c, char **args)
{
    if (!net_active()) {
        reply(c, "ERR no network");
        return;
    }
    char text[32] = "OK ";
    format_dec(net_send_malformed(), text + 3);
    reply(c, text);
}

static uint8_t rng_bytes[RNG_READ_MAX];

static void vsock_keepalive(void)
{
    vsock_poll();
}

/* n bytes from virtio-rng: "RNG <n> <FNV-1a of them>" (the vsock link keeps
 * being served while the device, maybe rate limited, answers). */
static void cmd_rng(struct client *c, char **args)
{
    uint64_t n;
    if (!number(args[0], &n) || n == 0 || n > RNG_READ_MAX) {
        reply(c, "ERR usage: RNG <1..65536>");
        return;
    }
    if (!rng_present()) {
        reply(c, "ERR no virtio-rng device");
        return;
    }
    size_t got = rng_read(rng_bytes, (size_t)n, 20000, vsock_keepalive);
    char text[64] = "RNG ";
    format_dec(got, text + 4);
    size_t len = strlen(text);
    text[len++] = ' ';
    format_hex64(fnv1a64_update(FNV1A64_OFFSET_BASIS, rng_bytes, got), text + len);
    reply(c, got == n ? text : "ERR virtio-rng gave fewer bytes than asked before the time limit");
}

/* "VMGENID <32 hex> gpe=<0|1>": the generation id, and whether its change
 * event was pending (it is cleared). */
static void cmd_vmgenid(struct client *c, char **args)
{
    if (!vmgenid_find()) {
        reply(c, "ERR no VM generation ID in the ACPI tables");
        return;
    }
    char text[64] = "VMGENID ";
    vmgenid_read_hex(text + 8);
    size_t len = strlen(text);
    memcpy(text + len, vmgenid_take_event() ? " gpe=1" : " gpe=0", 7);
    reply(c, text);
}

/* vsnap.gen_mib's consistency check and the idle loop's stall (gen.h). */
static void cmd_gencheck(struct client *c, char **args)
{
    char text[64];
    gen_check(text);
    reply(c, text);
}

static void cmd_stall(struct client *c, char **args)
{
    char text[64];
    gen_stall(text);
    reply(c, text);
}

/* "NMI <count>": the NMIs taken since boot (virsh inject-nmi). */
static void cmd_nmi(struct client *c, char **args)
{
    char text[32] = "NMI ";
    format_dec(cpl0_nmi_count, text + 4);
    reply(c, text);
}

/* "CID <cid>": the guest CID the vsock driver uses now (read again at each
 * transport reset: a clone's restore may give it another). */
static void cmd_cid(struct client *c, char **args)
{
    char text[32] = "CID ";
    format_dec(vsock_guest_cid(), text + 4);
    reply(c, text);
}

/* "KEYS xx xx ...": the scan codes read since the last KEYS (virsh send-key). */
static void cmd_keys(struct client *c, char **args)
{
    static char text[5 + 3 * KEYBOARD_KEPT + 1];
    keyboard_take(text);
    reply(c, text);
}

/* In notify mode: what systemd sends when it shuts down (notify.h). */
static void cmd_notifystop(struct client *c, char **args)
{
    notify_stopping();
    reply(c, "OK");
}

static const struct command commands[] = {
    {"PING", 0, cmd_ping},   {"FILL", 3, cmd_fill}, {"ZERO", 2, cmd_zero},
    {"SUM", 2, cmd_sum},     {"TOUCH", 2, cmd_touch}, {"HALT", 0, cmd_halt},
    {"ECHO", 0, cmd_echo},   {"DIAL", 3, cmd_dial},  {"SEND", 3, cmd_send},
    {"BADPKT", 0, cmd_badpkt}, {"NOTIFYSTOP", 0, cmd_notifystop},
    {"RNG", 1, cmd_rng},     {"VMGENID", 0, cmd_vmgenid},
    {"NETINFO", 0, cmd_netinfo}, {"NETBADPKT", 0, cmd_netbadpkt},
    {"GENCHECK", 0, cmd_gencheck}, {"STALL", 0, cmd_stall},
    {"NMI", 0, cmd_nmi},     {"KEYS", 0, cmd_keys},   {"CID", 0, cmd_cid},
};

static bool same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

#define MAX_WORDS 8 /* BLKBENCH and its seven arguments */

static void run_blk_command(struct client *c, const struct blk_command *cmd, char **args, unsigned nargs)
{
    if (nargs != cmd->nargs) {
        reply(c, "ERR wrong number of arguments");
        return;
    }
    char text[160];
    blk_command_run(cmd, args, text, sizeof text);
    reply(c, text);
}

static void run_line(struct client *c, char *line)
{
    char *words[MAX_WORDS + 1];
    unsigned n = split_words(line, words, MAX_WORDS);
    if (n == 0)
        return;
    if (n > MAX_WORDS) {
        reply(c, "ERR too many arguments");
        return;
    }
    const struct blk_command *blk = blk_command_find(words[0]);
    if (blk) {
        run_blk_command(c, blk, words + 1, n - 1);
        return;
    }
    for (unsigned i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (!same(words[0], commands[i].name))
            continue;
        if (n != commands[i].nargs + 1) {
            reply(c, "ERR wrong number of arguments");
            return;
        }
        commands[i].run(c, words + 1);
        return;
    }
    reply(c, "ERR unknown command");
}

/* ---- per-connection work ---- */

static void read_lines(struct client *c)
{
    char ch;
    while (c->mode == MODE_LINES && c->out_len < OUT_MAX / 2 && vsock_recv(c->sock, &ch, 1)) {
        if (ch == '\r')
            continue;
        if (ch != '\n') {
            if (c->line_len < LINE_MAX - 1)
                c->line[c->line_len++] = ch;
            else
                c->line_overflow = true;
            continue;
        }
        c->line[c->line_len] = '\0';
        if (c->line_overflow)
            reply(c, "ERR line too long");
        else
            run_line(c, c->line);
        c->line_len = 0;
        c->line_overflow = false;
    }
}

static void echo(struct client *c)
{
    while (c->out_len == 0) {
        size_t n = vsock_recv(c->sock, server.chunk, CHUNK);
        if (n == 0)
            return;
        queue_out(c, server.chunk, n);
        flush_out(c);
    }
}

static void dial_finish(struct client *c, const char *error)
{
    struct dial *d = &c->dial;
    if (error) {
        reply(c, error);
        vsock_release(d->sock);
    } else {
        char text[80] = "DIALED ";
        size_t len = 7;
        format_dec(d->sent, text + len);
        len = strlen(text);
        text[len++] = ' ';
        format_dec(d->received, text + len);
        len = strlen(text);
        text[len++] = ' ';
        format_hex64(d->sum, text + len);
        reply(c, text);
        vsock_close(d->sock);
    }
    d->sock = NULL;
    c->mode = MODE_LINES;
}

static void dial_step(struct client *c)
{
    struct dial *d = &c->dial;
    enum vsock_state state = vsock_socket_state(d->sock);
    if (state == VS_CONNECTING)
        return;
    if (state == VS_RESET && d->sent == 0 && d->received == 0) {
        dial_finish(c, "ERR connection refused or reset");
        return;
    }
    while (state == VS_ESTABLISHED && d->sent < d->len) {
        /* The credit may have cut the last send in the middle of a word:
         * generate from the word boundary and skip what already went. */
        uint64_t start = d->sent & ~7ull, skip = d->sent - start;
        uint64_t n = d->len - start < CHUNK ? d->len - start : CHUNK;
        pattern_fill((uint64_t *)server.chunk, start / 8, n / 8, d->seed);
        size_t queued = vsock_send(d->sock, server.chunk + skip, n - skip);
        d->sent += queued;
        if (queued < n - skip)
            break; /* no credit or no TX slot: next poll */
    }
    if (d->sent == d->len && d->close_when_sent) {
        char text[32] = "SENT ";
        format_dec(d->sent, text + 5);
        reply(c, text);
        vsock_close(d->sock); /* at once: what is in flight must still arrive */
        d->sock = NULL;
        c->mode = MODE_LINES;
        return;
    }
    if (d->sent == d->len && !d->shut) {
        vsock_shutdown_send(d->sock);
        d->shut = true;
    }
    size_t n;
    while ((n = vsock_recv(d->sock, server.chunk, CHUNK)) > 0) {
        d->sum = fnv1a64_update(d->sum, server.chunk, n);
        d->received += n;
    }
    if (vsock_eof(d->sock))
        dial_finish(c, state == VS_RESET ? "ERR connection reset" : NULL);
}

static void serve(struct client *c)
{
    if (c->mode == MODE_LINES)
        read_lines(c);
    else if (c->mode == MODE_ECHO)
        echo(c);
    else if (c->mode == MODE_DIAL)
        dial_step(c);
    flush_out(c);
    if (c->mode == MODE_HALT && c->out_len == 0) {
        serial_log("HALT command, powering off");
        for (int i = 0; i < 100; i++) /* let the OK reach the host */
            vsock_poll();
        acpi_request_power_off();
    }
    /* Done when reset, or when the host has sent everything and what we
     * still hold for it is either out or unwanted. */
    bool flushed = c->out_len == 0 || vsock_peer_stopped_reading(c->sock);
    bool gone = vsock_socket_state(c->sock) == VS_RESET ||
                (vsock_eof(c->sock) && flushed && c->mode != MODE_DIAL);
    if (gone) {
        if (c->mode == MODE_DIAL && c->dial.sock)
            vsock_close(c->dial.sock);
        vsock_close(c->sock);
        c->sock = NULL;
    }
}

static void accept_new(void)
{
    for (unsigned i = 0; i < MAX_CLIENTS; i++) {
        struct client *c = &server.clients[i];
        if (c->sock)
            continue;
        c->sock = vsock_accept(server.port);
        if (!c->sock)
            return;
        c->mode = MODE_LINES;
        c->line_len = c->out_len = 0;
        c->line_overflow = false;
    }
}

void commands_start(uint32_t port, const uint8_t *boot_params)
{
    server.port = port;
    server.boot_params = boot_params;
    if (!vsock_listen(port))
        serial_log("error: cannot listen on the command port");
}

void commands_poll(void)
{
    accept_new();
    for (unsigned i = 0; i < MAX_CLIENTS; i++)
        if (server.clients[i].sock)
            serve(&server.clients[i]);
}
