/* What the snapshot library does with its files the same way everywhere
 * (layer-internal.h): whole-buffer positional I/O and the message of an
 * error about one file. */
#include "layer-internal.h"

#include <errno.h>
#include <unistd.h>

bool snap_file_error(GError **error, int code, const char *kind, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *what = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, SNAP_ERROR, code, "%s %s: %s", kind, name, what);
    return false;
}

int snap_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

ssize_t snap_pread_upto(int fd, void *buf, size_t len, uint64_t off)
{
    uint8_t *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, p + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}
