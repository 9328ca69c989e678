/* SHA-256 (FIPS 180-4), for the disk sums the Linux guest reports: the host
 * checks them against its own hashlib, so no library is needed in the guest. */
#ifndef VSNAP_LINUX_SHA256_H
#define VSNAP_LINUX_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t h[8];
    uint8_t block[64];
    size_t used;      /* bytes in block */
    uint64_t length;  /* bytes hashed so far */
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t size);
/* 64 lowercase hex digits and a NUL into hex. */
void sha256_final_hex(struct sha256 *s, char hex[65]);
void sha256_final(struct sha256 *s, uint8_t digest[32]);

#endif
