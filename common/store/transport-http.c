/* http(s):// and s3:// stores, on libcurl's multi interface: ranged GETs on
 * several connections with retries and back-off, PUT (streamed for HTTP,
 * multipart for S3), HEAD, listings (an HTTP server's directory index, S3's
 * ListObjectsV2). S3 requests are signed by libcurl (CURLOPT_AWS_SIGV4) with
 * path-style addressing: <endpoint>/<bucket>/<prefix>/<name>. Connections
 * stay open from one request to the next (transport-http-pool.c). This
 * file: requests, listings and opening; uploads and ranged reads are in
 * transport-http-upload.c and transport-http-fetch.c. */
#include "store/transport-http.h"

#include <string.h>

char *http_object_url(struct http_transport *h, const char *name)
{
    return g_strdup_printf("%s/%s", h->prefix_url, name);
}

/* ---- the operation's deadline (store_options.deadline) ---- */

/* Milliseconds left before the deadline (at least 1 while it is ahead, 0
 * once it passed), or -1 without one. */
long http_ms_left(const struct store_options *o)
{
    if (!o->deadline)
        return -1;
    gint64 left = o->deadline - g_get_monotonic_time();
    return left <= 0 ? 0 : (long)MAX(1, MIN(left / 1000, (gint64)G_MAXINT32));
}

static bool deadline_passed(const struct store_options *o)
{
    return http_ms_left(o) == 0;
}

/* STORE_ERROR_TIMEOUT for method url when the deadline passed (whatever
 * else went wrong with the request: the deadline cut it); false when not. */
bool http_deadline_error(const struct store_options *o, GError **error, const char *method, const char *url)
{
    if (!deadline_passed(o))
        return false;
    g_autofree char *bound = o->timeout_s ? g_strdup_printf(" of %u s", o->timeout_s) : g_strdup("");
    g_set_error(error, STORE_ERROR, STORE_ERROR_TIMEOUT,
                "%s %s: not done when the operation's deadline%s passed (the server is stalled, or the "
                "transfer is too slow for it)", method, url, bound);
    return true;
}

/* ---- one easy handle, set up for this store ---- */

CURL *http_easy_new(struct http_transport *h, const char *url, struct curl_slist **headers)
{
    CURL *e = curl_easy_init();
    long left = http_ms_left(h->base.opts);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, left < 0 ? 10000L : MAX(1L, MIN(left, 10000L)));
    if (left >= 0)   /* the whole http_request, connect to last byte, ends by the deadline */
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, MAX(1L, left));
    /* No request waits forever, nor trickles on: one slower than the floor
     * for the window fails (and is retried). libcurl trips when the speed
     * is below the limit, so a limit of 1 never cut a 1 byte/s trickle. */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, (long)MAX(1u, h->base.opts->min_rate));
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)MAX(1u, h->base.opts->min_rate_window_s));
    curl_easy_setopt(e, CURLOPT_USERAGENT, "vsnap-store");
    curl_easy_setopt(e, CURLOPT_SHARE, h->share);
    /* HTTP/1.1 even where a server offers HTTP/2 over TLS: libcurl would
     * multiplex every range of a fetch onto the connection an earlier
     * request left open in the pool, one TCP stream where the ranges are
     * meant to add up the per-connection throughput of N (S3 itself speaks
     * HTTP/1.1 only) */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    if (h->ca_file)   /* beside libcurl's CA directory; verification stays on */
        curl_easy_setopt(e, CURLOPT_CAINFO, h->ca_file);
    if (h->s3) {
        curl_easy_setopt(e, CURLOPT_AWS_SIGV4, h->sigv4);
        curl_easy_setopt(e, CURLOPT_USERPWD, h->userpwd);
        /* libcurl 7.88 does not add the payload hash header itself; S3
         * servers (RGW among them) refuse the signature without it */
        *headers = curl_slist_append(*headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
        if (h->token_header)
            *headers = curl_slist_append(*headers, h->token_header);
    } else {
        /* no 100-continue round trip; S3 keeps it: libcurl would sign the
         * removed header and the signature would no longer match */
        *headers = curl_slist_append(*headers, "Expect:");
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, *headers);
    return e;
}

/* Run handles to completion on one of the transport's multi handles;
 * results[i] per handle. With cancel set (non-zero) the transfers still
 * running stop: false, and their results are CURLE_ABORTED_BY_CALLBACK
 * (libcurl closes the connection of a transfer removed before its end, so
 * no half-read reply is left on a connection the next request reuses). */
bool http_multi_run(struct http_transport *h, CURL **handles, guint n, CURLcode *results,
                    const gint *cancel)
{
    CURLM *m = http_multi_take(h);
    for (guint i = 0; i < n; i++)
        curl_multi_add_handle(m, handles[i]);
    int running = 1;
    bool stopped = false;
    while (running) {
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)))
            if (msg->msg == CURLMSG_DONE)
                for (guint i = 0; i < n; i++)
                    if (handles[i] == msg->easy_handle)
                        results[i] = msg->data.result;
        if (running && cancel && g_atomic_int_get(cancel)) {
            stopped = true;
            break;
        }
        if (running)
            curl_multi_poll(m, NULL, 0, cancel ? CANCEL_POLL_MS : 1000, NULL);
    }
    for (guint i = 0; i < n; i++) {
        if (stopped && results[i] == CURLE_OK)
            results[i] = CURLE_ABORTED_BY_CALLBACK;
        curl_multi_remove_handle(m, handles[i]);
    }
    http_multi_give(h, m);
    return !stopped;
}

/* A retry's back-off: false (with *error) when a cancel comes meanwhile. */
static bool backoff(const gint *cancel, gulong us, const char *what,
                    GError **error)
{
    for (gint64 end = g_get_monotonic_time() + (gint64)us;;) {
        if (cancel && g_atomic_int_get(cancel)) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_CANCELLED, "%s: cancelled", what);
            return false;
        }
        gint64 left = end - g_get_monotonic_time();
        if (left <= 0)
            return true;
        g_usleep((gulong)MIN(left, (gint64)CANCEL_POLL_MS * 1000));
    }
}

static int error_code_for(long status)
{
    return status == 404 ? STORE_ERROR_NOT_FOUND
           : status == 401 || status == 403 ? STORE_ERROR_DENIED : STORE_ERROR_REMOTE;
}

/* The server's certificate or the local TLS set-up is wrong: the same
 * request fails the same way every time (an untrusted or expired
 * certificate, a name it does not cover, a CA bundle libcurl cannot load).
 * A handshake cut by the network is CURLE_SSL_CONNECT_ERROR, and retried. */
static bool tls_refused(CURLcode rc)
{
    switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:   /* also CURLE_SSL_CACERT */
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
        return true;
    default:
        return false;
    }
}

bool http_retryable(CURLcode rc, long status)
{
    return (rc != CURLE_OK && rc != CURLE_WRITE_ERROR && rc != CURLE_ABORTED_BY_CALLBACK &&
            !tls_refused(rc)) ||
           status >= 500 || status == 429;
}

void http_status_error(GError **error, const char *method, const char *url, CURLcode rc,
                         long status, const char *errbuf, guint attempts)
{
    const char *said = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    if (rc == CURLE_PEER_FAILED_VERIFICATION)
        g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE,
                    "%s %s: %s (TLS, not retried; a server whose certificate a private CA "
                    "signed needs that CA's bundle: [store] ca_file, --ca-file or AWS_CA_BUNDLE)",
                    method, url, said);
    else if (tls_refused(rc))
        g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE, "%s %s: %s (TLS set-up, not retried)",
                    method, url, said);
    else if (rc != CURLE_OK)
        g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE, "%s %s: %s (%u attempt%s)", method, url,
                    said, attempts, attempts == 1 ? "" : "s");
    else
        g_set_error(error, STORE_ERROR, error_code_for(status), "%s %s: HTTP %ld%s", method, url,
                    status, status == 404 ? " (no such object)"
                            : status == 403 ? " (access denied)"
                            : status == 416 ? " (range not satisfiable: the object is shorter)" : "");
}

/* ---- whole requests: HEAD, GET, PUT of a buffer, POST, DELETE ---- */

size_t http_reply_body(char *data, size_t size, size_t n, void *user)
{
    struct reply *r = user;
    if (r->body->len + size * n > (64u << 20))
        return 0;   /* no reply we read is this large */
    g_byte_array_append(r->body, (const guint8 *)data, size * n);
    return size * n;
}

static size_t http_reply_header(char *data, size_t size, size_t n, void *user)
{
    struct reply *r = user;
    gsize len = size * n;
    if (len > 5 && g_ascii_strncasecmp(data, "etag:", 5) == 0) {
        g_free(r->etag);
        r->etag = g_strstrip(g_strndup(data + 5, len - 5));
    }
    return len;
}

struct body_reader {
    const guint8 *data;
    gsize len, pos;
};

static size_t body_read(char *buf, size_t size, size_t n, void *user)
{
    struct body_reader *b = user;
    gsize take = MIN(size * n, b->len - b->pos);
    memcpy(buf, b->data + b->pos, take);
    b->pos += take;
    return take;
}

/* A reused connection the server closed as the request went out: libcurl
 * sends the request again on a new one, from the start of the body. */
static int body_seek(void *user, curl_off_t offset, int origin)
{
    struct body_reader *b = user;
    if (origin != SEEK_SET || offset < 0 || (gsize)offset > b->len)
        return CURL_SEEKFUNC_CANTSEEK;
    b->pos = (gsize)offset;
    return CURL_SEEKFUNC_OK;
}

/* One request with retries (connection failures, 5xx); the reply's status
 * is the caller's to judge. cancel: stop when it becomes non-zero
 * (STORE_ERROR_CANCELLED); NULL for the clean-up that follows a cancel. */
bool http_request_or_cancel(struct http_transport *h, const char *method, const char *url,
                              GBytes *body, struct reply *r, const gint *cancel, GError **error)
{
    const struct store_options *o = h->base.opts;
    r->body = g_byte_array_new();
    for (guint attempt = 0;; attempt++) {
        if (http_deadline_error(o, error, method, url))
            return false;
        struct curl_slist *headers = NULL;
        CURL *e = http_easy_new(h, url, &headers);
        char errbuf[CURL_ERROR_SIZE] = "";
        struct body_reader reader = { 0 };
        g_byte_array_set_size(r->body, 0);
        g_clear_pointer(&r->etag, g_free);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, http_reply_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, http_reply_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
        if (strcmp(method, "HEAD") == 0)
            curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
        else if (strcmp(method, "GET") != 0)
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
        if (body) {
            reader.data = g_bytes_get_data(body, &reader.len);
            curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(e, CURLOPT_READFUNCTION, body_read);
            curl_easy_setopt(e, CURLOPT_READDATA, &reader);
            curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, body_seek);
            curl_easy_setopt(e, CURLOPT_SEEKDATA, &reader);
            curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)reader.len);
            if (strcmp(method, "PUT") != 0)
                curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
        } else if (strcmp(method, "POST") == 0) {
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
        }
        CURLcode rc = CURLE_OK;
        bool whole = http_multi_run(h, &e, 1, &rc, cancel);
        r->status = 0;
        r->length = -1;
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
        curl_easy_getinfo(e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &r->length);
        curl_easy_cleanup(e);
        curl_slist_free_all(headers);
        if (!whole) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_CANCELLED, "%s %s: cancelled", method, url);
            return false;
        }
        if (rc == CURLE_OK && !http_retryable(rc, r->status))
            return true;
        if (attempt >= o->retries || !http_retryable(rc, r->status)) {
            if (!http_deadline_error(o, error, method, url))
                http_status_error(error, method, url, rc, r->status, errbuf, attempt + 1);
            return false;
        }
        gint64 delay_us = (gint64)o->retry_delay_ms * 1000 << MIN(attempt, 10u);
        long left = http_ms_left(o);
        if (left >= 0)   /* the next attempt fails at once when the deadline passed meanwhile */
            delay_us = MIN(delay_us, (gint64)left * 1000);
        g_autofree char *what = g_strdup_printf("%s %s", method, url);
        if (!backoff(cancel, (gulong)delay_us, what, error))
            return false;
    }
}

bool http_request(struct http_transport *h, const char *method, const char *url, GBytes *body,
                    struct reply *r, GError **error)
{
    return http_request_or_cancel(h, method, url, body, r, h->base.opts->cancel, error);
}

void http_reply_clear(struct reply *r)
{
    if (r->body)
        g_byte_array_unref(r->body);
    g_free(r->etag);
    memset(r, 0, sizeof(*r));
}

bool http_expect_2xx(const struct reply *r, const char *method, const char *url, GError **error)
{
    if (r->status >= 200 && r->status < 300)
        return true;
    http_status_error(error, method, url, CURLE_OK, r->status, "", 1);
    return false;
}

static bool http_stat(struct transport *t, const char *name, guint64 *size, GError **error)
{
    g_autofree char *url = http_object_url(ht(t), name);
    struct reply r = { 0 };
    bool ok = http_request(ht(t), "HEAD", url, NULL, &r, error);
    *size = G_MAXUINT64;
    if (ok && r.status != 404 && http_expect_2xx(&r, "HEAD", url, error)) {
        if (r.length < 0) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE, "HEAD %s: no length", url);
            ok = false;
        } else {
            *size = (guint64)r.length;
        }
    } else if (ok && r.status != 404) {
        ok = false;
    }
    http_reply_clear(&r);
    return ok;
}

static GBytes *http_get(struct transport *t, const char *name, GError **error)
{
    g_autofree char *url = http_object_url(ht(t), name);
    struct reply r = { 0 };
    GBytes *out = NULL;
    if (http_request(ht(t), "GET", url, NULL, &r, error) && http_expect_2xx(&r, "GET", url, error))
        out = g_byte_array_free_to_bytes(g_steal_pointer(&r.body));
    http_reply_clear(&r);
    return out;
}

static bool http_put(struct transport *t, const char *name, GBytes *data, GError **error)
{
    g_autofree char *url = http_object_url(ht(t), name);
    struct reply r = { 0 };
    bool ok = http_request(ht(t), "PUT", url, data, &r, error) && http_expect_2xx(&r, "PUT", url, error);
    http_reply_clear(&r);
    return ok;
}

/* ---- listings ---- */

/* An HTTP server's directory index (nginx autoindex, any HTML or JSON
 * listing): the names in its href="..." or "name":"..." attributes. */
static GPtrArray *http_list(struct transport *t, const char *dir, GError **error)
{
    g_autofree char *name = g_strdup_printf("%s/", dir);
    g_autoptr(GError) e = NULL;
    g_autoptr(GBytes) page = http_get(t, name, &e);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    if (!page) {
        if (g_error_matches(e, STORE_ERROR, STORE_ERROR_NOT_FOUND))
            return names;
        g_ptr_array_unref(names);
        g_propagate_error(error, g_steal_pointer(&e));
        return NULL;
    }
    g_autofree char *text = g_strndup(g_bytes_get_data(page, NULL), g_bytes_get_size(page));
    static const char *const marks[] = { "href=\"", "\"name\":\"" };
    for (guint k = 0; k < G_N_ELEMENTS(marks); k++)
        for (const char *p = strstr(text, marks[k]); p; p = strstr(p, marks[k])) {
            p += strlen(marks[k]);
            const char *end = strchr(p, '"');
            if (!end)
                break;
            g_autofree char *raw = g_strndup(p, end - p);
            g_autofree char *plain = g_uri_unescape_string(raw, NULL);
            const char *base = plain ? strrchr(plain, '/') : NULL;
            const char *n = base ? base + 1 : plain;
            if (n && *n && !g_ptr_array_find_with_equal_func(names, n, g_str_equal, NULL))
                g_ptr_array_add(names, g_strdup(n));
            p = end;
        }
    return names;
}

static char *xml_value(const char *from, const char *tag, const char **after)
{
    g_autofree char *open = g_strdup_printf("<%s>", tag), *close = g_strdup_printf("</%s>", tag);
    const char *s = strstr(from, open);
    const char *e = s ? strstr(s, close) : NULL;
    if (!e)
        return NULL;
    if (after)
        *after = e + strlen(close);
    return g_strndup(s + strlen(open), e - s - strlen(open));
}

/* S3 ListObjectsV2 under <prefix>/<dir>/, page after page. */
static GPtrArray *s3_list(struct transport *t, const char *dir, GError **error)
{
    struct http_transport *h = ht(t);
    g_autofree char *prefix = g_strdup_printf("%s%s/", h->key_prefix, dir);
    g_autofree char *eprefix = g_uri_escape_string(prefix, NULL, FALSE);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *token = NULL;
    for (guint page = 0; page < 100000; page++) {
        g_autofree char *etoken = token ? g_uri_escape_string(token, NULL, FALSE) : NULL;
        g_autofree char *url = g_strdup_printf("%s?%s%s%slist-type=2&prefix=%s", h->bucket_url,
                                               etoken ? "continuation-token=" : "", etoken ? etoken : "",
                                               etoken ? "&" : "", eprefix);
        struct reply r = { 0 };
        if (!http_request(h, "GET", url, NULL, &r, error) || !http_expect_2xx(&r, "GET", url, error)) {
            http_reply_clear(&r);
            g_ptr_array_unref(names);
            return NULL;
        }
        g_byte_array_append(r.body, (const guint8 *)"", 1);
        const char *p = (const char *)r.body->data;
        for (char *key; (key = xml_value(p, "Key", &p));) {
            if (g_str_has_prefix(key, prefix) && !strchr(key + strlen(prefix), '/'))
                g_ptr_array_add(names, g_strdup(key + strlen(prefix)));
            g_free(key);
        }
        g_autofree char *truncated = xml_value((const char *)r.body->data, "IsTruncated", NULL);
        g_free(token);
        token = xml_value((const char *)r.body->data, "NextContinuationToken", NULL);
        http_reply_clear(&r);
        if (!truncated || strcmp(truncated, "true") != 0 || !token)
            break;
    }
    return names;
}

static GPtrArray *any_list(struct transport *t, const char *dir, GError **error)
{
    return ht(t)->s3 ? s3_list(t, dir, error) : http_list(t, dir, error);
}

static void http_free(struct transport *t)
{
    struct http_transport *h = ht(t);
    http_pool_clear(h);
    g_free(h->prefix_url);
    g_free(h->endpoint);
    g_free(h->bucket_url);
    g_free(h->key_prefix);
    g_free(h->sigv4);
    g_free(h->userpwd);
    g_free(h->token_header);
    g_free(h->ca_file);
    g_free(t->url);
    g_free(h);
}

static const struct transport_ops http_ops = {
    .stat = http_stat, .get = http_get, .put = http_put,
    .upload_begin = http_upload_begin, .upload_write = http_upload_write,
    .upload_finish = http_upload_finish, .upload_abort = http_upload_abort,
    .fetch = http_fetch, .list = any_list, .free = http_free,
};

static const char *first_set(const char *a, const char *b, const char *c)
{
    return a && *a ? a : b && *b ? b : c && *c ? c : NULL;
}

static bool s3_setup(struct http_transport *h, const char *url, const struct store_options *o,
                     GError **error)
{
    const char *rest = url + strlen("s3://");
    const char *slash = strchr(rest, '/');
    g_autofree char *bucket = slash ? g_strndup(rest, slash - rest) : g_strdup(rest);
    g_autofree char *prefix = slash ? g_strdup(slash + 1) : g_strdup("");
    while (*prefix && prefix[strlen(prefix) - 1] == '/')
        prefix[strlen(prefix) - 1] = '\0';
    const char *region = first_set(o->s3_region, g_getenv("AWS_REGION"), g_getenv("AWS_DEFAULT_REGION"));
    const char *key = first_set(o->s3_access_key, g_getenv("AWS_ACCESS_KEY_ID"), NULL);
    const char *secret = first_set(o->s3_secret_key, g_getenv("AWS_SECRET_ACCESS_KEY"), NULL);
    const char *token = g_getenv("AWS_SESSION_TOKEN");
    region = region ? region : "us-east-1";
    const char *endpoint = first_set(o->s3_endpoint, g_getenv("AWS_ENDPOINT_URL_S3"),
                                     g_getenv("AWS_ENDPOINT_URL"));
    if (!*bucket || !key || !secret) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID,
                    "%s: %s", url, !*bucket ? "no bucket (s3://bucket/prefix)"
                                            : "no credentials: [s3] access_key and secret_key in the "
                                              "configuration, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
        return false;
    }
    h->s3 = true;
    h->endpoint = endpoint ? g_strdup(endpoint) : g_strdup_printf("https://s3.%s.amazonaws.com", region);
    while (g_str_has_suffix(h->endpoint, "/"))
        h->endpoint[strlen(h->endpoint) - 1] = '\0';
    h->bucket_url = g_strdup_printf("%s/%s", h->endpoint, bucket);
    h->key_prefix = *prefix ? g_strdup_printf("%s/", prefix) : g_strdup("");
    h->prefix_url = *prefix ? g_strdup_printf("%s/%s", h->bucket_url, prefix) : g_strdup(h->bucket_url);
    h->sigv4 = g_strdup_printf("aws:amz:%s:s3", region);
    h->userpwd = g_strdup_printf("%s:%s", key, secret);
    if (token && *token)
        h->token_header = g_strdup_printf("x-amz-security-token: %s", token);
    return true;
}

struct transport *transport_http_open(const char *url, const struct store_options *o, GError **error)
{
    static gsize curl_ready;
    if (g_once_init_enter(&curl_ready)) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        g_once_init_leave(&curl_ready, 1);
    }
    struct http_transport *h = g_new0(struct http_transport, 1);
    h->base.ops = &http_ops;
    h->base.url = g_strdup(url);
    h->base.opts = o;
    http_pool_init(h);
    if (g_str_has_prefix(url, "s3://")) {
        if (!s3_setup(h, url, o, error)) {
            http_free(&h->base);
            return NULL;
        }
    } else {
        h->prefix_url = g_strdup(url);
    }
    /* checked here too: AWS_CA_BUNDLE is first seen here, and a bundle
     * removed since the configuration was read fails now, by name; a
     * plain-http server (a local MinIO) has no use for one, stale or not */
    const char *ca = g_str_has_prefix(h->s3 ? h->endpoint : url, "https://") ? store_ca_file_for(url, o)
                                                                              : NULL;
    bool from_env = ca && ca != o->ca_file && ca != o->s3_ca_file;
    if (ca && !store_ca_file_check(ca, from_env ? "AWS_CA_BUNDLE" : NULL, error)) {
        http_free(&h->base);
        return NULL;
    }
    h->ca_file = g_strdup(ca);
    return &h->base;
}
