/* The snapshot store: snapshot directories exported to an object store and
 * imported from it through a per-host cache of decompressed layers. See
 * README.md for the object format, the store layout and the cache.
 *
 * Objects are the files of a snapshot directory, each compressed in zstd's
 * seekable format (seekable.h) and named by the SHA-256 of its uncompressed
 * bytes; a manifest per snapshot (manifest.h) names them and is written last.
 * Errors are STORE_ERROR GErrors whose message names the object or file. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define STORE_ERROR (store_error_quark())
GQuark store_error_quark(void);

enum store_error_code {
    STORE_ERROR_IO,         /* local file system */
    STORE_ERROR_NO_SPACE,   /* the cache or destination is full */
    STORE_ERROR_NOT_FOUND,  /* the store has no such object or manifest (404) */
    STORE_ERROR_DENIED,     /* 401/403 */
    STORE_ERROR_REMOTE,     /* any other failed request, after retries */
    STORE_ERROR_CORRUPT,    /* an object does not match its manifest or checksums */
    STORE_ERROR_INVALID,    /* bad argument or configuration */
    STORE_ERROR_FULL,       /* the cache cannot make room (pinned layers) */
    STORE_ERROR_CANCELLED,  /* the caller asked to stop (store_options.cancel) */
    STORE_ERROR_TIMEOUT,    /* the operation's deadline passed (store_options.deadline) */
};

#define STORE_DEFAULT_FRAME_SIZE (1u << 20)
#define STORE_DEFAULT_RANGE_SIZE (8u << 20)
#define STORE_DEFAULT_CONNECTIONS 8
#define STORE_DEFAULT_LEVEL 3
#define STORE_DEFAULT_CACHE_SIZE (20ull << 30)
/* A request slower than this many bytes a second for this many seconds in
 * a row fails (and is retried): a trickle is a stall. */
#define STORE_DEFAULT_MIN_RATE 4096u
#define STORE_DEFAULT_MIN_RATE_WINDOW_S 30u
/* What one operation (a pull, a push, their retries and waits) may take. */
#define STORE_DEFAULT_TIMEOUT_S 3600u

/* What push and pull may be told; store_options_init sets the defaults. */
struct store_options {
    guint frame_size;     /* uncompressed bytes per zstd frame */
    int level;            /* zstd level */
    guint threads;        /* compression / decompression workers */
    guint connections;    /* parallel transfers */
    guint64 range_size;   /* compressed bytes per ranged GET (whole frames) */
    guint64 part_size;    /* S3 multipart part size */
    guint retries;        /* attempts per request beyond the first */
    guint retry_delay_ms; /* first back-off, doubled each attempt */
    /* Every request's floor: one that moves fewer than min_rate bytes a
     * second for min_rate_window_s seconds in a row fails (and is retried),
     * waiting for its first byte included. */
    guint64 min_rate;
    guint min_rate_window_s;
    /* One bound for a whole operation (a pull, a push), its retries and its
     * waits for another process's import of the same layer included: at
     * deadline (g_get_monotonic_time()), whatever still runs fails with
     * STORE_ERROR_TIMEOUT. timeout_s is the configuration's [store] timeout
     * (STORE_DEFAULT_TIMEOUT_S; 0: none), for the caller to set deadline
     * from when it starts an operation (store_options_start_deadline); an
     * operation that starts with no deadline set takes one from timeout_s
     * itself. */
    guint timeout_s;
    gint64 deadline;
    bool progress;        /* bytes, rate and ETA on stderr */
    /* S3: endpoint (http://host:port), region and keys; NULL = AWS_* env. */
    char *s3_endpoint, *s3_region, *s3_access_key, *s3_secret_key;
    /* PEM CA bundle for https:// and S3 over TLS (CURLOPT_CAINFO), for a
     * store behind a private CA: ca_file ([store] ca_file, vsnap-store
     * --ca-file) for every store; s3_ca_file ([s3] ca_file) for s3:// ones,
     * before ca_file; then AWS_CA_BUNDLE for s3://. NULL: libcurl's own.
     * There is no way to turn verification off. */
    char *ca_file, *s3_ca_file;
    /* Optional, for a caller that shows progress itself (a daemon's job
     * information): called from the transfer's threads with bytes done
     * (done) and, as each directory starts, bytes it adds to the total. */
    void (*on_progress)(void *data, guint64 done, guint64 total);
    void *progress_data;
    /* Optional, for a caller that stops transfers from another thread (a
     * daemon's job abort): when *cancel becomes non-zero (g_atomic_int_set),
     * the push or pull under way stops within about 100 ms, even with the
     * server silent, and fails with STORE_ERROR_CANCELLED, leaving what a
     * failure leaves (no partial layer in the cache, no partial directory,
     * no manifest for a push that did not send every object). NULL: never. */
    gint *cancel;
};

void store_options_init(struct store_options *o);
void store_options_clear(struct store_options *o);
/* deadline = now + timeout_s (none when timeout_s is 0). */
void store_options_start_deadline(struct store_options *o);
/* [store] and [s3] of a key file: url (returned in *url when asked),
 * connections, range_size, threads, frame_size, level, timeout (seconds,
 * 0 to 86400), min_rate (bytes a second, at least 1), min_rate_window
 * (seconds, 1 to 3600), cache_dir, cache_size, ca_file; endpoint, region,
 * access_key, secret_key, ca_file. A ca_file must be a readable CA bundle
 * (store_ca_file_check) now, not at the first TLS handshake. */
bool store_options_load(struct store_options *o, const char *path, char **url, char **cache_dir,
                        guint64 *cache_size, GError **error);

/* Whether path is a CA bundle libcurl can use: a readable file with at
 * least one PEM certificate; STORE_ERROR_INVALID naming it (and what, when
 * given: "[store] ca_file", "--ca-file") otherwise. */
bool store_ca_file_check(const char *path, const char *what, GError **error);
/* The CA bundle for url's requests under o (see ca_file above), or NULL. */
const char *store_ca_file_for(const char *url, const struct store_options *o);

/* Whether o asks the transfer under way to stop; if so, *error is set
 * (STORE_ERROR_CANCELLED). */
bool store_cancelled(const struct store_options *o, GError **error);

/* Whether url is a store URL of a known kind and shape (file:///dir,
 * http(s)://host[/prefix], s3://bucket[/prefix]), without contacting it:
 * STORE_ERROR_INVALID naming the URL otherwise. */
bool store_url_check(const char *url, GError **error);

/* "4096", "64K", "1.5G": bytes with an optional K/M/G/T suffix (powers of 1024). */
bool store_parse_size(const char *text, guint64 *out, GError **error);

/* ---- the cache (cache.c) ---- */
struct store_cache;
struct store_cache *store_cache_open(const char *dir, guint64 max_bytes, GError **error);
void store_cache_close(struct store_cache *c);
const char *store_cache_dir(const struct store_cache *c);
/* The host default: /var/cache/vsnap for root, else $XDG_CACHE_HOME/vsnap. */
char *store_cache_default_dir(void);

struct store_cache_entry {
    char digest[65];
    guint64 size;        /* the layer's bytes */
    guint64 disk_bytes;  /* what it occupies (st_blocks) */
    gint64 used_ns;      /* last use (LRU) */
    bool in_use;         /* mapped by a running process or pinned */
};
/* Entries, least recently used first. */
GArray *store_cache_list(struct store_cache *c, GError **error);
guint64 store_cache_bytes(struct store_cache *c, GError **error);
/* Evict least recently used entries not in use until the cache holds at most
 * its size; remove leftovers of imports that died. */
bool store_cache_gc(struct store_cache *c, GError **error);

/* ---- push and pull of snapshot directories (push.c, pull.c) ---- */
struct store_push_args {
    const char *dir;          /* snapshot directory */
    const char *url;          /* store URL */
    const char *domain_xml;   /* optional: the domain definition (text) */
    const char *snapshot_xml; /* optional: the snapshot XML (text) */
    const char *const *skip;  /* optional, NULL-terminated: names of files of the
                               * directories that do not travel (the caller's own
                               * metadata beside the snapshot's files) */
};
struct store_push_result {
    char *id;                 /* manifest id (the snapshot's memory layer id) */
    guint64 bytes_in, bytes_sent;
    guint objects_sent, objects_skipped;
};
void store_push_result_clear(struct store_push_result *r);
/* Push dir and its parents (each parent before its child) to url. */
bool store_push(const struct store_push_args *a, const struct store_options *o,
                struct store_push_result *r, GError **error);

struct store_pull_result {
    guint64 bytes_received;
    guint layers_fetched, layers_cached;
};
/* Pull snapshot id from url into dest (a new directory); its layers come
 * from (or go into) the cache and are hard links to the cached files;
 * parents are pulled into the cache's snapshots/ and dest names them. A
 * pull that fails leaves no layer of its own in the cache. */
bool store_pull(const char *url, const char *id, const char *dest, struct store_cache *cache,
                const struct store_options *o, struct store_pull_result *r, GError **error);
/* Like store_pull, for a caller that keeps the parent snapshot itself
 * (virtvsnapd: in the parent snapshot's own directory): when parent_dir
 * holds it, dest names it there and it is not pulled (nor fetched into the
 * cache's snapshots/) again. */
bool store_pull_onto(const char *url, const char *id, const char *dest, const char *parent_dir,
                     struct store_cache *cache, const struct store_options *o,
                     struct store_pull_result *r, GError **error);

/* Manifest ids in url whose manifest is complete. */
GPtrArray *store_list(const char *url, const struct store_options *o, GError **error);
/* Fetch and decompress every object of id and compare with its digest. */
bool store_verify(const char *url, const char *id, const struct store_options *o, GError **error);
/* "URL/ID" split at the last '/'. */
bool store_split_ref(const char *ref, char **url, char **id, GError **error);
