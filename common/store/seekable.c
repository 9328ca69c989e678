/* zstd's seekable format: the seek table and one frame at a time (seekable.h). */
#include "store/seekable.h"
#include "store/store.h"

#include <string.h>
#include <zstd.h>

void seekable_table_clear(struct seekable_table *t)
{
    g_clear_pointer(&t->frames, g_free);
    t->nframes = 0;
}

static void put_u32(guint8 *p, guint32 v)
{
    v = GUINT32_TO_LE(v);
    memcpy(p, &v, 4);
}

static guint32 get_u32(const guint8 *p)
{
    guint32 v;
    memcpy(&v, p, 4);
    return GUINT32_FROM_LE(v);
}

GBytes *seekable_table_encode(const struct seekable_frame *frames, guint nframes)
{
    gsize size = seekable_table_size(nframes);
    guint8 *buf = g_malloc(size), *p = buf;
    put_u32(p, SEEKABLE_SKIPPABLE_MAGIC);
    put_u32(p + 4, (guint32)(size - 8));
    p += 8;
    for (guint i = 0; i < nframes; i++, p += SEEKABLE_ENTRY_SIZE) {
        put_u32(p, frames[i].size);
        put_u32(p + 4, frames[i].data_size);
        put_u32(p + 8, frames[i].checksum);
    }
    put_u32(p, nframes);
    p[4] = SEEKABLE_CHECKSUM_FLAG;
    put_u32(p + 5, SEEKABLE_MAGIC);
    return g_bytes_new_take(buf, size);
}

/* The bounds of seekable.h, checked before anything is sized by a frame. */
static bool frame_sizes_allowed(const struct seekable_frame *f, bool last, guint32 index,
                                const char *name, GError **error)
{
    if (f->data_size > SEEKABLE_MAX_FRAME_DATA || f->size > SEEKABLE_MAX_FRAME_SIZE) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                    "object %s: frame %u claims %u bytes (%u compressed), more than a frame may "
                    "hold (%u MiB): refused before decompressing", name, index, f->data_size,
                    f->size, SEEKABLE_MAX_FRAME_DATA >> 20);
        return false;
    }
    if (last && f->data_size == 0) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT, "object %s: its last frame (%u) is empty",
                    name, index);
        return false;
    }
    if (!last && f->data_size < SEEKABLE_MIN_FRAME_DATA) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                    "object %s: frame %u holds %u bytes, fewer than any frame but the last may (%u)",
                    name, index, f->data_size, SEEKABLE_MIN_FRAME_DATA);
        return false;
    }
    return true;
}

bool seekable_table_parse(const guint8 *tail, gsize tail_len, guint64 object_size,
                          const char *name, struct seekable_table *t, GError **error)
{
    memset(t, 0, sizeof(*t));
    if (tail_len < seekable_table_size(0) || tail_len > object_size)
        goto bad;
    const guint8 *foot = tail + tail_len - SEEKABLE_FOOTER_SIZE;
    if (get_u32(foot + 5) != SEEKABLE_MAGIC) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                    "object %s: no seek table (not in zstd's seekable format)", name);
        return false;
    }
    guint32 n = get_u32(foot);
    guint8 desc = foot[4];
    if ((desc & 0x7c) || !(desc & SEEKABLE_CHECKSUM_FLAG) || n > SEEKABLE_MAX_FRAMES)
        goto bad;
    guint64 table = seekable_table_size(n);
    if (table > tail_len)
        goto bad;
    const guint8 *start = tail + tail_len - table;
    if (get_u32(start) != SEEKABLE_SKIPPABLE_MAGIC || get_u32(start + 4) != table - 8)
        goto bad;
    t->frames = g_new0(struct seekable_frame, n ? n : 1);
    t->nframes = n;
    t->object_size = object_size;
    guint64 off = 0, data = 0;
    for (guint32 i = 0; i < n; i++) {
        const guint8 *e = start + 8 + (gsize)i * SEEKABLE_ENTRY_SIZE;
        struct seekable_frame *f = &t->frames[i];
        f->offset = off;
        f->data_offset = data;
        f->size = get_u32(e);
        f->data_size = get_u32(e + 4);
        f->checksum = get_u32(e + 8);
        if (f->size < 4)
            goto bad;
        if (!frame_sizes_allowed(f, i + 1 == n, i, name, error)) {
            seekable_table_clear(t);
            return false;
        }
        off += f->size;
        data += f->data_size;
    }
    if (off + table != object_size)
        goto bad;
    t->data_size = data;
    return true;
bad:
    seekable_table_clear(t);
    g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                "object %s: its seek table is damaged or does not fit the object's %" G_GUINT64_FORMAT
                " bytes", name, object_size);
    return false;
}

GBytes *seekable_compress_frame(void *cctx, const void *data, gsize len, int level, GError **error)
{
    ZSTD_CCtx *c = cctx;
    ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1);
    gsize cap = ZSTD_compressBound(len);
    guint8 *out = g_malloc(cap);
    size_t n = ZSTD_compress2(c, out, cap, data, len);
    if (ZSTD_isError(n)) {
        g_free(out);
        g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "zstd: %s", ZSTD_getErrorName(n));
        return NULL;
    }
    return g_bytes_new_take(g_realloc(out, n), n);
}

guint32 seekable_frame_checksum(GBytes *frame)
{
    gsize n;
    const guint8 *p = g_bytes_get_data(frame, &n);
    return get_u32(p + n - 4);
}

bool seekable_decompress_frame(void *dctx, const struct seekable_frame *f, guint index,
                               const guint8 *bytes, void *out, const char *name, GError **error)
{
    unsigned long long content = ZSTD_getFrameContentSize(bytes, f->size);
    size_t frame_len = ZSTD_findFrameCompressedSize(bytes, f->size);
    if (content != f->data_size || ZSTD_isError(frame_len) || frame_len != f->size ||
        get_u32(bytes + f->size - 4) != f->checksum) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                    "object %s: frame %u (bytes %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT
                    ") does not match the seek table", name, index, f->offset,
                    f->offset + f->size - 1);
        return false;
    }
    size_t n = ZSTD_decompressDCtx(dctx, out, f->data_size, bytes, f->size);
    if (ZSTD_isError(n) || n != f->data_size) {
        g_set_error(error, STORE_ERROR, STORE_ERROR_CORRUPT,
                    "object %s: frame %u (bytes %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT "): %s",
                    name, index, f->offset, f->offset + f->size - 1,
                    ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short frame");
        return false;
    }
    return true;
}

bool seekable_is_zero(const void *data, gsize len)
{
    const guint8 *p = data;
    if (len == 0)
        return true;
    if (p[0] != 0)
        return false;
    return memcmp(p, p + 1, len - 1) == 0;
}
