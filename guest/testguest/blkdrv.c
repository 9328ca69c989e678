/* Polled virtio-blk driver (see blkdrv.h). Request layout from the virtio
 * spec, section 5.2.6: a device-readable header, the data, a device-writable
 * status byte. Slot s of a disk owns descriptors 3s, 3s + 1 and 3s + 2. */
#include "blkdrv.h"

#include "io.h"
#include "libc.h"
#include "pattern.h"
#include "serial.h"
#include "virtio.h"

#define VIRTIO_ID_BLOCK 2u
#define QUEUE_SIZE 128u
#define F_SEG_MAX (1u << 2)
#define F_RO (1u << 5)
#define F_BLK_SIZE (1u << 6)
#define F_FLUSH (1u << 9)
#define F_DISCARD (1u << 13)
#define F_WRITE_ZEROES (1u << 14)
#define WANTED_FEATURES (F_SEG_MAX | F_RO | F_BLK_SIZE | F_FLUSH | F_DISCARD | F_WRITE_ZEROES)
/* virtio_blk_config offsets */
#define CFG_CAPACITY 0
#define CFG_SEG_MAX 12
#define CFG_BLK_SIZE 20

struct req_hdr {
    uint32_t type;
    uint32_t ioprio;
    uint64_t sector;
};

struct range_seg {
    uint64_t sector;
    uint32_t num_sectors;
    uint32_t flags;
};

struct disk {
    struct virtio_dev dev;
    struct vq q;
    struct blk_info info;
    bool busy[BLK_MAX_DEPTH];
    unsigned inflight;
};

static struct {
    unsigned count;
    uint64_t tsc_khz;
    struct disk disks[BLK_MAX_DISKS];
} drv;

/* Rings and request buffers: static, so below 16 MiB with the image. */
static struct vring_desc descs[BLK_MAX_DISKS][QUEUE_SIZE] __attribute__((aligned(16)));
static uint16_t avails[BLK_MAX_DISKS][3 + QUEUE_SIZE] __attribute__((aligned(2)));
/* flags, idx, QUEUE_SIZE elements, avail_event: 6 + 8 * QUEUE_SIZE bytes, and
 * each disk's ring 4-aligned. */
#define USED_RING_BYTES ((6 + 8 * QUEUE_SIZE + 3) & ~3u)
static uint8_t useds[BLK_MAX_DISKS][USED_RING_BYTES] __attribute__((aligned(4)));
static struct req_hdr hdrs[BLK_MAX_DISKS][BLK_MAX_DEPTH];
static volatile uint8_t statuses[BLK_MAX_DISKS][BLK_MAX_DEPTH];
static struct range_seg segs[BLK_MAX_DISKS][BLK_MAX_DEPTH];
static uint8_t buffer[BLK_BUFFER_BYTES] __attribute__((aligned(4096)));

uint8_t *blk_buffer(void)
{
    return buffer;
}

unsigned blk_count(void)
{
    return drv.count;
}

static struct disk *disk_of(unsigned n)
{
    return n < drv.count ? &drv.disks[n] : 0;
}

const struct blk_info *blk_info(unsigned n)
{
    struct disk *d = disk_of(n);
    if (!d)
        return 0;
    d->info.capacity = virtio_config_read64(&d->dev, CFG_CAPACITY);
    if (virtio_take_config_change(&d->dev))
        d->info.config_changes++;
    return &d->info;
}

static bool start_disk(struct disk *d, unsigned n)
{
    uint32_t features;
    if (!virtio_negotiate_features(&d->dev, WANTED_FEATURES, &features))
        return false;
    if (!virtio_setup_queue(&d->dev, &d->q, 0, QUEUE_SIZE, descs[n], avails[n], (volatile uint16_t *)useds[n]))
        return false;
    virtio_driver_ok(&d->dev);
    d->info.readonly = features & F_RO;
    d->info.flush = features & F_FLUSH;
    d->info.discard = features & F_DISCARD;
    d->info.write_zeroes = features & F_WRITE_ZEROES;
    d->info.capacity = virtio_config_read64(&d->dev, CFG_CAPACITY);
    d->info.seg_max = features & F_SEG_MAX ? virtio_config_read32(&d->dev, CFG_SEG_MAX) : 0;
    d->info.blk_size = features & F_BLK_SIZE ? virtio_config_read32(&d->dev, CFG_BLK_SIZE) : BLK_SECTOR;
    return true;
}

unsigned blk_init(const char *cmdline, uint64_t tsc_khz)
{
    drv.tsc_khz = tsc_khz ? tsc_khz : 1000000;
    for (unsigned n = 0; n < BLK_MAX_DISKS; n++) {
        struct disk *d = &drv.disks[n];
        if (!virtio_find_nth(cmdline, VIRTIO_ID_BLOCK, n, &d->dev))
            break;
        if (!start_disk(d, n)) {
            serial_log("error: a virtio-blk device refused the driver");
            break;
        }
        drv.count = n + 1;
        serial_puts("vsnap-testguest: disk ");
        serial_put_dec(n);
        serial_puts(": ");
        serial_put_dec(d->info.capacity);
        serial_puts(d->info.readonly ? " sectors, read-only\n" : " sectors\n");
    }
    return drv.count;
}

/* ---- requests ---- */

static void set_desc(struct disk *d, uint16_t i, const volatile void *addr, uint32_t len, uint16_t flags,
                     uint16_t next)
{
    d->q.desc[i].addr = (uintptr_t)addr;
    d->q.desc[i].len = len;
    d->q.desc[i].flags = flags;
    d->q.desc[i].next = next;
}

/* Header, data (device-writable for IN and GET_ID), status. */
static void submit(struct disk *d, unsigned slot, uint32_t type, uint64_t sector, const void *data, uint32_t len)
{
    unsigned n = (unsigned)(d - drv.disks);
    uint16_t head = (uint16_t)(3 * slot);
    hdrs[n][slot] = (struct req_hdr){ .type = type, .sector = sector };
    statuses[n][slot] = 0xff;
    uint16_t status_desc = len ? head + 2 : head + 1;
    set_desc(d, head, &hdrs[n][slot], sizeof hdrs[n][slot], VRING_DESC_F_NEXT, head + 1);
    if (len) {
        bool device_writes = type == BLK_T_IN || type == BLK_T_GET_ID;
        set_desc(d, head + 1, data, len, VRING_DESC_F_NEXT | (device_writes ? VRING_DESC_F_WRITE : 0), head + 2);
    } else {
        d->q.desc[head].next = status_desc;
    }
    set_desc(d, status_desc, &statuses[n][slot], 1, VRING_DESC_F_WRITE, 0);
    d->busy[slot] = true;
    d->inflight++;
    vq_publish(&d->q, head);
}

/* A gap this long between two looks at the used ring means the VM was stopped. */
#define STOPPED_MS 50

static uint64_t deadline_after_ms(uint64_t ms)
{
    return rdtsc() + ms * drv.tsc_khz;
}

/* Wait for any completion: its slot, status and used length. The TSC jumps
 * by the time the VM did not run (paused, or snapshotted and restored later:
 * the shim moves the guest's clock on by the time stopped); such a jump is
 * not held against the device, or a VM restored in the middle of a wait
 * would time out at once. */
static int wait_one(struct disk *d, unsigned *slot, uint32_t *used_len)
{
    vq_flush(&d->dev, &d->q);
    uint64_t deadline = deadline_after_ms(BLK_TIMEOUT_MS);
    uint64_t last = rdtsc(), stopped = STOPPED_MS * drv.tsc_khz;
    struct vring_used_elem elem;
    while (!vq_take_used(&d->q, &elem)) {
        uint64_t now = rdtsc();
        if (now - last > stopped)
            deadline += now - last;
        last = now;
        if (now > deadline)
            return BLK_TIMEOUT;
        cpu_relax();
    }
    *slot = elem.id / 3;
    *used_len = elem.len;
    if (elem.id % 3 || *slot >= BLK_MAX_DEPTH || !d->busy[*slot])
        return BLK_S_IOERR; /* not one of ours: the device is confused */
    d->busy[*slot] = false;
    d->inflight--;
    return statuses[d - drv.disks][*slot];
}

static unsigned free_slot(const struct disk *d, unsigned depth)
{
    for (unsigned s = 0; s < depth; s++)
        if (!d->busy[s])
            return s;
    return depth;
}

/* Wait for everything in flight; the first bad status wins. */
static int drain(struct disk *d, int status)
{
    while (d->inflight) {
        unsigned slot;
        uint32_t len;
        int s = wait_one(d, &slot, &len);
        if (s == BLK_TIMEOUT)
            return BLK_TIMEOUT; /* the rest will not come either */
        if (status == BLK_S_OK)
            status = s;
    }
    return status;
}

int blk_rw(unsigned n, bool write, uint64_t sector, void *buf, uint64_t len, uint32_t chunk, unsigned depth)
{
    struct disk *d = disk_of(n);
    if (!d || depth == 0 || depth > BLK_MAX_DEPTH || chunk == 0 || chunk % BLK_SECTOR || len % BLK_SECTOR)
        return BLK_S_IOERR;
    int status = BLK_S_OK;
    uint8_t *p = buf;
    for (uint64_t done = 0; done < len && status == BLK_S_OK;) {
        unsigned slot = free_slot(d, depth);
        if (slot == depth) {
            uint32_t used;
            status = wait_one(d, &slot, &used);
            continue;
        }
        uint32_t piece = len - done < chunk ? (uint32_t)(len - done) : chunk;
        submit(d, slot, write ? BLK_T_OUT : BLK_T_IN, sector + done / BLK_SECTOR, p + done, piece);
        done += piece;
    }
    return drain(d, status);
}

int blk_simple(unsigned n, uint32_t type, void *buf, uint32_t len, uint32_t *used_len)
{
    struct disk *d = disk_of(n);
    if (!d)
        return BLK_S_IOERR;
    submit(d, 0, type, 0, buf, len);
    unsigned slot;
    int status = wait_one(d, &slot, used_len);
    return status == BLK_TIMEOUT ? status : drain(d, status);
}

int blk_ranges(unsigned n, uint32_t type, uint64_t sector, uint32_t sectors, uint32_t flags)
{
    struct disk *d = disk_of(n);
    if (!d)
        return BLK_S_IOERR;
    segs[n][0] = (struct range_seg){ .sector = sector, .num_sectors = sectors, .flags = flags };
    submit(d, 0, type, 0, &segs[n][0], sizeof segs[n][0]);
    return drain(d, BLK_S_OK);
}

/* ---- the benchmark ---- */

static uint64_t bench_sector(bool random, uint64_t i, uint64_t sector, uint64_t span, uint32_t bs)
{
    uint64_t blocks = span / bs;
    uint64_t block = random ? pattern_mix(i) % blocks : i % blocks;
    return sector + block * (bs / BLK_SECTOR);
}

int blk_bench(unsigned n, bool write, bool random, uint64_t sector, uint64_t span, uint32_t bs, unsigned depth,
              uint64_t count, uint64_t *elapsed_us)
{
    struct disk *d = disk_of(n);
    if (!d || depth == 0 || depth > BLK_MAX_DEPTH || bs == 0 || bs % BLK_SECTOR || span < bs ||
        (uint64_t)bs * depth > BLK_BUFFER_BYTES)
        return BLK_S_IOERR;
    int status = BLK_S_OK;
    uint64_t start = rdtsc();
    for (uint64_t i = 0; i < count && status == BLK_S_OK;) {
        unsigned slot = free_slot(d, depth);
        if (slot == depth) {
            uint32_t used;
            status = wait_one(d, &slot, &used);
            continue;
        }
        submit(d, slot, write ? BLK_T_OUT : BLK_T_IN, bench_sector(random, i, sector, span, bs),
               buffer + (uint64_t)slot * bs, bs);
        i++;
    }
    status = drain(d, status);
    *elapsed_us = (rdtsc() - start) * 1000 / drv.tsc_khz;
    return status;
}

/* ---- malformed requests ---- */

#define OUTSIDE_RAM 0x4000000000ull /* 256 GiB: never RAM here */
#define NO_ANSWER 0x100             /* expected: chain back, nothing written */

enum bad_kind {
    BAD_DATA_OUTSIDE_RAM,  /* IN whose data buffer is not in RAM */
    BAD_HEADER_OUTSIDE_RAM,
    BAD_TOO_LONG,          /* more data descriptors than a chain may have */
    BAD_IN_READABLE_DATA,  /* wrong direction */
    BAD_OUT_WRITABLE_DATA, /* wrong direction */
    BAD_STATUS_READABLE,   /* status byte the device may not write */
    BAD_NO_STATUS,         /* a header and nothing else */
    BAD_BEYOND_CAPACITY,
    BAD_SECTOR_OVERFLOW,
    BAD_PARTIAL_SECTOR,
    BAD_SHORT_HEADER,
    BAD_LOOP,              /* descriptors that chain in a circle */
    BAD_NEXT_OUT_OF_RANGE,
    BAD_UNKNOWN_TYPE,
    BAD_RANGE_BEYOND_CAPACITY,
    BAD_RANGE_TORN_SEGMENT,
    BAD_KINDS,
};

#define TOO_LONG_SEGMENTS 70u

/* The chain of case kind from descriptor 0; returns the status expected. */
static int build_bad(struct disk *d, unsigned n, enum bad_kind kind)
{
    struct req_hdr *hdr = &hdrs[n][0];
    volatile uint8_t *status = &statuses[n][0];
    uint64_t cap = d->info.capacity;
    uint32_t range_type = d->info.discard ? BLK_T_DISCARD : BLK_T_WRITE_ZEROES;
    *hdr = (struct req_hdr){ .type = BLK_T_IN };
    *status = 0xff;
    set_desc(d, 0, hdr, sizeof *hdr, VRING_DESC_F_NEXT, 1);
    set_desc(d, 1, buffer, BLK_SECTOR, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
    set_desc(d, 2, status, 1, VRING_DESC_F_WRITE, 0);
    switch (kind) {
    case BAD_DATA_OUTSIDE_RAM:
        d->q.desc[1].addr = OUTSIDE_RAM;
        return BLK_S_IOERR;
    case BAD_HEADER_OUTSIDE_RAM:
        d->q.desc[0].addr = OUTSIDE_RAM;
        return BLK_S_IOERR;
    case BAD_TOO_LONG:
        for (uint16_t i = 1; i <= TOO_LONG_SEGMENTS; i++)
            set_desc(d, i, buffer + (i - 1) * BLK_SECTOR, BLK_SECTOR, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, i + 1);
        set_desc(d, TOO_LONG_SEGMENTS + 1, status, 1, VRING_DESC_F_WRITE, 0);
        return BLK_S_IOERR;
    case BAD_IN_READABLE_DATA:
        d->q.desc[1].flags = VRING_DESC_F_NEXT;
        return BLK_S_IOERR;
    case BAD_OUT_WRITABLE_DATA:
        hdr->type = BLK_T_OUT;
        return BLK_S_IOERR;
    case BAD_STATUS_READABLE:
        d->q.desc[2].flags = 0;
        return NO_ANSWER;
    case BAD_NO_STATUS:
        d->q.desc[0].flags = 0;
        return NO_ANSWER;
    case BAD_BEYOND_CAPACITY:
        hdr->sector = cap - 1;
        d->q.desc[1].len = 2 * BLK_SECTOR;
        return BLK_S_IOERR;
    case BAD_SECTOR_OVERFLOW:
        hdr->sector = ~0ull;
        return BLK_S_IOERR;
    case BAD_PARTIAL_SECTOR:
        d->q.desc[1].len = 100;
        return BLK_S_IOERR;
    case BAD_SHORT_HEADER:
        d->q.desc[0].len = 8;
        return BLK_S_IOERR;
    case BAD_LOOP:
        d->q.desc[2].flags = VRING_DESC_F_WRITE | VRING_DESC_F_NEXT;
        d->q.desc[2].next = 1;
        return NO_ANSWER;
    case BAD_NEXT_OUT_OF_RANGE:
        d->q.desc[1].next = QUEUE_SIZE + 7;
        return NO_ANSWER;
    case BAD_UNKNOWN_TYPE:
        hdr->type = 99;
        return BLK_S_UNSUPP;
    case BAD_RANGE_BEYOND_CAPACITY:
    case BAD_RANGE_TORN_SEGMENT:
        hdr->type = range_type;
        segs[n][0] = (struct range_seg){ .sector = cap, .num_sectors = 8 };
        set_desc(d, 1, &segs[n][0], kind == BAD_RANGE_TORN_SEGMENT ? 10 : sizeof segs[n][0], VRING_DESC_F_NEXT, 2);
        return BLK_S_IOERR;
    case BAD_KINDS:
        break;
    }
    return BLK_S_IOERR;
}

int blk_send_malformed(unsigned n, unsigned *failed_case, int *got_status, uint32_t *got_len)
{
    struct disk *d = disk_of(n);
    if (!d || d->inflight)
        return -1;
    blk_info(n);
    for (unsigned kind = 0; kind < BAD_KINDS; kind++) {
        int expected = build_bad(d, n, (enum bad_kind)kind);
        d->busy[0] = true;
        d->inflight = 1;
        vq_publish(&d->q, 0);
        unsigned slot;
        uint32_t len = 0;
        int status = wait_one(d, &slot, &len);
        bool ok = expected == NO_ANSWER ? status != BLK_TIMEOUT && len == 0 && statuses[n][0] == 0xff
                                        : status == expected && len == 1;
        if (!ok) {
            *failed_case = kind;
            *got_status = status;
            *got_len = len;
            d->busy[0] = false;
            d->inflight = 0;
            return -1;
        }
    }
    return BAD_KINDS;
}
