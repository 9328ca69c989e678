/* Streamed SHA-256 on libcrypto's EVP interface (sha256.h). */
#include "store/sha256.h"

#include <openssl/evp.h>

struct sha256 {
    EVP_MD_CTX *ctx;
};

struct sha256 *sha256_new(void)
{
    struct sha256 *s = g_new0(struct sha256, 1);
    s->ctx = EVP_MD_CTX_new();
    /* fails only when libcrypto cannot allocate: as g_malloc, that ends us */
    if (!s->ctx || EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) != 1)
        g_error("libcrypto: cannot start a SHA-256 digest");
    return s;
}

void sha256_update(struct sha256 *s, const void *data, gsize len)
{
    if (len && EVP_DigestUpdate(s->ctx, data, len) != 1)
        g_error("libcrypto: SHA-256 update failed");
}

void sha256_finish(struct sha256 *s, char out[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(s->ctx, md, &n) != 1 || n != sizeof(md))
        g_error("libcrypto: SHA-256 final failed");
    for (guint i = 0; i < sizeof(md); i++)
        g_snprintf(out + 2 * i, 3, "%02x", md[i]);
}

void sha256_free(struct sha256 *s)
{
    if (!s)
        return;
    EVP_MD_CTX_free(s->ctx);
    g_free(s);
}
