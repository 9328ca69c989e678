/* The inside of the http(s):// and s3:// transport, shared by its four
 * files: transport-http.c (requests, listings, opening), transport-http-
 * upload.c (streamed PUT, S3 multipart), transport-http-fetch.c (ranged
 * reads on several connections) and transport-http-pool.c (the multi
 * handles that keep connections open between requests). Library-internal. */
#pragma once

#include "store/transport.h"

#include <curl/curl.h>

struct http_transport {
    struct transport base;
    bool s3;
    char *prefix_url;    /* URL of the prefix, no trailing slash */
    char *endpoint;      /* S3: scheme://host[:port] */
    char *bucket_url;    /* S3: endpoint/bucket */
    char *key_prefix;    /* S3: prefix/ or "" */
    char *sigv4;         /* S3: "aws:amz:<region>:s3" */
    char *userpwd;       /* S3: access:secret */
    char *token_header;  /* S3: x-amz-security-token, when a session token is set */
    char *ca_file;       /* CURLOPT_CAINFO (store_ca_file_for), NULL: libcurl's default */
    /* transport-http-pool.c: every easy handle uses share (DNS, TLS
     * sessions); idle holds the multi handles no request runs on, each
     * with its open connections */
    CURLSH *share;
    GMutex share_locks[CURL_LOCK_DATA_LAST];
    GMutex pool_lock;
    GPtrArray *idle;
};

struct reply {
    long status;
    GByteArray *body;
    char *etag;
    curl_off_t length;   /* Content-Length (a HEAD's too), -1 when none */
};

static inline struct http_transport *ht(struct transport *t)
{
    return (struct http_transport *)t;
}

/* How long a wait for the network lasts at most before the cancel flag
 * (store_options.cancel) is looked at again. */
#define CANCEL_POLL_MS 100

/* Defined in transport-http.c, where each has its comment. */
/* <prefix URL>/<name> */
char *http_object_url(struct http_transport *h, const char *name);
/* the operation's deadline (store_options.deadline): ms left, or -1; the
 * STORE_ERROR_TIMEOUT once it passed */
long http_ms_left(const struct store_options *o);
bool http_deadline_error(const struct store_options *o, GError **error, const char *method,
                         const char *url);
/* an easy handle set up for this store (timeouts, S3 signing, headers) */
CURL *http_easy_new(struct http_transport *h, const char *url, struct curl_slist **headers);
/* handles run to completion on one of the transport's multi handles */
bool http_multi_run(struct http_transport *h, CURL **handles, guint n, CURLcode *results,
                    const gint *cancel);
bool http_retryable(CURLcode rc, long status);
void http_status_error(GError **error, const char *method, const char *url, CURLcode rc,
                       long status, const char *errbuf, guint attempts);
/* whole requests, retried; the reply's body and ETag in *r */
bool http_request_or_cancel(struct http_transport *h, const char *method, const char *url,
                            GBytes *body, struct reply *r, const gint *cancel, GError **error);
bool http_request(struct http_transport *h, const char *method, const char *url, GBytes *body,
                  struct reply *r, GError **error);
void http_reply_clear(struct reply *r);
/* libcurl write callback collecting a reply's body into a struct reply */
size_t http_reply_body(char *data, size_t size, size_t n, void *user);
bool http_expect_2xx(const struct reply *r, const char *method, const char *url, GError **error);

/* transport-http-pool.c: the share object and the idle multi handles,
 * made and freed with the transport; a multi handle is taken by the one
 * thread that runs requests on it, and given back with no transfers. */
void http_pool_init(struct http_transport *h);
void http_pool_clear(struct http_transport *h);
CURLM *http_multi_take(struct http_transport *h);
void http_multi_give(struct http_transport *h, CURLM *m);

/* The transport's operations (http_ops) from the upload and fetch files. */
struct upload *http_upload_begin(struct transport *t, const char *name, GError **error);
bool http_upload_write(struct upload *u, const void *data, gsize len, GError **error);
bool http_upload_finish(struct upload *u, GError **error);
void http_upload_abort(struct upload *u);
bool http_fetch(struct transport *t, const char *name, const struct fetch_range *ranges,
                guint nranges, const struct fetch_consumer *c, GError **error);
