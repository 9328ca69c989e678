/* Restore by full-image merge, the baseline vsnap is measured against: like the
 * published setup it materialises a dense image of all of RAM in tmpfs (every
 * page written, zero or not), overlays each diff in chain order, then maps it.
 * RAM on huge pages is built the same way in the RAM itself: hugetlbfs has no
 * write(2), so the image is written through its mapping. */
#include "ram-snapshot/restore.h"

#include "snapshot/mapped-read.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MERGE_CHUNK (2u << 20)

/* Where the image goes: a file (pwrite) or a mapping (memcpy). */
struct merge_sink {
    int fd;
    uint8_t *map;
};

static bool write_at(const struct merge_sink *sink, const void *buf, uint64_t len, uint64_t off, GError **error)
{
    if (sink->map) {
        if (!snap_mapped_copy(sink->map + off, buf, len)) {
            g_set_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT, "restore by merge: a snapshot layer cannot be read: "
                        "it is shorter than when it was opened (truncated while in use) or its storage failed");
            return false;
        }
        return true;
    }
    int fd = sink->fd;
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            g_set_error(error, SNAP_ERROR, errno == ENOSPC ? SNAP_ERROR_NO_SPACE : SNAP_ERROR_IO,
                        "restore by merge: writing the RAM image failed: %s", g_strerror(errno));
            return false;
        }
        p += n;
        len -= (uint64_t)n;
        off += (uint64_t)n;
    }
    return true;
}

static int create_image(const char *dir, GError **error)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    g_autofree char *tmpl = g_build_filename(dir, "vsnap-merge-XXXXXX", NULL);
    fd = g_mkstemp_full(tmpl, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO,
                    "restore by merge: cannot create the RAM image in %s: %s", dir, g_strerror(errno));
        return -1;
    }
    unlink(tmpl);
    return fd;
}

/* Write the run [first, first + n) of layer l: data or zeros. */
static bool write_run(const struct merge_sink *fd, struct snap_layer *l, const struct snap_layer_run *run,
                      uint64_t data_page, const uint8_t *zeros, GError **error)
{
    uint64_t off = run->first_page * SNAP_PAGE_SIZE, len = (uint64_t)run->npages * SNAP_PAGE_SIZE;
    if (run->kind != SNAP_RUN_ZERO) {
        if (!snap_layer_verify_data(l, data_page, run->npages, error))
            return false;
        return write_at(fd, snap_layer_data_page(l, data_page), len, off, error);
    }
    for (uint64_t done = 0; done < len; done += MERGE_CHUNK)
        if (!write_at(fd, zeros, MIN((uint64_t)MERGE_CHUNK, len - done), off + done, error))
            return false;
    return true;
}

/* The base, densely: holes between its runs are written as zeros. */
static bool write_base(const struct merge_sink *fd, struct snap_layer *base, const uint8_t *zeros, GError **error)
{
    uint64_t pos = 0; /* pages written so far */
    uint64_t npages = base->hdr.ram_size / SNAP_PAGE_SIZE;
    for (uint64_t r = 0; r <= base->hdr.run_count; r++) {
        uint64_t next = r < base->hdr.run_count ? base->runs[r].first_page : npages;
        struct snap_layer_run gap = { .first_page = pos, .npages = 0, .kind = SNAP_RUN_ZERO };
        while (pos < next) {
            gap.first_page = pos;
            gap.npages = (uint32_t)MIN(next - pos, (uint64_t)UINT32_MAX);
            if (!write_run(fd, base, &gap, 0, zeros, error))
                return false;
            pos += gap.npages;
        }
        if (r < base->hdr.run_count) {
            if (!write_run(fd, base, &base->runs[r], base->run_data_page[r], zeros, error))
                return false;
            pos = base->runs[r].first_page + base->runs[r].npages;
        }
    }
    return true;
}

static bool build_image(const struct merge_sink *fd, struct snap_chain *c, GError **error)
{
    g_autofree uint8_t *zeros = g_malloc0(MERGE_CHUNK);
    if (!write_base(fd, c->layers[0], zeros, error))
        return false;
    for (unsigned i = 1; i < c->nlayers; i++) {
        struct snap_layer *l = c->layers[i];
        for (uint64_t r = 0; r < l->hdr.run_count; r++)
            if (!write_run(fd, l, &l->runs[r], l->run_data_page[r], zeros, error))
                return false;
    }
    return true;
}

bool snap_restore_merge(struct snap_chain *c, const char *dir, struct snap_merged_ram *out,
                        GError **error)
{
    *out = (struct snap_merged_ram){ .fd = -1 };
    if (c->partial) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID, "restore by merge: the chain has no base");
        return false;
    }
    int fd = create_image(dir ? dir : "/dev/shm", error);
    if (fd < 0)
        return false;
    if (!build_image(&(struct merge_sink){ .fd = fd }, c, error)) {
        close(fd);
        return false;
    }
    void *p = mmap(NULL, c->ram_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO, "restore by merge: cannot map the RAM image: %s",
                    g_strerror(errno));
        close(fd);
        return false;
    }
    *out = (struct snap_merged_ram){ .host = p, .size = c->ram_size, .fd = fd };
    return true;
}

void snap_merged_ram_release(struct snap_merged_ram *ram)
{
    if (ram->host)
        munmap(ram->host, ram->size);
    if (ram->fd >= 0)
        close(ram->fd);
    *ram = (struct snap_merged_ram){ .fd = -1 };
}

bool snap_restore_merge_into(struct snap_chain *c, uint8_t *dest, uint64_t size, GError **error)
{
    if (c->partial || size != c->ram_size) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                    "restore by merge: RAM of %" G_GUINT64_FORMAT " bytes does not match the snapshot's %"
                    G_GUINT64_FORMAT " (or the chain has no base)", size, c->ram_size);
        return false;
    }
    return build_image(&(struct merge_sink){ .fd = -1, .map = dest }, c, error);
}
