/* SHA-256 of an object's uncompressed bytes, streamed: the digest that
 * names an object. Library-internal.
 *
 * On libcrypto, not GChecksum: OpenSSL's SHA-NI code hashes 1.73 GB/s a
 * core on the development machines where GChecksum's portable C does
 * 0.31 GB/s (CPU time, 1 MiB updates), and a digest of every byte a
 * transfer moves must not be what the transfer waits for. */
#pragma once

#include <glib.h>
#include <stdbool.h>

struct sha256;

struct sha256 *sha256_new(void);
void sha256_update(struct sha256 *s, const void *data, gsize len);
/* The digest as 64 lowercase hex digits; s is spent (only free it after). */
void sha256_finish(struct sha256 *s, char out[65]);
void sha256_free(struct sha256 *s);
typedef struct sha256 sha256;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(sha256, sha256_free)
