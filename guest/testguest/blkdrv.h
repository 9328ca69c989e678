/* A polled virtio-blk driver for the test guest (virtio 1.x over virtio-mmio,
 * one queue per disk).
 *
 * Disks are numbered from 0 in command-line order (the shim declares them in
 * its config's order). Requests go out in batches of up to BLK_MAX_DEPTH with
 * one doorbell per batch (none while the device polls), and the used ring is
 * polled; nothing uses interrupts. A request that gets no answer within
 * BLK_TIMEOUT_MS counts as failed (BLK_TIMEOUT).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BLK_MAX_DISKS 8
#define BLK_SECTOR 512u
#define BLK_MAX_DEPTH 32u
#define BLK_BUFFER_BYTES (4u << 20)
#define BLK_TIMEOUT_MS 10000

/* Request types and statuses (virtio spec 5.2.6). */
#define BLK_T_IN 0u
#define BLK_T_OUT 1u
#define BLK_T_FLUSH 4u
#define BLK_T_GET_ID 8u
#define BLK_T_DISCARD 11u
#define BLK_T_WRITE_ZEROES 13u
#define BLK_S_OK 0
#define BLK_S_IOERR 1
#define BLK_S_UNSUPP 2
#define BLK_TIMEOUT (-1)
#define BLK_ID_BYTES 20u

struct blk_info {
    uint64_t capacity; /* 512-byte sectors */
    uint32_t config_changes; /* configuration-change interrupts taken (blockresize) */
    bool readonly, flush, discard, write_zeroes;
    uint32_t blk_size, seg_max;
};

/* Find and start every virtio-blk device the command line names. Returns how
 * many (a serial line per disk says what it is). */
unsigned blk_init(const char *cmdline, uint64_t tsc_khz);
unsigned blk_count(void);
/* NULL for a disk that does not exist. The capacity is read again from the
 * config space each time; a configuration-change interrupt is taken
 * (acknowledged, counted in config_changes) then too. */
const struct blk_info *blk_info(unsigned disk);

/* Static, page-aligned, below 16 MiB: what the commands stage data in. */
uint8_t *blk_buffer(void);

/* Transfer len bytes (whole sectors) between buf and the disk at sector, as
 * requests of up to chunk bytes with up to depth of them in flight. Returns
 * BLK_S_OK, the first other status, or BLK_TIMEOUT. */
int blk_rw(unsigned disk, bool write, uint64_t sector, void *buf, uint64_t len, uint32_t chunk,
           unsigned depth);
/* One request without data (FLUSH), or with data (GET_ID into buf). */
int blk_simple(unsigned disk, uint32_t type, void *buf, uint32_t len, uint32_t *used_len);
/* One DISCARD or WRITE_ZEROES request of one segment. */
int blk_ranges(unsigned disk, uint32_t type, uint64_t sector, uint32_t sectors, uint32_t flags);

/* The benchmark's loop: count requests of bs bytes, depth in flight, at
 * sequential (wrapping) or pseudo-random bs-aligned offsets inside
 * [sector, sector + span), data staged in blk_buffer. *elapsed_us is the
 * time from the first submit to the last completion. */
int blk_bench(unsigned disk, bool write, bool random, uint64_t sector, uint64_t span, uint32_t bs,
              unsigned depth, uint64_t count, uint64_t *elapsed_us);

/* Malformed requests sent to the device, each checked for the answer the
 * spec demands (IOERR, UNSUPP, or the chain back with nothing written when
 * the status byte cannot be reached). Returns how many were sent, or -1
 * with *failed_case set to the first that was answered otherwise. */
int blk_send_malformed(unsigned disk, unsigned *failed_case, int *got_status, uint32_t *got_len);
