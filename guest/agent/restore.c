#include "restore.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

bool restore_set_clock(int64_t host_realtime_ns, bool apply)
{
    if (host_realtime_ns <= 0) {
        errno = EINVAL;
        return false;
    }
    struct timespec ts = {.tv_sec = host_realtime_ns / 1000000000,
                          .tv_nsec = host_realtime_ns % 1000000000};
    return !apply || clock_settime(CLOCK_REALTIME, &ts) == 0;
}

bool restore_add_entropy(const uint8_t *bytes, size_t len)
{
    struct rand_pool_info *info = malloc(sizeof *info + len);
    if (!info)
        return false;
    info->entropy_count = (int)(len * 8);
    info->buf_size = (int)len;
    memcpy(info->buf, bytes, len);
    int fd = open("/dev/urandom", O_RDWR | O_CLOEXEC);
    bool ok = fd >= 0 && ioctl(fd, RNDADDENTROPY, info) == 0;
    int saved = errno;
    if (fd >= 0)
        close(fd);
    free(info);
    errno = saved;
    return ok;
}
