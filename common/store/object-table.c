/* An object's seek table, read from its end (one ranged read): checked
 * against its manifest before a pull fetches a frame, described for a push
 * that finds the object in the store already. */
#include "store/object.h"

#include <string.h>

struct collect {
    GByteArray *bytes;
    guint64 start;
};

static bool collect_data(void *ctx, guint range, const guint8 *buf, gsize len, GError **error)
{
    struct collect *c = ctx;
    g_byte_array_append(c->bytes, buf, len);
    return true;
}

static guint64 collect_restart(void *ctx, guint range)
{
    struct collect *c = ctx;
    g_byte_array_set_size(c->bytes, 0);
    return c->start;
}

static GByteArray *fetch_tail(struct transport *t, const char *name, guint64 object_size,
                              guint64 len, GError **error)
{
    struct collect c = { g_byte_array_new(), object_size - len };
    struct fetch_range r = { object_size - len, object_size };
    struct fetch_consumer consumer = { collect_data, collect_restart, NULL, &c };
    if (!t->ops->fetch(t, name, &r, 1, &consumer, error)) {
        g_byte_array_unref(c.bytes);
        return NULL;
    }
    return c.bytes;
}

/* What the manifest claims, before a byte is fetched: the table of nframes
 * frames is fetched whole, so their count is bounded by the data they hold
 * (seekable_max_frames), and the table must fit in the object. */
static bool claims_fit(const char *name, guint64 object_size, guint64 data_size, guint64 nframes,
                       GError **error)
{
    if (nframes > seekable_max_frames(data_size) || nframes > SEEKABLE_MAX_FRAMES) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                    "object %s: %" G_GUINT64_FORMAT " frames for %" G_GUINT64_FORMAT
                    " bytes (at most %" G_GUINT64_FORMAT ": every frame but the last holds %u "
                    "bytes or more)", name, nframes, data_size, seekable_max_frames(data_size),
                    SEEKABLE_MIN_FRAME_DATA);
        return false;
    }
    if (seekable_table_size(nframes) > object_size) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                    "object %s: the manifest's sizes do not fit together", name);
        return false;
    }
    return true;
}

bool object_fetch_table(struct transport *t, const char *name, guint64 object_size,
                        guint64 data_size, guint64 nframes, const char *table_sha256,
                        struct seekable_table *table, GError **error)
{
    if (!claims_fit(name, object_size, data_size, nframes, error))
        return false;
    guint64 len = seekable_table_size(nframes);
    g_autoptr(GByteArray) bytes = fetch_tail(t, name, object_size, len, error);
    if (!bytes)
        return false;
    return object_check_table(bytes->data, bytes->len, name, object_size, data_size, nframes,
                              table_sha256, table, error);
}

bool object_check_table(const guint8 *bytes, gsize len, const char *name, guint64 object_size,
                        guint64 data_size, guint64 nframes, const char *table_sha256,
                        struct seekable_table *table, GError **error)
{
    if (!claims_fit(name, object_size, data_size, nframes, error))
        return false;
    if (len != seekable_table_size(nframes)) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "object %s: short seek table", name);
        return false;
    }
    g_autofree char *sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, bytes, len);
    if (strcmp(sum, table_sha256) != 0) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                    "object %s: its seek table is not the one its manifest names "
                    "(damaged or replaced object)", name);
        return false;
    }
    if (!seekable_table_parse(bytes, len, object_size, name, table, error))
        return false;
    if (table->data_size != data_size || table->nframes != nframes) {
        seekable_table_clear(table);
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                    "object %s: its seek table does not describe %" G_GUINT64_FORMAT " bytes",
                    name, data_size);
        return false;
    }
    return true;
}

bool object_describe(struct transport *t, const char *name, guint64 object_size,
                     struct object_info *info, GError **error)
{
    g_autoptr(GByteArray) foot = NULL, tail = NULL;
    guint64 len = 0;
    guint32 n = 0;
    if (object_size >= seekable_table_size(0))
        foot = fetch_tail(t, name, object_size, SEEKABLE_FOOTER_SIZE, error);
    if (object_size >= seekable_table_size(0) && !foot)
        return false;
    if (foot) {
        memcpy(&n, foot->data, 4);
        n = GUINT32_FROM_LE(n);
        len = seekable_table_size(n);
    }
    if (foot && len <= object_size && !(tail = fetch_tail(t, name, object_size, len, error)))
        return false;
    struct seekable_table table;
    if (!seekable_table_parse(tail ? tail->data : NULL, tail ? tail->len : 0, object_size, name,
                              &table, error))
        return false;
    seekable_table_clear(&table);
    info->object_size = object_size;
    info->frames = n;
    g_autofree char *sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, tail->data, tail->len);
    g_strlcpy(info->table_sha256, sum, sizeof(info->table_sha256));
    return true;
}
