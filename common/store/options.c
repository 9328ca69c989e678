/* Options, their configuration file and sizes with suffixes (store.h). */
#include "store/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(vsnap-store-error-quark, store_error)

void store_options_init(struct store_options *o)
{
    memset(o, 0, sizeof(*o));
    o->frame_size = STORE_DEFAULT_FRAME_SIZE;
    o->level = STORE_DEFAULT_LEVEL;
    o->threads = MAX(1u, g_get_num_processors());
    o->connections = STORE_DEFAULT_CONNECTIONS;
    o->range_size = STORE_DEFAULT_RANGE_SIZE;
    o->part_size = 16u << 20;
    o->retries = 4;
    o->retry_delay_ms = 200;
    o->min_rate = STORE_DEFAULT_MIN_RATE;
    o->min_rate_window_s = STORE_DEFAULT_MIN_RATE_WINDOW_S;
    o->timeout_s = STORE_DEFAULT_TIMEOUT_S;
}

const struct store_options *store_options_bounded(const struct store_options *o,
                                                  struct store_options *local)
{
    if (o->deadline || !o->timeout_s)
        return o;
    *local = *o;
    store_options_start_deadline(local);
    return local;
}

void store_options_start_deadline(struct store_options *o)
{
    o->deadline = o->timeout_s ? g_get_monotonic_time() + (gint64)o->timeout_s * G_USEC_PER_SEC : 0;
}

void store_options_clear(struct store_options *o)
{
    g_clear_pointer(&o->s3_endpoint, g_free);
    g_clear_pointer(&o->s3_region, g_free);
    g_clear_pointer(&o->s3_access_key, g_free);
    g_clear_pointer(&o->s3_secret_key, g_free);
    g_clear_pointer(&o->ca_file, g_free);
    g_clear_pointer(&o->s3_ca_file, g_free);
}

/* Enough to tell a CA bundle from a file named by mistake (a key, a DER
 * certificate, a directory) before any handshake depends on it. */
bool store_ca_file_check(const char *path, const char *what, GError **error)
{
    g_autofree char *text = NULL;
    g_autoptr(GError) e = NULL;
    g_autofree char *named = what ? g_strdup_printf("%s: %s", what, path) : g_strdup(path);
    if (!g_file_get_contents(path, &text, NULL, &e)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "%s: cannot read the CA bundle: %s", named,
                    e->message);
        return false;
    }
    if (!strstr(text, "-----BEGIN CERTIFICATE-----") && !strstr(text, "-----BEGIN TRUSTED CERTIFICATE-----")) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "%s: not a CA bundle (no PEM certificate in it)",
                    named);
        return false;
    }
    return true;
}

const char *store_ca_file_for(const char *url, const struct store_options *o)
{
    bool s3 = g_str_has_prefix(url, "s3://");
    if (s3 && o->s3_ca_file && *o->s3_ca_file)
        return o->s3_ca_file;
    if (o->ca_file && *o->ca_file)
        return o->ca_file;
    const char *env = s3 ? g_getenv("AWS_CA_BUNDLE") : NULL;
    return env && *env ? env : NULL;
}

bool store_cancelled(const struct store_options *o, GError **error)
{
    if (!o || !o->cancel || !g_atomic_int_get(o->cancel))
        return false;
    g_set_error(error, STORE_ERROR, STORE_ERROR_CANCELLED, "cancelled");
    return true;
}

static bool bad_url(GError **error, const char *url, const char *why)
{
    g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID,
                "%s: not a store URL (%s; file:///dir, http(s)://host/prefix or s3://bucket/prefix)",
                url, why);
    return false;
}

bool store_url_check(const char *url, GError **error)
{
    if (!url || !*url)
        return bad_url(error, url ? url : "", "empty");
    for (const char *c = url; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return bad_url(error, url, "spaces or control characters");
    if (g_str_has_prefix(url, "file://"))
        return url[7] == '/' || bad_url(error, url, "a file:// URL names an absolute path");
    const char *rest = g_str_has_prefix(url, "http://")    ? url + 7
                       : g_str_has_prefix(url, "https://") ? url + 8
                       : g_str_has_prefix(url, "s3://")    ? url + 5
                                                           : NULL;
    if (!rest)
        return bad_url(error, url, "unknown scheme");
    if (!*rest || *rest == '/')
        return bad_url(error, url, g_str_has_prefix(url, "s3://") ? "no bucket" : "no host");
    /* A URL travels into logs, job errors and every snapshot's XML (which
     * read-only clients see): user:password@ in it would show everywhere.
     * The message names the URL without what precedes the '@'. */
    size_t authority = strcspn(rest, "/");
    const char *at = memchr(rest, '@', authority);
    if (at) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID,
                    "%.*s***%s: not a store URL (credentials in a store URL would show in logs "
                    "and snapshot XML: give them in the configuration's [s3] access_key and "
                    "secret_key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
                    (int)(rest - url), url, at);
        return false;
    }
    return true;
}

bool store_parse_size(const char *text, guint64 *out, GError **error)
{
    char *end = NULL;
    errno = 0;
    double v = text ? g_ascii_strtod(text, &end) : 0;
    bool no_number = !text || end == text;
    guint64 mult = 1;
    if (end && *end) {
        switch (g_ascii_toupper(*end)) {
        case 'K': mult = 1ull << 10; break;
        case 'M': mult = 1ull << 20; break;
        case 'G': mult = 1ull << 30; break;
        case 'T': mult = 1ull << 40; break;
        default: mult = 0;
        }
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'B' || *end == 'b')
            end++;
    }
    if (no_number || errno || mult == 0 || (end && *end) || v < 0 ||
        v * mult > 1.8e19) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID,
                    "\"%s\" is not a size (bytes, or a number with K, M, G or T)", text ? text : "");
        return false;
    }
    *out = (guint64)(v * mult);
    return true;
}

static bool get_size(GKeyFile *kf, const char *group, const char *key, guint64 *out, GError **error)
{
    g_autofree char *v = g_key_file_get_string(kf, group, key, NULL);
    if (!v)
        return true;
    g_autoptr(GError) e = NULL;
    if (!store_parse_size(g_strstrip(v), out, &e)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "[%s] %s: %s", group, key, e->message);
        return false;
    }
    return true;
}

static bool get_count(GKeyFile *kf, const char *key, guint *out, GError **error)
{
    guint64 v = *out;
    if (!get_size(kf, "store", key, &v, error))
        return false;
    if (v == 0 || v > 1024) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "[store] %s: 1 to 1024", key);
        return false;
    }
    *out = (guint)v;
    return true;
}

/* Whole seconds, "25" or "25s", from least to most. */
static bool get_seconds(GKeyFile *kf, const char *key, guint64 least, guint64 most, guint64 *out,
                        GError **error)
{
    g_autofree char *v = g_key_file_get_string(kf, "store", key, NULL);
    if (!v)
        return true;
    char *end = NULL;
    g_strstrip(v);
    guint64 n = g_ascii_strtoull(v, &end, 10);
    if (end == v || (*end && strcmp(end, "s") != 0) || n < least || n > most) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "[store] %s: whole seconds, %" G_GUINT64_FORMAT
                    "%s to %" G_GUINT64_FORMAT ", not \"%s\"", key, least, least ? "" : " (none)", most, v);
        return false;
    }
    *out = n;
    return true;
}

static void get_string(GKeyFile *kf, const char *group, const char *key, char **out)
{
    char *v = g_key_file_get_string(kf, group, key, NULL);
    if (v) {
        g_free(*out);
        *out = g_strstrip(v);
    }
}

/* A relative ca_file is taken from the working directory at load, as
 * vsnap-store's --ca-file is (a daemon may change directory later). */
static bool get_ca_file(GKeyFile *kf, const char *group, const char *path, char **out, GError **error)
{
    g_autofree char *v = NULL;
    get_string(kf, group, "ca_file", &v);
    if (!v)
        return true;
    g_autofree char *what = g_strdup_printf("%s: [%s] ca_file", path, group);
    if (!*v) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "%s: empty", what);
        return false;
    }
    if (!store_ca_file_check(v, what, error))
        return false;
    g_free(*out);
    *out = g_canonicalize_filename(v, NULL);
    return true;
}

bool store_options_load(struct store_options *o, const char *path, char **url, char **cache_dir,
                        guint64 *cache_size, GError **error)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) e = NULL;
    if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &e)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "%s: %s", path, e->message);
        return false;
    }
    guint64 range = o->range_size, frame = o->frame_size, level = (guint64)o->level, timeout = o->timeout_s;
    guint64 min_rate = o->min_rate, window = o->min_rate_window_s;
    if (!get_count(kf, "connections", &o->connections, error) ||
        !get_count(kf, "threads", &o->threads, error) ||
        !get_size(kf, "store", "range_size", &range, error) ||
        !get_size(kf, "store", "frame_size", &frame, error) ||
        !get_size(kf, "store", "level", &level, error) ||
        !get_seconds(kf, "timeout", 0, 86400, &timeout, error) ||
        !get_size(kf, "store", "min_rate", &min_rate, error) ||
        !get_seconds(kf, "min_rate_window", 1, 3600, &window, error) ||
        (cache_size && !get_size(kf, "store", "cache_size", cache_size, error)))
        return false;
    if (range == 0 || frame < 4096 || frame > (64u << 20) || level > 22 || min_rate == 0 ||
        min_rate > G_MAXINT32) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID,
                    "%s: range_size must be positive, frame_size 4K to 64M, level 0 to 22, min_rate "
                    "1 to 2G", path);
        return false;
    }
    o->range_size = range;
    o->frame_size = (guint)frame;
    o->level = (int)level;
    o->timeout_s = (guint)timeout;
    o->min_rate = min_rate;
    o->min_rate_window_s = (guint)window;
    if (url)
        get_string(kf, "store", "url", url);
    if (cache_dir)
        get_string(kf, "store", "cache_dir", cache_dir);
    get_string(kf, "s3", "endpoint", &o->s3_endpoint);
    get_string(kf, "s3", "region", &o->s3_region);
    get_string(kf, "s3", "access_key", &o->s3_access_key);
    get_string(kf, "s3", "secret_key", &o->s3_secret_key);
    return get_ca_file(kf, "store", path, &o->ca_file, error) &&
           get_ca_file(kf, "s3", path, &o->s3_ca_file, error);
}
