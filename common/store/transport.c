/* Picking the transport for a store URL. */
#include "store/transport.h"

struct transport *transport_open(const char *url, const struct store_options *o, GError **error)
{
    if (g_str_has_prefix(url, "file://"))
        return transport_file_open(url, o, error);
    if (g_str_has_prefix(url, "http://") || g_str_has_prefix(url, "https://") ||
        g_str_has_prefix(url, "s3://"))
        return transport_http_open(url, o, error);
    g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID,
                "%s: not a store URL (file:///dir, http(s)://host/prefix or s3://bucket/prefix)", url);
    return NULL;
}

void transport_free(struct transport *t)
{
    if (t)
        t->ops->free(t);
}
