/* The few C library functions a freestanding guest needs. The compiler may emit
 * calls to memset/memcpy on its own, so those names are fixed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *memset(void *dst, int c, size_t n);
void *memcpy(void *dst, const void *src, size_t n);
size_t strlen(const char *s);

/* Parse an unsigned number: decimal, or hexadecimal with a 0x prefix. Exactly
 * len characters must form the number; false on empty input, stray characters
 * or overflow. */
bool parse_u64(const char *s, size_t len, uint64_t *out);

/* Write value as exactly 16 lowercase hex digits plus a NUL into buf[17]. */
void format_hex64(uint64_t value, char buf[17]);

/* Write value in decimal plus a NUL into buf[21]. */
void format_dec(uint64_t value, char buf[21]);
