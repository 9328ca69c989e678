/* The shared RAM image of a snapshot: snapshot/ram-image.h. */
#include "snapshot/ram-image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/chain.h"

#define IMAGE_PREFIX ".memory-image-"
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

/* "<what>[ <path>]: <errno text>", the host's fault (no space, I/O). */
static bool io_error(GError **error, int err, const char *what, const char *path)
{
    g_set_error(error, SNAP_ERROR, err == ENOSPC ? SNAP_ERROR_NO_SPACE : SNAP_ERROR_IO, "%s%s%s: %s", what,
                *path ? " " : "", path, g_strerror(err));
    return false;
}

/* .memory-image-<layer id>-<boot id>: the boot id's 36 characters, or
 * "unknown" when the host does not tell (the image is then synced). */
static char *image_name(const snap_id *top, bool *synced)
{
    char id[37];
    snap_id_to_string(top, id);
    g_autofree char *boot = NULL;
    *synced = !g_file_get_contents(BOOT_ID_PATH, &boot, NULL, NULL);
    if (boot)
        g_strstrip(boot);
    return g_strdup_printf(IMAGE_PREFIX "%s-%s", id, boot && strlen(boot) == 36 ? boot : "unknown");
}

/* Images of this layer from other boots, left by a build before a crash. */
static void remove_stale_images(const char *dir, const snap_id *top, const char *keep)
{
    char id[37];
    snap_id_to_string(top, id);
    g_autofree char *prefix = g_strconcat(IMAGE_PREFIX, id, "-", NULL);
    GDir *d = g_dir_open(dir, 0, NULL);
    for (const char *name; d && (name = g_dir_read_name(d));) {
        if (g_str_has_prefix(name, prefix) && strcmp(name, keep) != 0) {
            g_autofree char *path = g_build_filename(dir, name, NULL);
            unlink(path);
        }
    }
    if (d)
        g_dir_close(d);
}

static bool write_all(int fd, const uint8_t *src, uint64_t len, uint64_t off, GError **error)
{
    while (len) {
        ssize_t n = pwrite(fd, src, MIN(len, 1u << 30), (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return io_error(error, errno, "writing the RAM image beside the snapshot", "");
        /* A layer cut short under its mapping makes pwrite fail (EFAULT) or stop short. */
        if (n == 0)
            return io_error(error, EFAULT, "reading a snapshot layer for", "the RAM image");
        src += n;
        len -= (uint64_t)n;
        off += (uint64_t)n;
    }
    return true;
}

static bool write_run(void *fd, struct snap_layer *l, uint64_t page, uint64_t n, const uint8_t *src,
                      GError **error)
{
    (void)l;
    return write_all(*(int *)fd, src, n * SNAP_PAGE_SIZE, page * SNAP_PAGE_SIZE, error);
}

/* Every data run of the chain at its offset; zero runs stay holes. */
static bool write_image(int fd, struct snap_chain *c, GError **error)
{
    if (ftruncate(fd, (off_t)c->ram_size) < 0)
        return io_error(error, errno, "sizing the RAM image", "");
    return snap_chain_each_data_run(c, write_run, &fd, error);
}

/* Build the image unnamed, then name it; an image named meanwhile by another
 * restore is used instead. Returns an open descriptor of the named image. */
static int build_image(struct snap_chain *c, const char *dir, const char *name, bool sync, GError **error)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        io_error(error, errno, "cannot create the RAM image in", dir);
        return -1;
    }
    if (!write_image(fd, c, error) || (sync && fsync(fd) < 0 && !io_error(error, errno, "syncing", name))) {
        close(fd);
        return -1;
    }
    g_autofree char *self = g_strdup_printf("/proc/self/fd/%d", fd);
    g_autofree char *path = g_build_filename(dir, name, NULL);
    if (linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0 || errno == EEXIST) {
        close(fd);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            io_error(error, errno, "cannot open the RAM image", path);
        return fd;
    }
    io_error(error, errno, "cannot name the RAM image", path);
    close(fd);
    return -1;
}

/* The named image of this boot if it is whole (its size is RAM's), else -1. */
static int open_image(const char *dir, const char *name, uint64_t size)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size)) {
        close(fd);
        unlink(path);
        return -1;
    }
    return fd;
}

int snap_ram_image_get(struct snap_chain *c, const char *dir, const snap_id *top, char **path, GError **error)
{
    if (c->partial) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID, "the RAM image of %s: the chain has no base", dir);
        return -1;
    }
    bool sync = false;
    g_autofree char *name = image_name(top, &sync);
    int fd = open_image(dir, name, c->ram_size);
    if (fd < 0) {
        remove_stale_images(dir, top, name);
        fd = build_image(c, dir, name, sync, error);
    }
    if (fd >= 0 && path)
        *path = g_build_filename(dir, name, NULL);
    return fd;
}
