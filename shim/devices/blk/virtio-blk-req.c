/* One virtio-blk request (virtio 1.x, 5.2.6): the chain is checked, the
 * backend called, the status byte written. See virtio-blk-priv.h.
 *
 * A request is a device-readable header (type, ioprio, sector), data, and a
 * device-writable status byte, the last byte of the chain. Nothing is assumed
 * about how the driver cut it into descriptors; what is checked is the
 * direction and size of each part: IN and GET_ID read nothing but the header
 * and write data plus status, OUT, DISCARD and WRITE_ZEROES read header plus
 * data and write only the status, FLUSH has no data.
 */
#define G_LOG_DOMAIN "vsnap-shim"

#include "virtio-blk-priv.h"

#include "devices/device-log.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#define HDR_SIZE ((uint32_t)sizeof(struct virtio_blk_outhdr))
#define SEG_SIZE ((uint32_t)sizeof(struct virtio_blk_discard_write_zeroes))

/* The request as the header and the chain's shape say. */
struct blk_req_view {
    struct virtio_blk_outhdr hdr;
    size_t data_in;  /* readable bytes after the header */
    size_t data_out; /* writable bytes before the status byte */
};

static uint8_t malformed(struct virtio_blk *dev, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static uint8_t malformed(struct virtio_blk *dev, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    device_log_limited(G_LOG_LEVEL_MESSAGE, atomic_fetch_add(&dev->counters.guest_errors, 1) + 1, "guest errors",
                       "disk %s: guest error: %s", dev->id, text);
    return VIRTIO_BLK_S_IOERR;
}

/* Host trouble (a full file system, a failing device), not the guest's: a
 * warning, but a guest that retries must not flood the log either. */
static uint8_t backend_failed(struct virtio_blk *dev, const char *what, uint64_t sector, int err)
{
    if (err == -ENOSPC || err == -EDQUOT)
        atomic_fetch_add(&dev->counters.nospace_errors, 1);
    atomic_store(&dev->counters.last_errno, (uint_fast64_t)-err);
    device_log_limited(G_LOG_LEVEL_WARNING, atomic_fetch_add(&dev->counters.io_errors, 1) + 1, "I/O errors",
                       "disk %s: %s at sector %" G_GUINT64_FORMAT " failed: %s", dev->id, what, sector,
                       g_strerror(-err));
    return VIRTIO_BLK_S_IOERR;
}

/* [sector, sector + bytes) lies inside the disk; bytes is whole sectors. */
static bool in_capacity(const struct virtio_blk *dev, uint64_t sector, uint64_t bytes)
{
    return sector <= dev->capacity_sectors && bytes / BLK_SECTOR_SIZE <= dev->capacity_sectors - sector;
}

static uint8_t check_data(struct virtio_blk *dev, const struct blk_req_view *v, size_t len, const char *what)
{
    if (len % BLK_SECTOR_SIZE)
        return malformed(dev, "%s of %zu bytes: not whole 512-byte sectors", what, len);
    if (!in_capacity(dev, v->hdr.sector, len))
        return malformed(dev, "%s of %zu bytes at sector %" G_GUINT64_FORMAT " runs past the end (%" G_GUINT64_FORMAT
                         " sectors)", what, len, (uint64_t)v->hdr.sector, dev->capacity_sectors);
    return VIRTIO_BLK_S_OK;
}

static uint8_t do_read(struct virtio_blk *dev, struct virtq *q, const struct virtq_chain *c,
                       const struct blk_req_view *v, uint32_t *written)
{
    if (v->data_in)
        return malformed(dev, "IN request with %zu device-readable data bytes (data must be device-writable)",
                         v->data_in);
    uint8_t status = check_data(dev, v, v->data_out, "read");
    if (status != VIRTIO_BLK_S_OK || v->data_out == 0)
        return status;
    struct iovec iov[VIRTQ_MAX_CHAIN];
    unsigned n = virtq_chain_write_iov(c, 0, v->data_out, iov);
    int err = blk_backend_readv(dev->backend, v->hdr.sector * BLK_SECTOR_SIZE, iov, n);
    /* Whatever the backend put there, even on failure, is a write into RAM. */
    virtq_chain_mark_written(q, c, 0, v->data_out);
    if (err)
        return backend_failed(dev, "read", v->hdr.sector, err);
    atomic_fetch_add(&dev->counters.read_ops, 1);
    atomic_fetch_add(&dev->counters.read_bytes, v->data_out);
    *written = (uint32_t)v->data_out;
    return VIRTIO_BLK_S_OK;
}

/* The store's flush, counted; every write that completed before it is durable. */
static int flush_store(struct virtio_blk *dev)
{
    int err = blk_backend_flush(dev->backend);
    if (!err)
        atomic_fetch_add(&dev->counters.store_flushes, 1);
    return err;
}

/* write_through: the write is durable before the guest hears of it. */
static uint8_t written(struct virtio_blk *dev, const char *what, uint64_t sector)
{
    int err = dev->policy.write_through ? flush_store(dev) : 0;
    return err ? backend_failed(dev, what, sector, err) : VIRTIO_BLK_S_OK;
}

static bool iov_all_zero(const struct iovec *iov, unsigned niov)
{
    for (unsigned i = 0; i < niov; i++) {
        const uint8_t *p = iov[i].iov_base;
        size_t len = iov[i].iov_len;
        /* Compare the buffer with itself shifted by one: all bytes equal, and the first is zero. */
        if (len && (p[0] != 0 || memcmp(p, p + 1, len - 1) != 0))
            return false;
    }
    return true;
}

/* detect_zeroes: a write of zeros costs no data (and, with unmap on a disk
 * that discards, may free the space). */
static int write_data(struct virtio_blk *dev, uint64_t offset, const struct iovec *iov, unsigned niov, size_t len)
{
    enum blk_detect_zeroes dz = dev->policy.detect_zeroes;
    if (dz == BLK_DETECT_ZEROES_OFF || !iov_all_zero(iov, niov))
        return blk_backend_writev(dev->backend, offset, iov, niov);
    atomic_fetch_add(&dev->counters.zero_writes, 1);
    bool unmap = dz == BLK_DETECT_ZEROES_UNMAP && dev->backend->can_discard;
    return blk_backend_write_zeroes(dev->backend, offset, len, unmap);
}

static uint8_t do_write(struct virtio_blk *dev, const struct virtq_chain *c, const struct blk_req_view *v)
{
    if (v->data_out)
        return malformed(dev, "OUT request with %zu device-writable data bytes (data must be device-readable)",
                         v->data_out);
    uint8_t status = check_data(dev, v, v->data_in, "write");
    if (status != VIRTIO_BLK_S_OK)
        return status;
    if (dev->backend->readonly)
        return VIRTIO_BLK_S_IOERR; /* VIRTIO_BLK_F_RO: writes fail */
    if (v->data_in == 0)
        return VIRTIO_BLK_S_OK;
    struct iovec iov[VIRTQ_MAX_CHAIN];
    unsigned n = virtq_chain_read_iov(c, HDR_SIZE, v->data_in, iov);
    int err = write_data(dev, v->hdr.sector * BLK_SECTOR_SIZE, iov, n, v->data_in);
    if (err)
        return backend_failed(dev, "write", v->hdr.sector, err);
    atomic_fetch_add(&dev->counters.write_ops, 1);
    atomic_fetch_add(&dev->counters.write_bytes, v->data_in);
    return written(dev, "write", v->hdr.sector);
}

/* ignore_flush (cache='unsafe'): the guest is told its data is safe when it
 * is only in the host's page cache. */
static uint8_t do_flush(struct virtio_blk *dev, const struct blk_req_view *v)
{
    if (v->data_in || v->data_out)
        return malformed(dev, "FLUSH request with %zu + %zu data bytes", v->data_in, v->data_out);
    int err = dev->policy.ignore_flush ? 0 : flush_store(dev);
    if (err)
        return backend_failed(dev, "flush", 0, err);
    atomic_fetch_add(&dev->counters.flush_ops, 1);
    return VIRTIO_BLK_S_OK;
}

/* The serial, up to 20 bytes (NUL-terminated only when shorter). */
static uint8_t do_get_id(struct virtio_blk *dev, struct virtq *q, const struct virtq_chain *c,
                         const struct blk_req_view *v, uint32_t *written)
{
    if (v->data_in)
        return malformed(dev, "GET_ID request with %zu device-readable data bytes", v->data_in);
    size_t len = MIN(v->data_out, (size_t)VIRTIO_BLK_ID_BYTES);
    *written = (uint32_t)virtq_chain_write(q, c, 0, dev->serial, len);
    return VIRTIO_BLK_S_OK;
}

/* One segment of a DISCARD or WRITE_ZEROES request. */
static uint8_t do_segment(struct virtio_blk *dev, const struct virtio_blk_discard_write_zeroes *seg, bool discard)
{
    const char *what = discard ? "discard" : "write zeroes";
    uint32_t allowed_flags = discard ? 0 : VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP;
    if (seg->flags & ~allowed_flags)
        return VIRTIO_BLK_S_UNSUPP; /* the unmap bit on a discard, or a reserved bit */
    uint64_t bytes = (uint64_t)seg->num_sectors * BLK_SECTOR_SIZE;
    if (seg->num_sectors > BLK_MAX_DISCARD_SECTORS || !in_capacity(dev, seg->sector, bytes))
        return malformed(dev, "%s of %u sectors at sector %" G_GUINT64_FORMAT ": beyond the limit or the end",
                         what, seg->num_sectors, (uint64_t)seg->sector);
    int err = discard ? blk_backend_discard(dev->backend, seg->sector * BLK_SECTOR_SIZE, bytes)
                      : blk_backend_write_zeroes(dev->backend, seg->sector * BLK_SECTOR_SIZE, bytes,
                                                 seg->flags & VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
    if (err)
        return backend_failed(dev, what, seg->sector, err);
    atomic_fetch_add(discard ? &dev->counters.discard_ops : &dev->counters.write_zeroes_ops, 1);
    return VIRTIO_BLK_S_OK;
}

static uint8_t do_ranges(struct virtio_blk *dev, const struct virtq_chain *c, const struct blk_req_view *v,
                         bool discard)
{
    const char *what = discard ? "DISCARD" : "WRITE_ZEROES";
    bool offered = discard ? dev->backend->can_discard : !dev->backend->readonly;
    if (dev->backend->readonly)
        return VIRTIO_BLK_S_IOERR;
    if (!offered)
        return VIRTIO_BLK_S_UNSUPP;
    if (v->data_out)
        return malformed(dev, "%s request with %zu device-writable data bytes", what, v->data_out);
    if (v->data_in == 0 || v->data_in % SEG_SIZE || v->data_in / SEG_SIZE > BLK_MAX_DISCARD_SEG)
        return malformed(dev, "%s request with %zu bytes of segments (1 to %u segments of %u bytes)", what,
                         v->data_in, BLK_MAX_DISCARD_SEG, SEG_SIZE);
    for (size_t off = 0; off < v->data_in; off += SEG_SIZE) {
        struct virtio_blk_discard_write_zeroes seg;
        virtq_chain_read(c, HDR_SIZE + off, &seg, SEG_SIZE);
        uint8_t status = do_segment(dev, &seg, discard);
        if (status != VIRTIO_BLK_S_OK)
            return status;
    }
    return written(dev, what, v->hdr.sector);
}

static uint8_t dispatch(struct virtio_blk *dev, struct virtq *q, const struct virtq_chain *c,
                        const struct blk_req_view *v, uint32_t *written)
{
    switch (v->hdr.type) {
    case VIRTIO_BLK_T_IN:
        return do_read(dev, q, c, v, written);
    case VIRTIO_BLK_T_OUT:
        return do_write(dev, c, v);
    case VIRTIO_BLK_T_FLUSH:
        return do_flush(dev, v);
    case VIRTIO_BLK_T_GET_ID:
        return do_get_id(dev, q, c, v, written);
    case VIRTIO_BLK_T_DISCARD:
        return do_ranges(dev, c, v, true);
    case VIRTIO_BLK_T_WRITE_ZEROES:
        return do_ranges(dev, c, v, false);
    default:
        atomic_fetch_add(&dev->counters.unsupported, 1);
        return VIRTIO_BLK_S_UNSUPP;
    }
}

void blk_request_execute(struct virtio_blk *dev, struct virtq *q, struct blk_request *req)
{
    const struct virtq_chain *c = &req->chain;
    req->used_len = 0;
    if (req->malformed) {
        malformed(dev, "malformed chain: %s", req->why);
        req->used_len = virtq_chain_write_tail_byte(q, c, VIRTIO_BLK_S_IOERR) ? 1 : 0;
        return;
    }
    if (c->write_len == 0) {
        malformed(dev, "request without a device-writable status byte");
        return; /* nowhere to answer: the chain goes back with nothing written */
    }
    struct blk_req_view v = { .data_out = c->write_len - 1 };
    uint32_t written = 0;
    uint8_t status;
    if (c->read_len < HDR_SIZE) {
        status = malformed(dev, "request header of %zu bytes (%u needed)", c->read_len, HDR_SIZE);
    } else {
        virtq_chain_read(c, 0, &v.hdr, HDR_SIZE);
        v.data_in = c->read_len - HDR_SIZE;
        status = dispatch(dev, q, c, &v, &written);
    }
    virtq_chain_write(q, c, c->write_len - 1, &status, 1);
    req->used_len = written + 1;
}

/* ---- through the ring (io='io_uring') ---- */

/* Only what needs nothing but the transfer: anything to report (a bad
 * request, a read-only disk), and an all-zero write under detect_zeroes,
 * stays blk_request_execute's. */
static bool ring_can_take(struct virtio_blk *dev, const struct virtq_chain *c, const struct virtio_blk_outhdr *hdr,
                          bool *write, size_t *len)
{
    size_t data_in = c->read_len - HDR_SIZE, data_out = c->write_len - 1;
    *write = hdr->type == VIRTIO_BLK_T_OUT;
    if (hdr->type == VIRTIO_BLK_T_IN)
        *len = data_in == 0 ? data_out : 0;
    else if (*write)
        *len = data_out == 0 && !dev->backend->readonly ? data_in : 0;
    else
        return false;
    return *len && *len % BLK_SECTOR_SIZE == 0 && in_capacity(dev, hdr->sector, *len);
}

bool blk_request_start(struct virtio_blk *dev, struct blk_request *req)
{
    const struct virtq_chain *c = &req->chain;
    if (req->malformed || c->write_len == 0 || c->read_len < HDR_SIZE)
        return false;
    struct virtio_blk_outhdr hdr;
    virtq_chain_read(c, 0, &hdr, HDR_SIZE);
    bool write;
    size_t len;
    if (!ring_can_take(dev, c, &hdr, &write, &len))
        return false;
    unsigned n = write ? virtq_chain_read_iov(c, HDR_SIZE, len, req->iov) : virtq_chain_write_iov(c, 0, len, req->iov);
    if (write && dev->policy.detect_zeroes != BLK_DETECT_ZEROES_OFF && iov_all_zero(req->iov, n))
        return false;
    if (!blk_uring_start(dev->ring, dev->backend, hdr.sector * BLK_SECTOR_SIZE, req->iov, n, write, req))
        return false;
    req->ring_write = write;
    req->sector = hdr.sector;
    req->len = len;
    return true;
}

void blk_request_finish(struct virtio_blk *dev, struct virtq *q, struct blk_request *req, int err)
{
    const struct virtq_chain *c = &req->chain;
    const char *what = req->ring_write ? "write" : "read";
    uint32_t data = 0;
    uint8_t status;
    if (!req->ring_write) /* whatever the kernel put there, even on failure, is a write into RAM */
        virtq_chain_mark_written(q, c, 0, req->len);
    if (err) {
        status = backend_failed(dev, what, req->sector, err);
    } else if (req->ring_write) {
        atomic_fetch_add(&dev->counters.write_ops, 1);
        atomic_fetch_add(&dev->counters.write_bytes, req->len);
        status = written(dev, what, req->sector);
    } else {
        atomic_fetch_add(&dev->counters.read_ops, 1);
        atomic_fetch_add(&dev->counters.read_bytes, req->len);
        data = (uint32_t)req->len;
        status = VIRTIO_BLK_S_OK;
    }
    atomic_fetch_add(&dev->counters.ring_transfers, 1);
    virtq_chain_write(q, c, c->write_len - 1, &status, 1);
    req->used_len = data + 1;
}
