/* CRC-32C (Castagnoli), the checksum of every snapshot layer: header, index
 * and each data block. Hardware instruction (SSE4.2) when the CPU has it,
 * else a slice-by-8 table. Incremental: pass the previous value as crc
 * (0 to start). */
#pragma once

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *data, size_t len);

/* The table path alone (tests compare it with the hardware path). */
uint32_t crc32c_portable(uint32_t crc, const void *data, size_t len);
