/* http(s):// and s3:// stores, on libcurl's multi interface: ranged GETs on
 * several connections with retries and back-off, PUT (streamed for HTTP,
 * multipart for S3), HEAD, listings (an HTTP server's directory index, S3's
 * ListObjectsV2). S3 requests are signed by libcurl (CURLOPT_AWS_SIGV4) with
 * path-style addressing: <endpoint>/<bucket>/<prefix>/<name>. */
#include "store/transport.h"

#include <curl/curl.h>
#include <string.h>

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
};

static struct http_transport *ht(struct transport *t)
{
    return (struct http_transport *)t;
}

static char *object_url(struct http_transport *h, const char *name)
{
    return g_strdup_printf("%s/%s", h->prefix_url, name);
}

/* ---- the operation's deadline (store_options.deadline) ---- */

/* Milliseconds left before the deadline (at least 1 while it is ahead, 0
 * once it passed), or -1 without one. */
static long ms_left(const struct store_options *o)
{
    if (!o->deadline)
        return -1;
    gint64 left = o->deadline - g_get_monotonic_time();
    return left <= 0 ? 0 : (long)MAX(1, MIN(left / 1000, (gint64)G_MAXINT32));
}

static bool deadline_passed(const struct store_options *o)
{
    return ms_left(o) == 0;
}

/* STORE_ERROR_TIMEOUT for method url when the deadline passed (whatever
 * else went wrong with the request: the deadline cut it); false when not. */
static bool deadline_error(const struct store_options *o, GError **error, const char *method, const char *url)
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

static CURL *easy_new(struct http_transport *h, const char *url, struct curl_slist **headers)
{
    CURL *e = curl_easy_init();
    long left = ms_left(h->base.opts);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, left < 0 ? 10000L : MAX(1L, MIN(left, 10000L)));
    if (left >= 0)   /* the whole request, connect to last byte, ends by the deadline */
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, MAX(1L, left));
    /* no request waits forever: a transfer stalled for 30 s fails (and is retried) */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "vsnap-store");
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

/* How long a wait for the network lasts at most before the cancel flag
 * (store_options.cancel) is looked at again. */
#define CANCEL_POLL_MS 100

/* Run handles to completion on one multi handle; results[i] per handle.
 * With cancel set (non-zero) the transfers still running stop: false, and
 * their results are CURLE_ABORTED_BY_CALLBACK. */
static bool multi_run(CURL **handles, guint n, CURLcode *results, const gint *cancel)
{
    CURLM *m = curl_multi_init();
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
    curl_multi_cleanup(m);
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

static bool retryable(CURLcode rc, long status)
{
    return (rc != CURLE_OK && rc != CURLE_WRITE_ERROR && rc != CURLE_ABORTED_BY_CALLBACK) ||
           status >= 500 || status == 429;
}

static void status_error(GError **error, const char *method, const char *url, CURLcode rc,
                         long status, const char *errbuf, guint attempts)
{
    if (rc != CURLE_OK)
        g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE, "%s %s: %s (%u attempts)", method, url,
                    errbuf[0] ? errbuf : curl_easy_strerror(rc), attempts);
    else
        g_set_error(error, STORE_ERROR, error_code_for(status), "%s %s: HTTP %ld%s", method, url,
                    status, status == 404 ? " (no such object)"
                            : status == 403 ? " (access denied)"
                            : status == 416 ? " (range not satisfiable: the object is shorter)" : "");
}

/* ---- whole requests: HEAD, GET, PUT of a buffer, POST, DELETE ---- */

struct reply {
    long status;
    GByteArray *body;
    char *etag;
};

static size_t reply_body(char *data, size_t size, size_t n, void *user)
{
    struct reply *r = user;
    if (r->body->len + size * n > (64u << 20))
        return 0;   /* no reply we read is this large */
    g_byte_array_append(r->body, (const guint8 *)data, size * n);
    return size * n;
}

static size_t reply_header(char *data, size_t size, size_t n, void *user)
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

/* One request with retries (connection failures, 5xx); the reply's status
 * is the caller's to judge. cancel: stop when it becomes non-zero
 * (STORE_ERROR_CANCELLED); NULL for the clean-up that follows a cancel. */
static bool request_or_cancel(struct http_transport *h, const char *method, const char *url,
                              GBytes *body, struct reply *r, const gint *cancel, GError **error)
{
    const struct store_options *o = h->base.opts;
    r->body = g_byte_array_new();
    for (guint attempt = 0;; attempt++) {
        if (deadline_error(o, error, method, url))
            return false;
        struct curl_slist *headers = NULL;
        CURL *e = easy_new(h, url, &headers);
        char errbuf[CURL_ERROR_SIZE] = "";
        struct body_reader reader = { 0 };
        g_byte_array_set_size(r->body, 0);
        g_clear_pointer(&r->etag, g_free);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, reply_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, reply_header);
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
            curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)reader.len);
            if (strcmp(method, "PUT") != 0)
                curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
        } else if (strcmp(method, "POST") == 0) {
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
        }
        CURLcode rc = CURLE_OK;
        bool whole = multi_run(&e, 1, &rc, cancel);
        r->status = 0;
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
        curl_easy_cleanup(e);
        curl_slist_free_all(headers);
        if (!whole) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_CANCELLED, "%s %s: cancelled", method, url);
            return false;
        }
        if (rc == CURLE_OK && !retryable(rc, r->status))
            return true;
        if (attempt >= o->retries || !retryable(rc, r->status)) {
            if (!deadline_error(o, error, method, url))
                status_error(error, method, url, rc, r->status, errbuf, attempt + 1);
            return false;
        }
        gint64 delay_us = (gint64)o->retry_delay_ms * 1000 << MIN(attempt, 10u);
        long left = ms_left(o);
        if (left >= 0)   /* the next attempt fails at once when the deadline passed meanwhile */
            delay_us = MIN(delay_us, (gint64)left * 1000);
        g_autofree char *what = g_strdup_printf("%s %s", method, url);
        if (!backoff(cancel, (gulong)delay_us, what, error))
            return false;
    }
}

static bool request(struct http_transport *h, const char *method, const char *url, GBytes *body,
                    struct reply *r, GError **error)
{
    return request_or_cancel(h, method, url, body, r, h->base.opts->cancel, error);
}

static void reply_clear(struct reply *r)
{
    if (r->body)
        g_byte_array_unref(r->body);
    g_free(r->etag);
    memset(r, 0, sizeof(*r));
}

static bool expect_2xx(const struct reply *r, const char *method, const char *url, GError **error)
{
    if (r->status >= 200 && r->status < 300)
        return true;
    status_error(error, method, url, CURLE_OK, r->status, "", 1);
    return false;
}

static bool http_stat(struct transport *t, const char *name, guint64 *size, GError **error)
{
    g_autofree char *url = object_url(ht(t), name);
    struct reply r = { 0 };
    bool ok = request(ht(t), "HEAD", url, NULL, &r, error);
    *size = G_MAXUINT64;
    if (ok && r.status != 404 && expect_2xx(&r, "HEAD", url, error)) {
        /* the length of a HEAD reply: a new transfer reads it from the headers */
        struct curl_slist *headers = NULL;
        CURL *e = easy_new(ht(t), url, &headers);
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
        CURLcode rc = CURLE_OK;
        bool whole = multi_run(&e, 1, &rc, t->opts->cancel);
        curl_off_t len = -1;
        curl_easy_getinfo(e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
        curl_easy_cleanup(e);
        curl_slist_free_all(headers);
        if (!whole) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_CANCELLED, "HEAD %s: cancelled", url);
            ok = false;
        } else if (rc != CURLE_OK || len < 0) {
            if (!deadline_error(ht(t)->base.opts, error, "HEAD", url))
                g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE, "HEAD %s: no length", url);
            ok = false;
        } else {
            *size = (guint64)len;
        }
    } else if (ok && r.status != 404) {
        ok = false;
    }
    reply_clear(&r);
    return ok;
}

static GBytes *http_get(struct transport *t, const char *name, GError **error)
{
    g_autofree char *url = object_url(ht(t), name);
    struct reply r = { 0 };
    GBytes *out = NULL;
    if (request(ht(t), "GET", url, NULL, &r, error) && expect_2xx(&r, "GET", url, error))
        out = g_byte_array_free_to_bytes(g_steal_pointer(&r.body));
    reply_clear(&r);
    return out;
}

static bool http_put(struct transport *t, const char *name, GBytes *data, GError **error)
{
    g_autofree char *url = object_url(ht(t), name);
    struct reply r = { 0 };
    bool ok = request(ht(t), "PUT", url, data, &r, error) && expect_2xx(&r, "PUT", url, error);
    reply_clear(&r);
    return ok;
}

/* ---- uploads ---- */

/* HTTP: one PUT whose body (chunked) is read from a bounded channel the
 * writer fills; S3: parts of part_size, the first full one starting a
 * multipart upload, or one PUT when the object is smaller. */
struct upload {
    struct http_transport *h;
    char *url;
    /* HTTP */
    GThread *thread;
    GMutex lock;
    GCond cond;
    GQueue chunks;         /* GBytes; an empty one ends the body */
    gsize queued;
    GBytes *current;
    gsize current_pos;
    bool failed_early;
    bool aborting;         /* the body ends in an error, not an end */
    bool cancelled;        /* the transfer stopped at store_options.cancel */
    CURLcode rc;
    long status;
    char errbuf[CURL_ERROR_SIZE];
    /* S3 */
    GByteArray *part;
    char *upload_id;
    GString *parts_xml;
    guint nparts;
};

#define UPLOAD_QUEUE_BYTES (8u << 20)

static size_t stream_read(char *buf, size_t size, size_t n, void *user)
{
    struct upload *u = user;
    g_mutex_lock(&u->lock);
    while (!u->current) {
        while (g_queue_is_empty(&u->chunks) && !u->aborting)
            g_cond_wait(&u->cond, &u->lock);
        if (u->aborting) {
            /* a short body must not become an object: the transfer fails */
            g_mutex_unlock(&u->lock);
            return CURL_READFUNC_ABORT;
        }
        u->current = g_queue_pop_head(&u->chunks);
        u->current_pos = 0;
    }
    gsize len;
    const guint8 *p = g_bytes_get_data(u->current, &len);
    gsize take = MIN(size * n, len - u->current_pos);
    if (take)   /* the empty chunk that ends the body has no data (p is NULL) */
        memcpy(buf, p + u->current_pos, take);
    u->current_pos += take;
    if (u->current_pos == len && len > 0) {
        u->queued -= len;
        g_clear_pointer(&u->current, g_bytes_unref);
        g_cond_broadcast(&u->cond);
    }
    g_mutex_unlock(&u->lock);
    return take;   /* 0 at the empty chunk: the end of the body */
}

static gpointer stream_thread(gpointer data)
{
    struct upload *u = data;
    struct curl_slist *headers = NULL;
    CURL *e = easy_new(u->h, u->url, &headers);
    struct reply r = { .body = g_byte_array_new() };
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, u->errbuf);
    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, stream_read);
    curl_easy_setopt(e, CURLOPT_READDATA, u);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, reply_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &r);
    CURLcode rc = CURLE_OK;
    bool whole = multi_run(&e, 1, &rc, u->h->base.opts->cancel);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(e);
    curl_slist_free_all(headers);
    reply_clear(&r);
    g_mutex_lock(&u->lock);
    u->rc = rc;
    u->status = status;
    u->cancelled = !whole;
    u->failed_early = true;   /* the writer must not wait for a reader that is gone */
    g_cond_broadcast(&u->cond);
    g_mutex_unlock(&u->lock);
    return NULL;
}

static struct upload *http_upload_begin(struct transport *t, const char *name, GError **error)
{
    struct upload *u = g_new0(struct upload, 1);
    u->h = ht(t);
    u->url = object_url(ht(t), name);
    g_mutex_init(&u->lock);
    g_cond_init(&u->cond);
    g_queue_init(&u->chunks);
    if (u->h->s3) {
        u->part = g_byte_array_new();
        u->parts_xml = g_string_new("<CompleteMultipartUpload>");
    } else {
        u->thread = g_thread_new("store-put", stream_thread, u);
    }
    return u;
}

/* Why the streamed PUT ended badly. */
static void upload_error(struct upload *u, GError **error)
{
    if (u->cancelled)
        g_set_error(error, STORE_ERROR, STORE_ERROR_CANCELLED, "PUT %s: cancelled", u->url);
    else if (u->rc == CURLE_OK || !deadline_error(u->h->base.opts, error, "PUT", u->url))
        status_error(error, "PUT", u->url, u->rc, u->status, u->errbuf, 1);
}

static bool stream_push(struct upload *u, GBytes *chunk, GError **error)
{
    gsize len = g_bytes_get_size(chunk);
    g_mutex_lock(&u->lock);
    while (u->queued > UPLOAD_QUEUE_BYTES && !u->failed_early)
        g_cond_wait(&u->cond, &u->lock);
    bool gone = u->failed_early && len > 0;
    if (!gone) {
        g_queue_push_tail(&u->chunks, chunk);
        u->queued += len;
        g_cond_broadcast(&u->cond);
    }
    g_mutex_unlock(&u->lock);
    if (gone) {
        g_bytes_unref(chunk);
        upload_error(u, error);
        return false;
    }
    return true;
}

static bool s3_start_multipart(struct upload *u, GError **error)
{
    g_autofree char *url = g_strdup_printf("%s?uploads=", u->url);
    struct reply r = { 0 };
    bool ok = request(u->h, "POST", url, NULL, &r, error) && expect_2xx(&r, "POST", url, error);
    if (ok) {
        g_byte_array_append(r.body, (const guint8 *)"", 1);
        const char *s = strstr((const char *)r.body->data, "<UploadId>");
        const char *end = s ? strstr(s, "</UploadId>") : NULL;
        if (!end) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE, "POST %s: no UploadId in the reply", url);
            ok = false;
        } else {
            g_autofree char *id = g_strndup(s + 10, end - s - 10);
            u->upload_id = g_uri_escape_string(id, NULL, FALSE);
        }
    }
    reply_clear(&r);
    return ok;
}

static bool s3_put_part(struct upload *u, GError **error)
{
    if (!u->upload_id && !s3_start_multipart(u, error))
        return false;
    guint number = ++u->nparts;
    g_autofree char *url = g_strdup_printf("%s?partNumber=%u&uploadId=%s", u->url, number, u->upload_id);
    g_autoptr(GBytes) body = g_bytes_new(u->part->data, u->part->len);
    struct reply r = { 0 };
    bool ok = request(u->h, "PUT", url, body, &r, error) && expect_2xx(&r, "PUT", url, error);
    if (ok && !r.etag) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE, "PUT %s: no ETag", url);
        ok = false;
    }
    if (ok)
        g_string_append_printf(u->parts_xml, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
                               number, r.etag);
    g_byte_array_set_size(u->part, 0);
    reply_clear(&r);
    return ok;
}

static bool http_upload_write(struct upload *u, const void *data, gsize len, GError **error)
{
    if (!u->h->s3)
        return len == 0 || stream_push(u, g_bytes_new(data, len), error);
    const guint8 *p = data;
    guint64 part_size = MAX(u->h->base.opts->part_size, 5u << 20);
    while (len) {
        gsize take = MIN(len, part_size - u->part->len);
        g_byte_array_append(u->part, p, take);
        p += take;
        len -= take;
        if (u->part->len == part_size && !s3_put_part(u, error))
            return false;
    }
    return true;
}

static void upload_free(struct upload *u)
{
    g_free(u->url);
    g_queue_clear_full(&u->chunks, (GDestroyNotify)g_bytes_unref);
    g_clear_pointer(&u->current, g_bytes_unref);
    g_mutex_clear(&u->lock);
    g_cond_clear(&u->cond);
    if (u->part)
        g_byte_array_unref(u->part);
    if (u->parts_xml)
        g_string_free(u->parts_xml, TRUE);
    g_free(u->upload_id);
    g_free(u);
}

static void http_upload_abort(struct upload *u)
{
    if (u->thread) {
        g_mutex_lock(&u->lock);
        u->aborting = true;
        g_cond_broadcast(&u->cond);
        g_mutex_unlock(&u->lock);
        g_thread_join(u->thread);
    }
    if (u->upload_id) {
        g_autofree char *url = g_strdup_printf("%s?uploadId=%s", u->url, u->upload_id);
        struct reply r = { 0 };
        /* not cancellable: it is what a cancelled upload leaves to do */
        request_or_cancel(u->h, "DELETE", url, NULL, &r, NULL, NULL);
        reply_clear(&r);
    }
    upload_free(u);
}

static bool s3_finish(struct upload *u, GError **error)
{
    if (!u->upload_id) {
        g_autoptr(GBytes) body = g_bytes_new(u->part->data, u->part->len);
        struct reply r = { 0 };
        bool ok = request(u->h, "PUT", u->url, body, &r, error) && expect_2xx(&r, "PUT", u->url, error);
        reply_clear(&r);
        return ok;
    }
    if (u->part->len && !s3_put_part(u, error))
        return false;
    g_string_append(u->parts_xml, "</CompleteMultipartUpload>");
    g_autofree char *url = g_strdup_printf("%s?uploadId=%s", u->url, u->upload_id);
    g_autoptr(GBytes) body = g_bytes_new(u->parts_xml->str, u->parts_xml->len);
    struct reply r = { 0 };
    bool ok = request(u->h, "POST", url, body, &r, error) && expect_2xx(&r, "POST", url, error);
    if (ok) {   /* S3 may answer 200 with an error in the body */
        g_byte_array_append(r.body, (const guint8 *)"", 1);
        if (strstr((const char *)r.body->data, "<Error>")) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE, "POST %s: %s", url,
                        (const char *)r.body->data);
            ok = false;
        }
    }
    reply_clear(&r);
    return ok;
}

static bool http_upload_finish(struct upload *u, GError **error)
{
    bool ok;
    if (u->h->s3) {
        ok = s3_finish(u, error);
        if (!ok) {
            http_upload_abort(u);
            return false;
        }
    } else {
        ok = stream_push(u, g_bytes_new(NULL, 0), error);
        g_thread_join(u->thread);
        u->thread = NULL;
        if (ok && (u->cancelled || u->rc != CURLE_OK || u->status < 200 || u->status >= 300)) {
            upload_error(u, error);
            ok = false;
        }
    }
    upload_free(u);
    return ok;
}

/* ---- ranged fetch on several connections ---- */

#define FETCH_BUFFER_SIZE (512L << 10)

struct transfer {
    struct fetch *f;
    guint range;
    guint64 start;        /* this attempt's first byte */
    guint64 received;
    CURL *easy;
    struct curl_slist *headers;
    char errbuf[CURL_ERROR_SIZE];
    bool bad_status;
    bool consumer_failed;
};

struct fetch {
    struct http_transport *h;
    const char *url;
    const struct fetch_range *ranges;
    const struct fetch_consumer *c;
    guint *attempts;
    gint64 *not_before;   /* per range: retry time (monotonic us), 0 = ready */
    GQueue pending;       /* range indexes (GUINT_TO_POINTER) */
    GPtrArray *running;   /* struct transfer */
    GError *error;
};

static size_t transfer_write(char *data, size_t size, size_t n, void *user)
{
    struct transfer *x = user;
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    const struct fetch_range *r = &x->f->ranges[x->range];
    /* 206, or 200 when the range is the whole object */
    if (status != 206 && !(status == 200 && x->start == 0)) {
        x->bad_status = true;
        return 0;
    }
    if (x->received + size * n > r->end - x->start) {
        x->bad_status = true;
        return 0;
    }
    GError *e = NULL;
    if (!x->f->c->data(x->f->c->ctx, x->range, (const guint8 *)data, size * n, &e)) {
        x->consumer_failed = true;
        if (!x->f->error)
            x->f->error = e;
        else
            g_error_free(e);
        return 0;
    }
    x->received += size * n;
    return size * n;
}

static struct transfer *transfer_start(struct fetch *f, CURLM *m, guint range)
{
    struct transfer *x = g_new0(struct transfer, 1);
    x->f = f;
    x->range = range;
    x->start = f->attempts[range] ? f->c->restart(f->c->ctx, range) : f->ranges[range].start;
    x->easy = easy_new(f->h, f->url, &x->headers);
    char spec[64];
    g_snprintf(spec, sizeof(spec), "%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT, x->start,
               f->ranges[range].end - 1);
    curl_easy_setopt(x->easy, CURLOPT_RANGE, spec);
    /* libcurl's default 16 KiB costs a recv, a poll and a call of the
     * consumer per 16 KiB: 60 of each per MiB */
    curl_easy_setopt(x->easy, CURLOPT_BUFFERSIZE, FETCH_BUFFER_SIZE);
    curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, transfer_write);
    curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
    curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_multi_add_handle(m, x->easy);
    g_ptr_array_add(f->running, x);
    return x;
}

static void transfer_free(CURLM *m, struct transfer *x)
{
    g_ptr_array_remove_fast(x->f->running, x);
    curl_multi_remove_handle(m, x->easy);
    curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    g_free(x);
}

/* A finished transfer: done, to be retried, or the end of the fetch. */
static void transfer_done(struct fetch *f, struct transfer *x, CURLcode rc)
{
    const struct fetch_range *r = &f->ranges[x->range];
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    bool complete = rc == CURLE_OK && x->start + x->received == r->end;
    if (complete || x->consumer_failed || f->error)
        return;
    g_autofree char *what = g_strdup_printf("GET (bytes %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT ")",
                                            x->start, r->end - 1);
    if (deadline_error(f->h->base.opts, &f->error, what, f->url))
        return;
    if (rc == CURLE_OK && !x->bad_status)
        rc = CURLE_PARTIAL_FILE;   /* fewer bytes than asked for */
    bool again = x->bad_status ? status >= 500 || status == 429 : retryable(rc, status);
    guint tries = ++f->attempts[x->range];
    if (again && tries <= f->h->base.opts->retries) {
        f->not_before[x->range] = g_get_monotonic_time() +
                                  (gint64)f->h->base.opts->retry_delay_ms * 1000 * (1 << MIN(tries - 1, 10u));
        g_queue_push_tail(&f->pending, GUINT_TO_POINTER(x->range));
        return;
    }
    if (x->bad_status && status >= 200 && status < 300)
        g_set_error(&f->error, STORE_ERROR, STORE_ERROR_REMOTE,
                    "%s %s: HTTP %ld is not the range asked for", what, f->url, status);
    else
        status_error(&f->error, what, f->url, x->bad_status ? CURLE_OK : rc, status, x->errbuf, tries);
}

/* The next range whose retry time has come, or -1; *wait_ms until one does. */
static gint next_ready(struct fetch *f, long *wait_ms)
{
    gint64 now = g_get_monotonic_time();
    *wait_ms = 1000;
    for (GList *l = f->pending.head; l; l = l->next) {
        guint i = GPOINTER_TO_UINT(l->data);
        if (f->not_before[i] <= now) {
            g_queue_delete_link(&f->pending, l);
            return (gint)i;
        }
        *wait_ms = MIN(*wait_ms, (f->not_before[i] - now) / 1000 + 1);
    }
    return -1;
}

static bool http_fetch(struct transport *t, const char *name, const struct fetch_range *ranges,
                       guint nranges, const struct fetch_consumer *c, GError **error)
{
    g_autofree char *url = object_url(ht(t), name);
    struct fetch f = { .h = ht(t), .url = url, .ranges = ranges, .c = c };
    f.attempts = g_new0(guint, nranges);
    f.not_before = g_new0(gint64, nranges);
    g_queue_init(&f.pending);
    f.running = g_ptr_array_new();
    for (guint i = 0; i < nranges; i++)
        g_queue_push_tail(&f.pending, GUINT_TO_POINTER(i));
    CURLM *m = curl_multi_init();
    guint active = 0, max = MAX(1u, t->opts->connections);
    const gint *cancel = t->opts->cancel;
    long most_ms = cancel ? CANCEL_POLL_MS : 1000;
    while (!f.error && (active || !g_queue_is_empty(&f.pending))) {
        if (cancel && g_atomic_int_get(cancel)) {
            g_set_error(&f.error, STORE_ERROR, STORE_ERROR_CANCELLED, "GET %s: cancelled", url);
            break;
        }
        /* ranges waiting for their retry time end here too; running ones
         * end by their own CURLOPT_TIMEOUT_MS */
        if (!active && deadline_error(t->opts, &f.error, "GET", url))
            break;
        long wait_ms = 1000;
        for (gint i; active < max && (i = next_ready(&f, &wait_ms)) >= 0; active++)
            transfer_start(&f, m, (guint)i);
        int running;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        guint finished = 0;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct transfer *x;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            transfer_done(&f, x, msg->data.result);
            transfer_free(m, x);
            active--;
            finished++;
        }
        /* A finished transfer frees a connection for the next range at
         * once: waiting first would cost up to a second per range. */
        long until_deadline = ms_left(t->opts);
        if (until_deadline >= 0)
            wait_ms = MIN(wait_ms, MAX(1L, until_deadline));
        if (!finished && !f.error && (active || !g_queue_is_empty(&f.pending)))
            curl_multi_poll(m, NULL, 0, MIN(active ? MIN(wait_ms, 200) : wait_ms, most_ms), NULL);
    }
    while (f.running->len)   /* the transfers still running after an error */
        transfer_free(m, f.running->pdata[0]);
    g_ptr_array_unref(f.running);
    curl_multi_cleanup(m);
    g_queue_clear(&f.pending);
    g_free(f.attempts);
    g_free(f.not_before);
    if (f.error) {
        g_propagate_error(error, f.error);
        return false;
    }
    return true;
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
        if (!request(h, "GET", url, NULL, &r, error) || !expect_2xx(&r, "GET", url, error)) {
            reply_clear(&r);
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
        reply_clear(&r);
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
    g_free(h->prefix_url);
    g_free(h->endpoint);
    g_free(h->bucket_url);
    g_free(h->key_prefix);
    g_free(h->sigv4);
    g_free(h->userpwd);
    g_free(h->token_header);
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
    if (g_str_has_prefix(url, "s3://")) {
        if (!s3_setup(h, url, o, error)) {
            http_free(&h->base);
            return NULL;
        }
    } else {
        h->prefix_url = g_strdup(url);
    }
    return &h->base;
}
