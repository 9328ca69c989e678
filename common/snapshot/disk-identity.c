/* The base image's identity (see disk-identity.h). */
#include "snapshot/disk-identity.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/crc32c.h"
#include "snapshot/layer.h"

static bool image_failed(GError **error, const char *image, const char *what, int err)
{
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO, "disk image %s: %s: %s", image, what, g_strerror(err));
    return false;
}

static bool crc_range(int fd, uint64_t off, uint64_t len, uint32_t *crc, const char *image, GError **error)
{
    g_autofree uint8_t *buf = g_malloc(SNAP_DISK_IDENTITY_SPAN);
    while (len) {
        ssize_t n = pread(fd, buf, MIN(len, SNAP_DISK_IDENTITY_SPAN), (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return image_failed(error, image, "reading it", errno);
        if (n == 0)
            return image_failed(error, image, "reading it", EIO);
        *crc = crc32c(*crc, buf, (size_t)n);
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return true;
}

bool snap_disk_identity_read(const char *image, struct snap_disk_identity *out, GError **error)
{
    int fd = open(image, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return image_failed(error, image, "opening it", errno);
    struct stat st;
    bool ok = fstat(fd, &st) == 0 || image_failed(error, image, "fstat", errno);
    uint64_t size = ok ? (uint64_t)st.st_size : 0;
    if (ok && S_ISBLK(st.st_mode) && ioctl(fd, BLKGETSIZE64, &size) != 0)
        ok = image_failed(error, image, "reading the block device's size", errno);
    uint64_t head = MIN(size, SNAP_DISK_IDENTITY_SPAN);
    uint64_t tail_start = MAX(head, size > SNAP_DISK_IDENTITY_SPAN ? size - SNAP_DISK_IDENTITY_SPAN : 0);
    uint32_t crc = 0;
    ok = ok && crc_range(fd, 0, head, &crc, image, error) &&
         crc_range(fd, tail_start, size - tail_start, &crc, image, error);
    close(fd);
    if (!ok)
        return false;
    out->size = size;
    out->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
    out->crc32c = crc;
    return true;
}

bool snap_disk_identity_check(const char *image, const struct snap_disk_identity *want, GError **error)
{
    struct snap_disk_identity now;
    if (!snap_disk_identity_read(image, &now, error))
        return false;
    const char *what = now.size != want->size           ? "its size"
                       : now.mtime_ns != want->mtime_ns ? "its modification time"
                       : now.crc32c != want->crc32c     ? "its first or last MiB"
                                                        : NULL;
    if (!what)
        return true;
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_CHAIN,
                "disk image %s changed since it became the base of its disk layers (%s differs: size %"
                G_GUINT64_FORMAT ", mtime_ns %" G_GUINT64_FORMAT ", crc32c %08x were recorded; now %" G_GUINT64_FORMAT
                ", %" G_GUINT64_FORMAT ", %08x): refusing to use the layers over it", image, what, want->size,
                want->mtime_ns, want->crc32c, now.size, now.mtime_ns, now.crc32c);
    return false;
}
