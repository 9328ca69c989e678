/* The connections of one http(s):// or s3:// transport (transport-http.h).
 *
 * A transport makes many requests to one server: manifests, each object's
 * seek table, small files, the ranges of every layer. Each used to run on a
 * multi handle of its own that closed its connections when the request
 * ended, so every request paid a TCP connect (and, for https and S3, a TLS
 * handshake). Here the transport keeps its multi handles: a request takes
 * an idle one (or makes one), runs on it and gives it back, and the next
 * request finds that handle's connections open.
 *
 * Why a pool of multi handles and not libcurl's shared connection cache
 * (CURLSHOPT_SHARE with CURL_LOCK_DATA_CONNECT): libcurl 7.88's manual for
 * that option says connections may not be shared between concurrent
 * threads, and a transport's requests run on more than one (a push's
 * streamed PUT on a thread of its own, beside the caller's requests; any
 * caller may use one transport from several threads). A multi handle is
 * used by one thread at a time and its connections with it; another thread
 * that asks meanwhile gets another handle. The share object still
 * holds what libcurl does support across threads, under our locks: the DNS
 * cache and TLS sessions, so a new connection of any handle resumes a TLS
 * session another one made instead of a full handshake. */
#include "store/transport-http.h"

/* libcurl asks for one lock per kind of shared data. */
static void share_lock(CURL *e, curl_lock_data data, curl_lock_access access, void *user)
{
    (void)e, (void)access;
    struct http_transport *h = user;
    g_mutex_lock(&h->share_locks[data]);
}

static void share_unlock(CURL *e, curl_lock_data data, void *user)
{
    (void)e;
    struct http_transport *h = user;
    g_mutex_unlock(&h->share_locks[data]);
}

void http_pool_init(struct http_transport *h)
{
    for (guint i = 0; i < G_N_ELEMENTS(h->share_locks); i++)
        g_mutex_init(&h->share_locks[i]);
    g_mutex_init(&h->pool_lock);
    h->idle = g_ptr_array_new();
    h->share = curl_share_init();
    curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(h->share, CURLSHOPT_USERDATA, h);
    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
}

/* After every request has ended: no easy handle uses the share any more,
 * and every multi handle is idle. The multi handles go first (they close
 * their connections, whose TLS state may refer to the share's sessions). */
void http_pool_clear(struct http_transport *h)
{
    if (!h->idle)
        return;
    for (guint i = 0; i < h->idle->len; i++)
        curl_multi_cleanup(h->idle->pdata[i]);
    g_ptr_array_unref(h->idle);
    h->idle = NULL;
    curl_share_cleanup(h->share);
    h->share = NULL;
    g_mutex_clear(&h->pool_lock);
    for (guint i = 0; i < G_N_ELEMENTS(h->share_locks); i++)
        g_mutex_clear(&h->share_locks[i]);
}

CURLM *http_multi_take(struct http_transport *h)
{
    g_mutex_lock(&h->pool_lock);
    CURLM *m = h->idle->len ? g_ptr_array_steal_index_fast(h->idle, h->idle->len - 1) : NULL;
    g_mutex_unlock(&h->pool_lock);
    if (m)
        return m;
    m = curl_multi_init();
    /* libcurl's default bound on a multi's idle connections follows the
     * transfers in it (4 per transfer), so it would shrink as a fetch's
     * last transfers end; this one keeps as many as a fetch opens, and a
     * spare (the streamed PUT's new connection beside another). */
    long keep = (long)MAX(1u, h->base.opts->connections) + 1;
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, keep);
    return m;
}

/* m has no transfers left; its open connections serve the next request. */
void http_multi_give(struct http_transport *h, CURLM *m)
{
    g_mutex_lock(&h->pool_lock);
    g_ptr_array_add(h->idle, m);
    g_mutex_unlock(&h->pool_lock);
}
