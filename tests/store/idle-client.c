/* A client that pauses between its requests, for test_store.py: against a
 * server that closes keep-alive connections idle for less than the pause,
 * every request after a pause finds the connection it would reuse closed.
 *
 *     store-idle-client URL PAUSE_MS ROUNDS
 *
 * Each round runs five requests back to back (a PUT of a buffer, a HEAD, a
 * GET, a streamed upload, a ranged fetch), then pauses; each round starts
 * with the next of the five, so each kind of request is the first after a
 * pause once in five rounds. One retry per request (store_options.retries
 * 1): a closed connection may cost a retry, never a failure. Exit status 0
 * when every request succeeded with the right bytes, else 1 and why. */
#include "store/object.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BODY_BYTES (256u << 10)

struct probe {
    struct transport *t;
    GBytes *body;
    guint round;
};

static char *probe_name(const struct probe *p, const char *what)
{
    return g_strdup_printf("idle-client/%s-%u", what, p->round);
}

static bool probe_put(struct probe *p, GError **error)
{
    g_autofree char *name = probe_name(p, "put");
    return p->t->ops->put(p->t, name, p->body, error);
}

static bool probe_head(struct probe *p, GError **error)
{
    guint64 size = 0;
    if (!p->t->ops->stat(p->t, "idle-client/source", &size, error))
        return false;
    if (size == g_bytes_get_size(p->body))
        return true;
    g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "HEAD: %" G_GUINT64_FORMAT " bytes", size);
    return false;
}

static bool probe_get(struct probe *p, GError **error)
{
    g_autoptr(GBytes) got = p->t->ops->get(p->t, "idle-client/source", error);
    if (!got)
        return false;
    if (g_bytes_equal(got, p->body))
        return true;
    g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "GET: other bytes than were put");
    return false;
}

static bool probe_upload(struct probe *p, GError **error)
{
    g_autofree char *name = probe_name(p, "upload");
    struct upload *u = p->t->ops->upload_begin(p->t, name, error);
    if (!u)
        return false;
    gsize len;
    const guint8 *data = g_bytes_get_data(p->body, &len);
    for (gsize at = 0; at < len; at += 64u << 10)
        if (!p->t->ops->upload_write(u, data + at, MIN(64u << 10, len - at), error)) {
            p->t->ops->upload_abort(u);
            return false;
        }
    return p->t->ops->upload_finish(u, error);
}

struct collect {
    GByteArray *got;
};

static bool collect_data(void *ctx, guint range, const guint8 *buf, gsize len, GError **error)
{
    (void)range, (void)error;
    g_byte_array_append(((struct collect *)ctx)->got, buf, len);
    return true;
}

static guint64 collect_restart(void *ctx, guint range)
{
    (void)range;
    struct collect *c = ctx;
    g_byte_array_set_size(c->got, 0);
    return 4096;
}

static bool probe_fetch(struct probe *p, GError **error)
{
    gsize len;
    const guint8 *data = g_bytes_get_data(p->body, &len);
    struct fetch_range r = { 4096, len - 4096 };
    struct collect c = { g_byte_array_new() };
    struct fetch_consumer consumer = { collect_data, collect_restart, NULL, &c };
    bool ok = p->t->ops->fetch(p->t, "idle-client/source", &r, 1, &consumer, error);
    if (ok && (c.got->len != r.end - r.start || memcmp(c.got->data, data + r.start, c.got->len) != 0)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "fetch: other bytes than were put");
        ok = false;
    }
    g_byte_array_unref(c.got);
    return ok;
}

typedef bool (*probe_fn)(struct probe *p, GError **error);

static const struct {
    const char *what;
    probe_fn run;
} requests[] = {
    { "PUT", probe_put }, { "HEAD", probe_head }, { "GET", probe_get },
    { "streamed upload", probe_upload }, { "ranged fetch", probe_fetch },
};

static GBytes *pattern(void)
{
    guint8 *buf = g_malloc(BODY_BYTES);
    guint32 x = 99;
    for (gsize i = 0; i < BODY_BYTES; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (guint8)(x >> 24);
    }
    return g_bytes_new_take(buf, BODY_BYTES);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s URL PAUSE_MS ROUNDS\n", argv[0]);
        return 2;
    }
    struct store_options o;
    store_options_init(&o);
    o.retries = 1;
    o.connections = 2;
    g_autoptr(GError) error = NULL;
    struct probe p = { transport_open(argv[1], &o, &error), pattern(), 0 };
    guint pause_ms = (guint)atoi(argv[2]), rounds = (guint)atoi(argv[3]);
    bool ok = p.t && p.t->ops->put(p.t, "idle-client/source", p.body, &error);
    if (!ok)
        fprintf(stderr, "%s: %s\n", argv[1], error->message);
    for (; ok && p.round < rounds; p.round++) {
        g_usleep((gulong)pause_ms * 1000);
        for (guint k = 0; ok && k < G_N_ELEMENTS(requests); k++) {
            guint i = (p.round + k) % G_N_ELEMENTS(requests);
            ok = requests[i].run(&p, &error);
            if (!ok)
                fprintf(stderr, "round %u, %s%s: %s\n", p.round, requests[i].what,
                        k == 0 ? " (the first after the pause)" : "", error->message);
        }
    }
    if (p.t)
        transport_free(p.t);
    g_bytes_unref(p.body);
    store_options_clear(&o);
    return ok ? 0 : 1;
}
