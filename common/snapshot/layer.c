/* Layer format helpers shared by the writer and the reader: ids, checksums of
 * the header and the index, the error domain. */
#include "snapshot/layer.h"

#include "snapshot/crc32c.h"
#include "snapshot/layer-internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

G_DEFINE_QUARK(snap-error-quark, snap_error)

bool snap_error_is_bad_input(const GError *error)
{
    if (!error || error->domain != SNAP_ERROR)
        return false;
    return error->code == SNAP_ERROR_FORMAT || error->code == SNAP_ERROR_CHECKSUM ||
           error->code == SNAP_ERROR_CHAIN || error->code == SNAP_ERROR_INVALID;
}

void snap_id_random(snap_id *id)
{
    /* getrandom() without flags only blocks before the pool is seeded at boot. */
    ssize_t got = getrandom(id->bytes, sizeof id->bytes, 0);
    if (got != (ssize_t)sizeof id->bytes) {
        for (size_t i = 0; i < sizeof id->bytes; i++)
            id->bytes[i] = (uint8_t)g_random_int();
    }
    id->bytes[6] = (id->bytes[6] & 0x0f) | 0x40; /* RFC 4122 version 4 */
    id->bytes[8] = (id->bytes[8] & 0x3f) | 0x80;
}

bool snap_id_is_nil(const snap_id *id)
{
    static const snap_id nil;
    return memcmp(id, &nil, sizeof nil) == 0;
}

bool snap_id_equal(const snap_id *a, const snap_id *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

void snap_id_to_string(const snap_id *id, char out[37])
{
    const uint8_t *b = id->bytes;
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
}

bool snap_id_parse(const char *text, snap_id *id)
{
    if (!text || strlen(text) != 36)
        return false;
    unsigned n = 0;
    for (unsigned i = 0; i < 36; i++) {
        bool dash_pos = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash_pos) {
            if (text[i] != '-')
                return false;
            continue;
        }
        if (!g_ascii_isxdigit(text[i]))
            return false;
        int v = g_ascii_xdigit_value(text[i]);
        if (n % 2 == 0)
            id->bytes[n / 2] = (uint8_t)(v << 4);
        else
            id->bytes[n / 2] |= (uint8_t)v;
        n++;
    }
    return true;
}

uint32_t snap_layer_header_crc(const struct snap_layer_header *hdr)
{
    struct snap_layer_header copy = *hdr;
    copy.header_crc = 0;
    return crc32c(0, &copy, sizeof copy);
}

uint32_t snap_layer_index_crc(const struct snap_layer_run *runs, uint64_t run_count,
                              const uint32_t *block_crc, uint64_t block_count)
{
    uint32_t crc = crc32c(0, runs, run_count * sizeof *runs);
    return crc32c(crc, block_crc, block_count * sizeof *block_crc);
}

bool snap_layer_is_full(const struct snap_layer *layer)
{
    return layer->hdr.flags & SNAP_LAYER_FLAG_FULL;
}

bool snap_layer_is_disk(const struct snap_layer *layer)
{
    return layer->hdr.flags & SNAP_LAYER_FLAG_DISK;
}
