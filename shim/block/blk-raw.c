/* Raw images: a regular file or a block device, read and written with
 * preadv/pwritev on the disk's I/O thread. See blk-backend.h. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "block/blk-backend.h"
#include "blk-iov.h"
#include "sandbox/confine.h"
#include "snapshot/image-lock.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Unaligned O_DIRECT transfers are staged through this much aligned memory at a time. */
#define BOUNCE_BYTES (1u << 20)
#define ZERO_CHUNK (256u * 1024u)

struct blk_raw {
    struct blk_backend base; /* first: a struct blk_backend * is a struct blk_raw * */
    int fd;
    bool block_device;
    bool sparse;
    bool direct;
    uint32_t mem_align, off_align; /* O_DIRECT's alignment of buffers and of offsets and lengths */
    uint8_t *bounce;               /* BOUNCE_BYTES, allocated on first unaligned O_DIRECT transfer */
};

static struct blk_raw *raw_of(struct blk_backend *b)
{
    return (struct blk_raw *)b;
}

void blk_backend_close(struct blk_backend *b)
{
    if (b)
        b->ops->close(b);
}

/* ---- plain transfers ---- */

/* Every byte, retrying short transfers. A read past the end of a file that
 * shrank under us reads zeros, as the disk's capacity promised bytes there. */
static int transfer_all(struct blk_raw *r, uint64_t offset, const struct iovec *iov, unsigned niov, bool write)
{
    size_t total = blk_iov_total(iov, niov), done = 0;
    struct iovec rest[IOV_MAX];
    if (niov > IOV_MAX)
        return -EINVAL;
    while (done < total) {
        unsigned n = blk_iov_advance(iov, niov, done, rest);
        ssize_t got = write ? pwritev(r->fd, rest, (int)n, (off_t)(offset + done))
                            : preadv(r->fd, rest, (int)n, (off_t)(offset + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -errno;
        if (got == 0 && write)
            return -EIO;
        if (got == 0) {
            for (unsigned i = 0; i < n; i++)
                memset(rest[i].iov_base, 0, rest[i].iov_len);
            return 0;
        }
        done += (size_t)got;
    }
    return 0;
}

static int pread_all(struct blk_raw *r, uint64_t offset, uint8_t *buf, size_t len)
{
    struct iovec iov = { buf, len };
    return transfer_all(r, offset, &iov, 1, false);
}

static int pwrite_all(struct blk_raw *r, uint64_t offset, const uint8_t *buf, size_t len)
{
    struct iovec iov = { (void *)buf, len };
    return transfer_all(r, offset, &iov, 1, true);
}

/* ---- O_DIRECT ---- */

static bool dio_aligned(const struct blk_raw *r, uint64_t offset, const struct iovec *iov, unsigned niov)
{
    if (offset % r->off_align)
        return false;
    for (unsigned i = 0; i < niov; i++)
        if ((uintptr_t)iov[i].iov_base % r->mem_align || iov[i].iov_len % r->off_align)
            return false;
    return true;
}

/* An O_DIRECT transfer the guest's buffers do not allow: through the bounce
 * buffer, one aligned chunk at a time. A write that covers a chunk only
 * partly (a 512-byte write on a 4 KiB-aligned device) reads the chunk first. */
static int bounce_transfer(struct blk_raw *r, uint64_t offset, const struct iovec *iov, unsigned niov, bool write)
{
    if (!r->bounce && posix_memalign((void **)&r->bounce, MAX(r->mem_align, 4096u), BOUNCE_BYTES) != 0) {
        r->bounce = NULL;
        return -ENOMEM;
    }
    uint64_t end = offset + blk_iov_total(iov, niov);
    uint64_t pos = offset - offset % r->off_align;
    while (pos < end) {
        uint64_t chunk_end = MIN(pos + BOUNCE_BYTES, end + (r->off_align - end % r->off_align) % r->off_align);
        size_t chunk = (size_t)(chunk_end - pos);
        uint64_t from = MAX(pos, offset), to = MIN(chunk_end, end);
        bool partial = from > pos || to < chunk_end;
        int err = 0;
        if (!write || partial)
            err = pread_all(r, pos, r->bounce, chunk);
        if (err)
            return err;
        blk_iov_copy(iov, niov, (size_t)(from - offset), r->bounce + (from - pos), (size_t)(to - from), !write);
        if (write && (err = pwrite_all(r, pos, r->bounce, chunk)))
            return err;
        pos = chunk_end;
    }
    return 0;
}

/* ---- ops ---- */

static int raw_transfer(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov, bool write)
{
    struct blk_raw *r = raw_of(b);
    if (r->direct && !dio_aligned(r, offset, iov, niov))
        return bounce_transfer(r, offset, iov, niov, write);
    return transfer_all(r, offset, iov, niov, write);
}

static int raw_readv(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov)
{
    return raw_transfer(b, offset, iov, niov, false);
}

static int raw_writev(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov)
{
    return raw_transfer(b, offset, iov, niov, true);
}

static int raw_flush(struct blk_backend *b)
{
    struct blk_raw *r = raw_of(b);
    if (r->base.readonly)
        return 0;
    while (fdatasync(r->fd) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    return 0;
}

static int block_device_range_ioctl(struct blk_raw *r, unsigned long request, uint64_t offset, uint64_t len)
{
    uint64_t range[2] = { offset, len };
    return ioctl(r->fd, request, range) == 0 ? 0 : -errno;
}

static int raw_discard(struct blk_backend *b, uint64_t offset, uint64_t len)
{
    struct blk_raw *r = raw_of(b);
    int err = r->block_device ? block_device_range_ioctl(r, BLKDISCARD, offset, len)
            : fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)len) == 0 ? 0
                                                                                                       : -errno;
    /* Discard is a hint: a store that cannot free space keeps the data. */
    return err == -EOPNOTSUPP || err == -ENOTTY ? 0 : err;
}

static int write_zero_buffers(struct blk_raw *r, uint64_t offset, uint64_t len)
{
    uint8_t *zeros = NULL;
    if (posix_memalign((void **)&zeros, MAX(r->mem_align, 4096u), ZERO_CHUNK) != 0)
        return -ENOMEM;
    memset(zeros, 0, ZERO_CHUNK);
    int err = 0;
    for (uint64_t done = 0; done < len && !err; done += ZERO_CHUNK) {
        struct iovec iov = { zeros, (size_t)MIN(ZERO_CHUNK, len - done) };
        err = raw_transfer(&r->base, offset + done, &iov, 1, true);
    }
    free(zeros);
    return err;
}

static int raw_write_zeroes(struct blk_backend *b, uint64_t offset, uint64_t len, bool may_unmap)
{
    struct blk_raw *r = raw_of(b);
    int mode = may_unmap && r->sparse ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                                      : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
    if (fallocate(r->fd, mode, (off_t)offset, (off_t)len) == 0)
        return 0;
    int err = -errno;
    if (err == -EOPNOTSUPP && r->block_device && block_device_range_ioctl(r, BLKZEROOUT, offset, len) == 0)
        return 0;
    if (err != -EOPNOTSUPP && err != -ENODEV && err != -EINVAL)
        return err; /* ENOSPC and I/O errors are the guest's to know */
    return write_zero_buffers(r, offset, len);
}

/* A ring may do what transfer_all does in one call: an O_DIRECT transfer
 * when the guest's buffers are aligned, and a read through the page cache
 * (a miss waits on the page, not on a worker). Not a write into the page
 * cache: ext4 hands each to one of the ring's kernel workers, a wakeup for
 * a memory copy the disk's thread does at once (cached randwrite at depth
 * 8: 43.6 MB/s through the ring, 70.7 without). */
static int raw_ring_fd(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned niov, bool write)
{
    struct blk_raw *r = raw_of(b);
    if (write && (r->base.readonly || !r->direct))
        return -1;
    return r->direct && !dio_aligned(r, offset, iov, niov) ? -1 : r->fd;
}

static void raw_close(struct blk_backend *b)
{
    struct blk_raw *r = raw_of(b);
    if (r->fd >= 0)
        close(r->fd);
    free(r->bounce);
    g_free(r->base.name);
    g_free(r);
}

static const struct blk_backend_ops raw_ops = {
    .readv = raw_readv,
    .writev = raw_writev,
    .flush = raw_flush,
    .discard = raw_discard,
    .write_zeroes = raw_write_zeroes,
    .ring_fd = raw_ring_fd,
    .close = raw_close,
};

bool blk_raw_share_lock(struct blk_backend *b, bool shared, GError **error)
{
    if (!b || b->ops != &raw_ops || b->readonly)
        return true;
    return snap_image_lock(raw_of(b)->fd, "disk image", b->name, !shared, error);
}

/* ---- opening ---- */

static bool open_failed(GError **error, const char *path, const char *what, int e)
{
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "disk %s: %s: %s", path, what, g_strerror(e));
    return false;
}

/* O_DIRECT's alignment (statx STATX_DIOALIGN); a file system that does not
 * say gets the safe 4 KiB. */
static void query_dio_alignment(struct blk_raw *r)
{
    struct statx stx;
    r->mem_align = r->off_align = 4096;
    if (statx(r->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN) &&
        stx.stx_dio_offset_align) {
        r->mem_align = MAX(stx.stx_dio_mem_align, 1u);
        r->off_align = MAX(stx.stx_dio_offset_align, BLK_SECTOR_SIZE);
    }
}

static bool size_image(struct blk_raw *r, const char *path, GError **error)
{
    struct stat st;
    if (fstat(r->fd, &st) != 0)
        return open_failed(error, path, "fstat", errno);
    uint64_t size = (uint64_t)st.st_size;
    uint32_t logical = BLK_SECTOR_SIZE;
    r->block_device = S_ISBLK(st.st_mode);
    if (r->block_device) {
        int sector = 0;
        if (ioctl(r->fd, BLKGETSIZE64, &size) != 0)
            return open_failed(error, path, "reading the block device's size (BLKGETSIZE64)", errno);
        if (ioctl(r->fd, BLKSSZGET, &sector) == 0 && sector >= (int)BLK_SECTOR_SIZE)
            logical = (uint32_t)sector;
    } else if (!S_ISREG(st.st_mode)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "disk %s: not a regular file or a block device",
                    path);
        return false;
    }
    /* O_DIRECT cannot write a partial last block without growing the file. */
    uint32_t unit = r->direct ? MAX(BLK_SECTOR_SIZE, r->off_align) : BLK_SECTOR_SIZE;
    if (size < unit) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "disk %s: %" G_GUINT64_FORMAT " bytes is less than one %u-byte block", path, size, unit);
        return false;
    }
    if (size % unit)
        g_message("disk %s: its last %" G_GUINT64_FORMAT " bytes are not a whole %u-byte block; the guest does not "
                  "see them", path, size % unit, unit);
    r->base.capacity = size - size % unit;
    r->base.block_size = r->direct ? MAX(logical, r->off_align) : logical;
    return true;
}

bool blk_raw_refresh_capacity(struct blk_backend *b, GError **error)
{
    if (b->ops != &raw_ops) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "disk %s: only an image written directly can grow "
                    "(a disk on snapshot layers keeps the size its layers were taken at)", b->name);
        return false;
    }
    uint64_t before = b->capacity;
    if (!size_image(raw_of(b), b->name, error))
        return false;
    if (b->capacity >= before)
        return true;
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "disk %s: its image shrank under the VM "
                "(%" G_GUINT64_FORMAT " bytes, the guest has %" G_GUINT64_FORMAT ")", b->name, b->capacity, before);
    b->capacity = before;
    return false;
}

struct blk_backend *blk_raw_open(const struct blk_raw_options *opts, GError **error)
{
    struct blk_raw *r = g_new0(struct blk_raw, 1);
    r->base.ops = &raw_ops;
    r->base.name = g_strdup(opts->path);
    r->base.readonly = opts->readonly;
    r->sparse = opts->sparse;
    r->direct = opts->direct;
    r->mem_align = r->off_align = 1;
    int flags = (opts->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | (opts->direct ? O_DIRECT : 0);
    r->fd = opts->adopt_fd > 0 ? opts->adopt_fd
                                : sandbox_open_kept(opts->path, flags);   /* a reset reopens it unprivileged */
    if (opts->adopt_fd > 0 && opts->direct && fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) | O_DIRECT) != 0) {
        close(r->fd);
        r->fd = -1;
    }
    if (r->fd < 0) {
        int e = errno;
        const char *what = e == EINVAL && opts->direct ? "opening it with O_DIRECT (direct=true), which its file "
                                                         "system refuses"
                           : opts->readonly ? "opening it for reading" : "opening it for reading and writing";
        open_failed(error, opts->path, what, e);
        raw_close(&r->base);
        return NULL;
    }
    /* Before anything reads it: an image one VM writes is no other's. */
    if (!opts->unlocked && !snap_image_lock(r->fd, "disk image", opts->path, !opts->readonly, error)) {
        raw_close(&r->base);
        return NULL;
    }
    if (opts->direct)
        query_dio_alignment(r);
    if (!size_image(r, opts->path, error)) {
        raw_close(&r->base);
        return NULL;
    }
    r->base.can_discard = opts->sparse && !opts->readonly;
    return &r->base;
}
