/* Ranged reads from http(s):// and s3:// stores (transport-http.h). */
#include "store/transport-http.h"

#include <string.h>

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
    x->easy = http_easy_new(f->h, f->url, &x->headers);
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

static gint by_range(gconstpointer a, gconstpointer b, gpointer unused)
{
    guint x = GPOINTER_TO_UINT(a), y = GPOINTER_TO_UINT(b);
    return x < y ? -1 : x > y;
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
    if (http_deadline_error(f->h->base.opts, &f->error, what, f->url))
        return;
    if (rc == CURLE_OK && !x->bad_status)
        rc = CURLE_PARTIAL_FILE;   /* fewer bytes than asked for */
    bool again = x->bad_status ? status >= 500 || status == 429 : http_retryable(rc, status);
    guint tries = ++f->attempts[x->range];
    if (again && tries <= f->h->base.opts->retries) {
        f->not_before[x->range] = g_get_monotonic_time() +
                                  (gint64)f->h->base.opts->retry_delay_ms * 1000 * (1 << MIN(tries - 1, 10u));
        /* in range order: the consumer may need this one before the others */
        g_queue_insert_sorted(&f->pending, GUINT_TO_POINTER(x->range), by_range, NULL);
        return;
    }
    if (x->bad_status && status >= 200 && status < 300)
        g_set_error(&f->error, STORE_ERROR, STORE_ERROR_REMOTE,
                    "%s %s: HTTP %ld is not the range asked for", what, f->url, status);
    else
        http_status_error(&f->error, what, f->url, x->bad_status ? CURLE_OK : rc, status, x->errbuf, tries);
}

/* How often a fetch asks again about ranges its consumer holds back. */
#define HELD_BACK_POLL_MS 5

/* The next range (pending ones are in range order) whose retry time has
 * come, or -1; *wait_ms until one's does. The consumer is asked about the
 * first such range only: it holds back every later one too. */
static gint next_ready(struct fetch *f, long *wait_ms)
{
    gint64 now = g_get_monotonic_time();
    *wait_ms = 1000;
    for (GList *l = f->pending.head; l; l = l->next) {
        guint i = GPOINTER_TO_UINT(l->data);
        if (f->not_before[i] > now) {
            *wait_ms = MIN(*wait_ms, (f->not_before[i] - now) / 1000 + 1);
            continue;
        }
        if (f->c->may_start && !f->c->may_start(f->c->ctx, i, 0)) {
            *wait_ms = MIN(*wait_ms, HELD_BACK_POLL_MS);
            return -1;
        }
        g_queue_delete_link(&f->pending, l);
        return (gint)i;
    }
    return -1;
}

bool http_fetch(struct transport *t, const char *name, const struct fetch_range *ranges,
                       guint nranges, const struct fetch_consumer *c, GError **error)
{
    g_autofree char *url = http_object_url(ht(t), name);
    struct fetch f = { .h = ht(t), .url = url, .ranges = ranges, .c = c };
    f.attempts = g_new0(guint, nranges);
    f.not_before = g_new0(gint64, nranges);
    g_queue_init(&f.pending);
    f.running = g_ptr_array_new();
    for (guint i = 0; i < nranges; i++)
        g_queue_push_tail(&f.pending, GUINT_TO_POINTER(i));
    /* the transport's: the connections of the last fetch (and of the
     * small requests between) carry this one's ranges */
    CURLM *m = http_multi_take(ht(t));
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
        if (!active && http_deadline_error(t->opts, &f.error, "GET", url))
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
        long until_deadline = http_ms_left(t->opts);
        if (until_deadline >= 0)
            wait_ms = MIN(wait_ms, MAX(1L, until_deadline));
        if (!finished && !f.error && (active || !g_queue_is_empty(&f.pending)))
            curl_multi_poll(m, NULL, 0, MIN(active ? MIN(wait_ms, 200) : wait_ms, most_ms), NULL);
    }
    while (f.running->len)   /* the transfers still running after an error */
        transfer_free(m, f.running->pdata[0]);
    g_ptr_array_unref(f.running);
    http_multi_give(ht(t), m);
    g_queue_clear(&f.pending);
    g_free(f.attempts);
    g_free(f.not_before);
    if (f.error) {
        g_propagate_error(error, f.error);
        return false;
    }
    return true;
}
