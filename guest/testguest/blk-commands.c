/* The command port's disk commands (see commands.h), over blkdrv.c. Each runs
 * to completion and writes its one-line answer into reply. */
#include "blk-commands.h"

#include "blkdrv.h"
#include "libc.h"
#include "pattern.h"

#define FILL_CHUNK (1u << 20) /* bytes per request of BLKFILL and BLKSUM */
#define FILL_DEPTH 4u

struct blk_out {
    char *text;
    size_t cap, len;
};

static void put(struct blk_out *o, const char *s)
{
    while (*s && o->len + 1 < o->cap)
        o->text[o->len++] = *s++;
    o->text[o->len] = '\0';
}

static void put_dec(struct blk_out *o, uint64_t v)
{
    char digits[21];
    format_dec(v, digits);
    put(o, digits);
}

static bool number(const char *word, uint64_t *out)
{
    return parse_u64(word, strlen(word), out);
}

/* "<disk> <offset> <length>" with whole sectors; false after answering. */
static bool disk_arg(char **args, struct blk_out *o, unsigned *disk)
{
    uint64_t n;
    if (!number(args[0], &n) || n >= blk_count()) {
        put(o, "ERR no such disk");
        return false;
    }
    *disk = (unsigned)n;
    return true;
}

static bool region_args(char **args, struct blk_out *o, unsigned *disk, uint64_t *off, uint64_t *len)
{
    if (!disk_arg(args, o, disk))
        return false;
    if (!number(args[1], off) || !number(args[2], len) || *off % BLK_SECTOR || *len % BLK_SECTOR) {
        put(o, "ERR offset and length must be numbers, multiples of 512");
        return false;
    }
    return true;
}

/* The answer for a status that is not OK. */
static void put_status(struct blk_out *o, unsigned disk, int status, bool wrote)
{
    if (status == BLK_S_OK)
        put(o, "OK");
    else if (status == BLK_S_IOERR && wrote && blk_info(disk)->readonly)
        put(o, "ERR readonly");
    else if (status == BLK_S_IOERR)
        put(o, "ERR ioerr");
    else if (status == BLK_S_UNSUPP)
        put(o, "ERR unsupported");
    else if (status == BLK_TIMEOUT)
        put(o, "ERR timeout: the device did not answer");
    else
        put(o, "ERR bad status from the device");
}

static void cmd_info(char **args, struct blk_out *o)
{
    unsigned disk;
    if (!disk_arg(args, o, &disk))
        return;
    const struct blk_info *info = blk_info(disk);
    put(o, "BLK ");
    put_dec(o, disk);
    put(o, " ");
    put_dec(o, info->capacity);
    put(o, info->readonly ? " 1" : " 0");
}

/* BLKCONFIG d: "CONFIG <d> <capacity> <config-change interrupts taken>". */
static void cmd_config(char **args, struct blk_out *o)
{
    unsigned disk;
    if (!disk_arg(args, o, &disk))
        return;
    const struct blk_info *info = blk_info(disk);
    put(o, "CONFIG ");
    put_dec(o, disk);
    put(o, " ");
    put_dec(o, info->capacity);
    put(o, " ");
    put_dec(o, info->config_changes);
}

static void cmd_fill(char **args, struct blk_out *o)
{
    unsigned disk;
    uint64_t off, len, seed;
    if (!region_args(args, o, &disk, &off, &len))
        return;
    if (!number(args[3], &seed)) {
        put(o, "ERR seed must be a number");
        return;
    }
    int status = BLK_S_OK;
    for (uint64_t done = 0; done < len && status == BLK_S_OK; done += BLK_BUFFER_BYTES) {
        uint64_t piece = len - done < BLK_BUFFER_BYTES ? len - done : BLK_BUFFER_BYTES;
        pattern_fill((uint64_t *)blk_buffer(), done / 8, piece / 8, seed);
        status = blk_rw(disk, true, (off + done) / BLK_SECTOR, blk_buffer(), piece, FILL_CHUNK, FILL_DEPTH);
    }
    put_status(o, disk, status, true);
}

/* BLKFILLZ: zeros written as plain writes (OUT), not as WRITE_ZEROES: what a
 * host's detect_zeroes is there to catch. */
static void cmd_fill_zeros(char **args, struct blk_out *o)
{
    unsigned disk;
    uint64_t off, len;
    if (!region_args(args, o, &disk, &off, &len))
        return;
    uint64_t *words = (uint64_t *)blk_buffer();
    for (uint64_t i = 0; i < BLK_BUFFER_BYTES / 8; i++)
        words[i] = 0;
    int status = BLK_S_OK;
    for (uint64_t done = 0; done < len && status == BLK_S_OK; done += BLK_BUFFER_BYTES) {
        uint64_t piece = len - done < BLK_BUFFER_BYTES ? len - done : BLK_BUFFER_BYTES;
        status = blk_rw(disk, true, (off + done) / BLK_SECTOR, blk_buffer(), piece, FILL_CHUNK, FILL_DEPTH);
    }
    put_status(o, disk, status, true);
}

static void cmd_sum(char **args, struct blk_out *o)
{
    unsigned disk;
    uint64_t off, len;
    if (!region_args(args, o, &disk, &off, &len))
        return;
    uint64_t hash = FNV1A64_OFFSET_BASIS;
    int status = BLK_S_OK;
    for (uint64_t done = 0; done < len && status == BLK_S_OK; done += BLK_BUFFER_BYTES) {
        uint64_t piece = len - done < BLK_BUFFER_BYTES ? len - done : BLK_BUFFER_BYTES;
        status = blk_rw(disk, false, (off + done) / BLK_SECTOR, blk_buffer(), piece, FILL_CHUNK, FILL_DEPTH);
        hash = fnv1a64_update(hash, blk_buffer(), piece);
    }
    if (status != BLK_S_OK) {
        put_status(o, disk, status, false);
        return;
    }
    char hex[17];
    format_hex64(hash, hex);
    put(o, "SUM ");
    put(o, hex);
}

static bool all_zero(const uint8_t *p, uint64_t len)
{
    const uint64_t *w = (const uint64_t *)p;
    for (uint64_t i = 0; i < len / 8; i++)
        if (w[i])
            return false;
    return true;
}

/* BLKCOPY <from> <to> <off> <len>: what `dd conv=sparse` does, disk to disk at
 * the same offset: every COPY_BLOCK that reads as zeros is skipped (the
 * destination keeps what it has there); the answer counts the bytes written. */
#define COPY_BLOCK 4096u
static uint64_t copy_block(uint64_t piece, uint64_t at)
{
    return piece - at < COPY_BLOCK ? piece - at : COPY_BLOCK;
}

static void cmd_copy(char **args, struct blk_out *o)
{
    unsigned from, to;
    uint64_t off, len, written = 0;
    if (!disk_arg(args, o, &from) || !region_args(args + 1, o, &to, &off, &len))
        return;
    int status = BLK_S_OK;
    bool wrote = false; /* the status is the destination's */
    uint8_t *buf = blk_buffer();
    for (uint64_t done = 0; done < len && status == BLK_S_OK; done += BLK_BUFFER_BYTES) {
        uint64_t piece = len - done < BLK_BUFFER_BYTES ? len - done : BLK_BUFFER_BYTES;
        wrote = false;
        status = blk_rw(from, false, (off + done) / BLK_SECTOR, buf, piece, FILL_CHUNK, FILL_DEPTH);
        /* runs of non-zero blocks, each written as one request */
        for (uint64_t at = 0; at < piece && status == BLK_S_OK;) {
            if (all_zero(buf + at, copy_block(piece, at))) {
                at += copy_block(piece, at);
                continue;
            }
            uint64_t end = at + copy_block(piece, at);
            while (end < piece && !all_zero(buf + end, copy_block(piece, end)))
                end += copy_block(piece, end);
            wrote = true;
            status = blk_rw(to, true, (off + done + at) / BLK_SECTOR, buf + at, end - at, FILL_CHUNK, FILL_DEPTH);
            written += end - at;
            at = end;
        }
    }
    if (status != BLK_S_OK) {
        put_status(o, wrote ? to : from, status, wrote);
        return;
    }
    put(o, "OK ");
    put_dec(o, written);
}

static void cmd_flush(char **args, struct blk_out *o)
{
    unsigned disk;
    uint32_t used;
    if (disk_arg(args, o, &disk))
        put_status(o, disk, blk_simple(disk, BLK_T_FLUSH, 0, 0, &used), false);
}

static void cmd_id(char **args, struct blk_out *o)
{
    unsigned disk;
    uint32_t used = 0;
    if (!disk_arg(args, o, &disk))
        return;
    uint8_t *id = blk_buffer();
    memset(id, 0, BLK_ID_BYTES + 1);
    int status = blk_simple(disk, BLK_T_GET_ID, id, BLK_ID_BYTES, &used);
    if (status != BLK_S_OK) {
        put_status(o, disk, status, false);
        return;
    }
    put(o, "ID ");
    put(o, (const char *)id); /* NUL-terminated: the buffer has a zero past the 20 bytes */
}

static void ranges(char **args, struct blk_out *o, uint32_t type, uint32_t flags)
{
    unsigned disk;
    uint64_t off, len;
    if (!region_args(args, o, &disk, &off, &len))
        return;
    put_status(o, disk, blk_ranges(disk, type, off / BLK_SECTOR, (uint32_t)(len / BLK_SECTOR), flags), true);
}

static void cmd_discard(char **args, struct blk_out *o)
{
    ranges(args, o, BLK_T_DISCARD, 0);
}

static void cmd_zero(char **args, struct blk_out *o)
{
    uint64_t unmap;
    if (!number(args[3], &unmap) || unmap > 1) {
        put(o, "ERR unmap must be 0 or 1");
        return;
    }
    ranges(args, o, BLK_T_WRITE_ZEROES, (uint32_t)unmap);
}

static void cmd_badpkt(char **args, struct blk_out *o)
{
    unsigned disk, failed = 0;
    int status = 0;
    uint32_t len = 0;
    if (!disk_arg(args, o, &disk))
        return;
    int sent = blk_send_malformed(disk, &failed, &status, &len);
    if (sent >= 0) {
        put(o, "OK ");
        put_dec(o, (uint64_t)sent);
        return;
    }
    put(o, "ERR malformed request ");
    put_dec(o, failed);
    put(o, " answered with status ");
    put_dec(o, (uint64_t)(status & 0x1ff));
    put(o, " and length ");
    put_dec(o, len);
}

static bool same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* BLKBENCH <n> read|write|randread|randwrite <off> <len> <bs> <depth> <count> */
static void cmd_bench(char **args, struct blk_out *o)
{
    unsigned disk;
    uint64_t off, span, bs, depth, count, elapsed_us = 0;
    if (!disk_arg(args, o, &disk))
        return;
    const char *op = args[1];
    bool write = same(op, "write") || same(op, "randwrite");
    bool random = same(op, "randread") || same(op, "randwrite");
    if (!write && !random && !same(op, "read")) {
        put(o, "ERR operation must be read, write, randread or randwrite");
        return;
    }
    if (!number(args[2], &off) || !number(args[3], &span) || !number(args[4], &bs) || !number(args[5], &depth) ||
        !number(args[6], &count) || off % BLK_SECTOR || span % BLK_SECTOR || bs > BLK_BUFFER_BYTES ||
        depth > BLK_MAX_DEPTH) {
        put(o, "ERR usage: BLKBENCH <n> <op> <offset> <span> <block size> <depth <= 32> <count>");
        return;
    }
    int status = blk_bench(disk, write, random, off / BLK_SECTOR, span, (uint32_t)bs, (unsigned)depth, count,
                           &elapsed_us);
    if (status != BLK_S_OK) {
        put_status(o, disk, status, write);
        return;
    }
    put(o, "BENCH ");
    put_dec(o, count);
    put(o, " ");
    put_dec(o, count * bs);
    put(o, " ");
    put_dec(o, elapsed_us);
}

static const struct blk_command table[] = {
    {"BLKCONFIG", 1, cmd_config},
    {"BLKINFO", 1, cmd_info},     {"BLKFILL", 4, cmd_fill},   {"BLKSUM", 3, cmd_sum},
    {"BLKFLUSH", 1, cmd_flush},   {"BLKID", 1, cmd_id},       {"BLKDISCARD", 3, cmd_discard},
    {"BLKZERO", 4, cmd_zero},     {"BLKBADPKT", 1, cmd_badpkt}, {"BLKBENCH", 7, cmd_bench},
    {"BLKCOPY", 4, cmd_copy},     {"BLKFILLZ", 3, cmd_fill_zeros},
};

const struct blk_command *blk_command_find(const char *name)
{
    for (unsigned i = 0; i < sizeof table / sizeof table[0]; i++)
        if (same(name, table[i].name))
            return &table[i];
    return 0;
}

void blk_command_run(const struct blk_command *cmd, char **args, char *reply, size_t cap)
{
    struct blk_out o = { .text = reply, .cap = cap, .len = 0 };
    reply[0] = '\0';
    if (blk_count() == 0) {
        put(&o, "ERR no disks");
        return;
    }
    cmd->run(args, &o);
}
