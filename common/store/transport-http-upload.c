/* Uploads to http(s):// and s3:// stores (transport-http.h). */
#include "store/transport-http.h"

#include <string.h>

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
    CURL *e = http_easy_new(u->h, u->url, &headers);
    struct reply r = { .body = g_byte_array_new() };
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, u->errbuf);
    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, stream_read);
    curl_easy_setopt(e, CURLOPT_READDATA, u);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, http_reply_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &r);
    /* A body read from the channel cannot be read again: if a reused
     * connection turned out closed by the server after some of it went
     * out, libcurl could not send the request anew, and this PUT has no
     * retry of its own. A new connection is never one the server closed
     * while idle; it stays open for the requests after this one. */
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    CURLcode rc = CURLE_OK;
    bool whole = http_multi_run(u->h, &e, 1, &rc, u->h->base.opts->cancel);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(e);
    curl_slist_free_all(headers);
    http_reply_clear(&r);
    g_mutex_lock(&u->lock);
    u->rc = rc;
    u->status = status;
    u->cancelled = !whole;
    u->failed_early = true;   /* the writer must not wait for a reader that is gone */
    g_cond_broadcast(&u->cond);
    g_mutex_unlock(&u->lock);
    return NULL;
}

struct upload *http_upload_begin(struct transport *t, const char *name, GError **error)
{
    struct upload *u = g_new0(struct upload, 1);
    u->h = ht(t);
    u->url = http_object_url(ht(t), name);
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
    else if (u->rc == CURLE_OK || !http_deadline_error(u->h->base.opts, error, "PUT", u->url))
        http_status_error(error, "PUT", u->url, u->rc, u->status, u->errbuf, 1);
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
    bool ok = http_request(u->h, "POST", url, NULL, &r, error) && http_expect_2xx(&r, "POST", url, error);
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
    http_reply_clear(&r);
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
    bool ok = http_request(u->h, "PUT", url, body, &r, error) && http_expect_2xx(&r, "PUT", url, error);
    if (ok && !r.etag) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE, "PUT %s: no ETag", url);
        ok = false;
    }
    if (ok)
        g_string_append_printf(u->parts_xml, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
                               number, r.etag);
    g_byte_array_set_size(u->part, 0);
    http_reply_clear(&r);
    return ok;
}

bool http_upload_write(struct upload *u, const void *data, gsize len, GError **error)
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

void http_upload_abort(struct upload *u)
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
        http_request_or_cancel(u->h, "DELETE", url, NULL, &r, NULL, NULL);
        http_reply_clear(&r);
    }
    upload_free(u);
}

static bool s3_finish(struct upload *u, GError **error)
{
    if (!u->upload_id) {
        g_autoptr(GBytes) body = g_bytes_new(u->part->data, u->part->len);
        struct reply r = { 0 };
        bool ok = http_request(u->h, "PUT", u->url, body, &r, error) && http_expect_2xx(&r, "PUT", u->url, error);
        http_reply_clear(&r);
        return ok;
    }
    if (u->part->len && !s3_put_part(u, error))
        return false;
    g_string_append(u->parts_xml, "</CompleteMultipartUpload>");
    g_autofree char *url = g_strdup_printf("%s?uploadId=%s", u->url, u->upload_id);
    g_autoptr(GBytes) body = g_bytes_new(u->parts_xml->str, u->parts_xml->len);
    struct reply r = { 0 };
    bool ok = http_request(u->h, "POST", url, body, &r, error) && http_expect_2xx(&r, "POST", url, error);
    if (ok) {   /* S3 may answer 200 with an error in the body */
        g_byte_array_append(r.body, (const guint8 *)"", 1);
        if (strstr((const char *)r.body->data, "<Error>")) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_REMOTE, "POST %s: %s", url,
                        (const char *)r.body->data);
            ok = false;
        }
    }
    http_reply_clear(&r);
    return ok;
}

bool http_upload_finish(struct upload *u, GError **error)
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
