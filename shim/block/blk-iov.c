/* Scatter-list helpers (blk-iov.h). */
#include "blk-iov.h"

#include <string.h>

#include <glib.h>

size_t blk_iov_total(const struct iovec *iov, unsigned niov)
{
    size_t total = 0;
    for (unsigned i = 0; i < niov; i++)
        total += iov[i].iov_len;
    return total;
}

void blk_iov_copy(const struct iovec *iov, unsigned niov, size_t at, uint8_t *buf, size_t len, bool to_iov)
{
    for (unsigned i = 0; i < niov && len > 0; i++) {
        if (at >= iov[i].iov_len) {
            at -= iov[i].iov_len;
            continue;
        }
        size_t piece = MIN(iov[i].iov_len - at, len);
        uint8_t *seg = (uint8_t *)iov[i].iov_base + at;
        if (to_iov)
            memcpy(seg, buf, piece);
        else
            memcpy(buf, seg, piece);
        buf += piece;
        len -= piece;
        at = 0;
    }
}

unsigned blk_iov_advance(const struct iovec *iov, unsigned niov, size_t skip, struct iovec *out)
{
    unsigned n = 0;
    for (unsigned i = 0; i < niov; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        out[n].iov_base = (uint8_t *)iov[i].iov_base + skip;
        out[n++].iov_len = iov[i].iov_len - skip;
        skip = 0;
    }
    return n;
}

unsigned blk_iov_slice(const struct iovec *iov, unsigned niov, size_t at, size_t len, struct iovec *out)
{
    unsigned n = 0;
    for (unsigned i = 0; i < niov && len > 0; i++) {
        if (at >= iov[i].iov_len) {
            at -= iov[i].iov_len;
            continue;
        }
        size_t piece = MIN(iov[i].iov_len - at, len);
        out[n].iov_base = (uint8_t *)iov[i].iov_base + at;
        out[n++].iov_len = piece;
        len -= piece;
        at = 0;
    }
    return n;
}

void blk_iov_zero(const struct iovec *iov, unsigned niov, size_t at, size_t len)
{
    for (unsigned i = 0; i < niov && len > 0; i++) {
        if (at >= iov[i].iov_len) {
            at -= iov[i].iov_len;
            continue;
        }
        size_t piece = MIN(iov[i].iov_len - at, len);
        memset((uint8_t *)iov[i].iov_base + at, 0, piece);
        len -= piece;
        at = 0;
    }
}
