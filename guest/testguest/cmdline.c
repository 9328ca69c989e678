#include "cmdline.h"

#include <stddef.h>

#include "libc.h"
#include "serial.h"

#define PREFIX "vsnap."
#define PREFIX_LEN (sizeof(PREFIX) - 1)

struct word {
    const char *key;
    size_t key_len;
    const char *value; /* NULL when the word has no '=' */
    size_t value_len;
};

static bool key_is(const struct word *w, const char *name)
{
    size_t n = strlen(name);
    if (w->key_len != PREFIX_LEN + n)
        return false;
    for (size_t i = 0; i < w->key_len; i++) {
        char want = i < PREFIX_LEN ? PREFIX[i] : name[i - PREFIX_LEN];
        if (w->key[i] != want)
            return false;
    }
    return true;
}

static bool is_vsnap_option(const struct word *w)
{
    if (w->key_len < PREFIX_LEN)
        return false;
    for (size_t i = 0; i < PREFIX_LEN; i++) {
        if (w->key[i] != PREFIX[i])
            return false;
    }
    return true;
}

static void put_span(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        serial_putc(s[i]);
}

static void report(const char *what, const struct word *w, const char *why)
{
    serial_puts("vsnap-testguest: ");
    serial_puts(what);
    serial_puts(": option ");
    put_span(w->key, w->key_len);
    if (w->value) {
        serial_putc('=');
        put_span(w->value, w->value_len);
    }
    serial_puts(": ");
    serial_puts(why);
    serial_puts("\n");
}

static bool parse_number(const struct word *w, uint64_t *out)
{
    if (!w->value || !parse_u64(w->value, w->value_len, out)) {
        report("error", w, "expected a decimal or 0x-prefixed hexadecimal number");
        return false;
    }
    return true;
}

static bool parse_flag(const struct word *w, bool *out)
{
    uint64_t v;
    if (!w->value || !parse_u64(w->value, w->value_len, &v) || v > 1) {
        report("error", w, "expected 0 or 1");
        return false;
    }
    *out = v == 1;
    return true;
}

static bool apply_word(const struct word *w, struct options *opts)
{
    if (!is_vsnap_option(w))
        return true;
    if (key_is(w, "fill_mib"))
        return parse_number(w, &opts->fill_mib);
    if (key_is(w, "ws_mib"))
        return parse_number(w, &opts->ws_mib);
    if (key_is(w, "seed"))
        return parse_number(w, &opts->seed);
    if (key_is(w, "delay_ms"))
        return parse_number(w, &opts->delay_ms);
    if (key_is(w, "gen_mib"))
        return parse_number(w, &opts->gen_mib);
    if (key_is(w, "gen_mbps"))
        return parse_number(w, &opts->gen_mbps);
    if (key_is(w, "heartbeat_ms"))
        return parse_number(w, &opts->heartbeat_ms);
    if (key_is(w, "fill_clean"))
        return parse_flag(w, &opts->fill_clean);
    if (key_is(w, "idle_spin"))
        return parse_flag(w, &opts->idle_spin);
    if (key_is(w, "halt_after_ready"))
        return parse_flag(w, &opts->halt_after_ready);
    if (key_is(w, "reboot_after_ready"))
        return parse_flag(w, &opts->reboot_after_ready);
    if (key_is(w, "fault_after_ready"))
        return parse_flag(w, &opts->fault_after_ready);
    if (key_is(w, "hvc"))
        return parse_flag(w, &opts->hvc);
    /* The vsock side's options: vsock-service.c reads them itself. */
    if (key_is(w, "ready_port") || key_is(w, "cmd_port") || key_is(w, "notify_port"))
        return true;
    /* The network's: netdrv.c reads them itself. */
    if (key_is(w, "ip") || key_is(w, "mac"))
        return true;
    report("warning", w, "unknown option, ignored");
    return true;
}

/* Split the word starting at s (no leading space) into key and value. */
static struct word split_word(const char *s, size_t len)
{
    struct word w = { .key = s, .key_len = len };
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '=') {
            w.key_len = i;
            w.value = s + i + 1;
            w.value_len = len - i - 1;
            break;
        }
    }
    return w;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n';
}

bool cmdline_parse(const char *cmdline, struct options *opts)
{
    *opts = (struct options){ 0 };
    const char *p = cmdline;
    bool ok = true;
    while (*p) {
        while (is_space(*p))
            p++;
        size_t len = 0;
        while (p[len] && !is_space(p[len]))
            len++;
        if (len) {
            struct word w = split_word(p, len);
            ok = apply_word(&w, opts) && ok;
        }
        p += len;
    }
    if (ok && opts->halt_after_ready + opts->reboot_after_ready + opts->fault_after_ready > 1) {
        serial_log("error: only one of vsnap.halt_after_ready, vsnap.reboot_after_ready and "
                   "vsnap.fault_after_ready can be set");
        ok = false;
    }
    return ok;
}
