/* Scatter lists (guest buffers) for the backends: their length, copying to
 * and from a flat buffer, and cutting out a byte range. Private to block/. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

size_t blk_iov_total(const struct iovec *iov, unsigned niov);
/* Copy between buf and bytes [at, at + len) of iov (to_iov: buf -> iov). */
void blk_iov_copy(const struct iovec *iov, unsigned niov, size_t at, uint8_t *buf, size_t len, bool to_iov);
/* iov with its first skip bytes dropped, into out (at most niov entries). */
unsigned blk_iov_advance(const struct iovec *iov, unsigned niov, size_t skip, struct iovec *out);
/* Bytes [at, at + len) of iov, into out (at most niov entries). */
unsigned blk_iov_slice(const struct iovec *iov, unsigned niov, size_t at, size_t len, struct iovec *out);
/* Zero bytes [at, at + len) of iov. */
void blk_iov_zero(const struct iovec *iov, unsigned niov, size_t at, size_t len);
