/* How objects move to and from one store: file:// (transport-file.c),
 * http(s):// and s3:// (transport-http.c, on libcurl's multi interface).
 * Object names are relative to the store's prefix ("objects/<sha256>.zst",
 * "manifests/<id>.json"). Library-internal. */
#pragma once

#include "store/store.h"

struct transport;

/* One ranged read [start, end) of an object, delivered in order. */
struct fetch_range {
    guint64 start, end;
};

/* Receives the bytes of the ranges of one fetch. data() gets each range's
 * bytes in order (ranges in any order, from any thread); a false return with
 * *error set ends the fetch. After a failed attempt, restart() is asked where
 * the range continues (an offset in [start, end]: what the consumer has not
 * used yet) before it is fetched again.
 *
 * may_start (optional) is asked before a range starts or starts again:
 * whether it may now, waiting up to wait_ms for it. A consumer that keeps
 * what it received until it can use it bounds its memory so. The transport
 * asks about ranges in increasing order (a retried one before those after
 * it) and waits while one is held back: the consumer must let start the
 * range whose bytes it waits for. NULL: all may start. */
struct fetch_consumer {
    bool (*data)(void *ctx, guint range, const guint8 *buf, gsize len, GError **error);
    guint64 (*restart)(void *ctx, guint range);
    bool (*may_start)(void *ctx, guint range, guint wait_ms);
    void *ctx;
};

/* Writes one object as its bytes come (write, then finish or abort). */
struct upload;

struct transport_ops {
    /* *size: the object's bytes, or G_MAXUINT64 when it is not there. */
    bool (*stat)(struct transport *t, const char *name, guint64 *size, GError **error);
    /* Whole object; STORE_ERROR_NOT_FOUND when it is not there. */
    GBytes *(*get)(struct transport *t, const char *name, GError **error);
    bool (*put)(struct transport *t, const char *name, GBytes *data, GError **error);
    struct upload *(*upload_begin)(struct transport *t, const char *name, GError **error);
    bool (*upload_write)(struct upload *u, const void *data, gsize len, GError **error);
    bool (*upload_finish)(struct upload *u, GError **error);
    void (*upload_abort)(struct upload *u);
    bool (*fetch)(struct transport *t, const char *name, const struct fetch_range *ranges,
                  guint nranges, const struct fetch_consumer *c, GError **error);
    /* Names of the objects under dir (without dir/), e.g. "manifests". */
    GPtrArray *(*list)(struct transport *t, const char *dir, GError **error);
    void (*free)(struct transport *t);
};

struct transport {
    const struct transport_ops *ops;
    char *url;                         /* as given, for messages */
    const struct store_options *opts;
};

struct transport *transport_open(const char *url, const struct store_options *o, GError **error);
void transport_free(struct transport *t);
typedef struct transport transport;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(transport, transport_free)

/* o, or (when o has no deadline and a timeout_s) local, a copy of o whose
 * deadline starts now: what an operation's transport is opened with. */
const struct store_options *store_options_bounded(const struct store_options *o,
                                                  struct store_options *local);

struct transport *transport_file_open(const char *url, const struct store_options *o, GError **error);
struct transport *transport_http_open(const char *url, const struct store_options *o, GError **error);
