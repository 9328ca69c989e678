#include "sysinfo.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sha256.h"

void sysinfo_read_line(const char *path, char *out, size_t size)
{
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, size - 1);
    close(fd);
    if (n < 0)
        n = 0;
    out[n] = '\0';
    out[strcspn(out, "\n")] = '\0';
}

static void append_word(char *out, size_t size, const char *word)
{
    size_t used = strlen(out);
    snprintf(out + used, size - used, "%s%s", used ? " " : "", word);
}

/* virtio0, virtio1, ... in number order (readdir's order is arbitrary). */
static int virtio_count(void)
{
    int count = 0;
    DIR *d = opendir("/sys/bus/virtio/devices");
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, "virtio", 6) == 0 && atoi(e->d_name + 6) + 1 > count)
            count = atoi(e->d_name + 6) + 1;
    closedir(d);
    return count;
}

void sysinfo_virtio_drivers(char *out, size_t size)
{
    out[0] = '\0';
    int count = virtio_count();
    for (int i = 0; i < count; i++) {
        char link[128], target[256];
        snprintf(link, sizeof link, "/sys/bus/virtio/devices/virtio%d/driver", i);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n < 0) {
            append_word(out, size, "none");
            continue;
        }
        target[n] = '\0';
        const char *slash = strrchr(target, '/');
        append_word(out, size, slash ? slash + 1 : target);
    }
    if (!out[0])
        snprintf(out, size, "none");
}

void sysinfo_vmgenid(char *out, size_t size)
{
    /* A bound driver has a link to each of its devices in its directory. */
    snprintf(out, size, "not bound");
    DIR *d = opendir("/sys/bus/acpi/drivers/vmgenid");
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));)
        if (strchr(e->d_name, ':'))
            snprintf(out, size, "bound");
    closedir(d);
}

void sysinfo_dmi(const char *field, char *out, size_t size)
{
    char path[128];
    snprintf(path, sizeof path, "/sys/class/dmi/id/%s", field);
    sysinfo_read_line(path, out, size);
}

int sysinfo_sha256_range(const char *path, uint64_t offset, uint64_t length, char hex[65])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct sha256 s;
    sha256_init(&s);
    static uint8_t buf[64 << 10];
    while (length > 0) {
        size_t want = length < sizeof buf ? (size_t)length : sizeof buf;
        ssize_t n = pread(fd, buf, want, (off_t)offset);
        if (n <= 0) {
            int err = n < 0 ? -errno : -EIO;
            close(fd);
            return err;
        }
        sha256_update(&s, buf, (size_t)n);
        offset += (uint64_t)n;
        length -= (uint64_t)n;
    }
    close(fd);
    sha256_final_hex(&s, hex);
    return 0;
}

int sysinfo_hwrng(uint8_t *buf, size_t size)
{
    int fd = open("/dev/hwrng", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    return (int)got;
}

void sysinfo_cmdline_value(const char *name, const char *fallback, char *out, size_t size)
{
    char cmdline[4096], key[64];
    sysinfo_read_line("/proc/cmdline", cmdline, sizeof cmdline);
    snprintf(key, sizeof key, "vsnap.%s=", name);
    snprintf(out, size, "%s", fallback);
    for (char *p = strstr(cmdline, key); p; p = strstr(p + 1, key)) {
        if (p != cmdline && p[-1] != ' ')
            continue;
        p += strlen(key);
        size_t n = strcspn(p, " ");
        snprintf(out, size, "%.*s", (int)(n < size ? n : size - 1), p);
        return;
    }
}
