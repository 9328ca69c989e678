/* The live snapshot's scratch image (scratch.h). */
#include "ram-snapshot/scratch.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ram-snapshot/dirty-bitmap.h"
#include "snapshot/layer.h"


struct snap_scratch {
    int fd;
    uint64_t size;
    uint8_t *map;
    char *dir;
};

static bool io_failed(GError **error, int err, const char *what, const char *dir)
{
    g_set_error(error, SNAP_ERROR, err == ENOSPC || err == EDQUOT ? SNAP_ERROR_NO_SPACE : SNAP_ERROR_IO,
                "live snapshot: %s in %s: %s", what, dir, g_strerror(err));
    return false;
}

struct snap_scratch *snap_scratch_new(const char *dir, uint64_t ram_size, GError **error)
{
    int fd = dir ? open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) : memfd_create("vsnap-live-scratch", MFD_CLOEXEC);
    if (!dir)
        dir = "memory";
    if (fd < 0) {
        io_failed(error, errno, "cannot create the scratch image", dir);
        return NULL;
    }
    if (ftruncate(fd, (off_t)ram_size) < 0) {
        int e = errno;
        close(fd);
        io_failed(error, e, "cannot size the scratch image", dir);
        return NULL;
    }
    struct snap_scratch *s = g_new0(struct snap_scratch, 1);
    s->fd = fd;
    s->size = ram_size;
    s->dir = g_strdup(dir);
    return s;
}

void snap_scratch_free(struct snap_scratch *s)
{
    if (!s)
        return;
    if (s->map)
        munmap(s->map, s->size);
    close(s->fd);
    g_free(s->dir);
    g_free(s);
}

static bool copy_run(struct snap_scratch *s, const struct snap_ram *ram, uint64_t first, uint64_t n, GError **error)
{
    uint64_t off = first * SNAP_PAGE_SIZE, len = n * SNAP_PAGE_SIZE;
    while (len > 0) {
        ssize_t w = pwrite(s->fd, ram->host + off, len, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return io_failed(error, w < 0 ? errno : ENOSPC, "cannot write the scratch image", s->dir);
        off += (uint64_t)w;
        len -= (uint64_t)w;
    }
    return true;
}

bool snap_scratch_copy_range(struct snap_scratch *s, const struct snap_ram *ram, const uint64_t *bitmap,
                             uint64_t first, uint64_t end, uint64_t *pages, GError **error)
{
    uint64_t copied = 0;
    end = MIN(end, ram->size / SNAP_PAGE_SIZE);
    for (uint64_t p = first; p < end;) {
        if (p % 64 == 0 && bitmap[p / 64] == 0) {
            p += 64;
            continue;
        }
        if (!snap_dirty_bitmap_test(bitmap, p)) {
            p++;
            continue;
        }
        uint64_t q = p + 1;
        while (q < end && snap_dirty_bitmap_test(bitmap, q))
            q++;
        if (!copy_run(s, ram, p, q - p, error))
            return false;
        copied += q - p;
        p = q;
    }
    if (pages)
        *pages = copied;
    return true;
}

bool snap_scratch_copy(struct snap_scratch *s, const struct snap_ram *ram, const uint64_t *bitmap, uint64_t *pages,
                       GError **error)
{
    return snap_scratch_copy_range(s, ram, bitmap, 0, ram->size / SNAP_PAGE_SIZE, pages, error);
}

bool snap_scratch_ram(struct snap_scratch *s, struct snap_ram *out, GError **error)
{
    if (!s->map) {
        void *m = mmap(NULL, s->size, PROT_READ, MAP_SHARED, s->fd, 0);
        if (m == MAP_FAILED)
            return io_failed(error, errno, "cannot map the scratch image", s->dir);
        s->map = m;
    }
    *out = (struct snap_ram){ .host = s->map, .size = s->size, .fd = s->fd, .page_size = SNAP_PAGE_SIZE };
    return true;
}
