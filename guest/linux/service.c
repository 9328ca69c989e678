#include "service.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <linux/vm_sockets.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "console.h"
#include "netcfg.h"
#include "sha256.h"
#include "sysinfo.h"

#define DISK "/dev/vda"
#define MAX_RANGE (64u << 20)

static void pattern_block(const char *seed, uint64_t k, uint8_t out[32])
{
    char text[96];
    int n = snprintf(text, sizeof text, "%s:%" PRIu64, seed, k);
    struct sha256 s;
    sha256_init(&s);
    sha256_update(&s, text, (size_t)n);
    sha256_final(&s, out);
}

/* Writes the seed's pattern over the range and syncs it: 0 or -errno. */
static int write_pattern(uint64_t offset, uint64_t length, const char *seed, char hex[65])
{
    uint8_t *buf = malloc(length);
    if (!buf)
        return -ENOMEM;
    for (uint64_t k = 0; k * 32 < length; k++) {
        uint8_t block[32];
        pattern_block(seed, k, block);
        memcpy(buf + k * 32, block, length - k * 32 < 32 ? length - k * 32 : 32);
    }
    int rc = 0, fd = open(DISK, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        rc = -errno;
    else if (pwrite(fd, buf, length, (off_t)offset) != (ssize_t)length || fsync(fd) < 0)
        rc = errno ? -errno : -EIO;
    if (fd >= 0)
        close(fd);
    struct sha256 s;
    sha256_init(&s);
    sha256_update(&s, buf, length);
    sha256_final_hex(&s, hex);
    free(buf);
    return rc;
}

static bool parse_range(const char *args, uint64_t *offset, uint64_t *length, char *seed)
{
    int n = seed ? sscanf(args, "%" SCNu64 " %" SCNu64 " %63s", offset, length, seed)
                 : sscanf(args, "%" SCNu64 " %" SCNu64, offset, length);
    return n == (seed ? 3 : 2) && *length > 0 && *length <= MAX_RANGE;
}

static void answer_disk(const char *cmd, const char *args, char *reply, size_t size)
{
    uint64_t offset, length;
    char seed[64], hex[65];
    bool write = strcmp(cmd, "WRITE") == 0;
    if (!parse_range(args, &offset, &length, write ? seed : NULL)) {
        snprintf(reply, size, "ERR usage: %s <offset> <length>%s (length 1..%u)", cmd,
                 write ? " <seed>" : "", MAX_RANGE);
        return;
    }
    int rc = write ? write_pattern(offset, length, seed, hex)
                   : sysinfo_sha256_range(DISK, offset, length, hex);
    if (rc < 0)
        snprintf(reply, size, "ERR %s: %s", DISK, strerror(-rc));
    else
        snprintf(reply, size, "OK %s", hex);
}

static void answer_rng(const char *args, char *reply, size_t size)
{
    int want = atoi(args);
    uint8_t buf[256];
    if (want < 1 || want > (int)sizeof buf) {
        snprintf(reply, size, "ERR usage: RNG <1..256>");
        return;
    }
    int got = sysinfo_hwrng(buf, (size_t)want);
    if (got < 0) {
        snprintf(reply, size, "ERR /dev/hwrng: %s", strerror(-got));
        return;
    }
    int used = snprintf(reply, size, "OK %d ", got);
    for (int i = 0; i < got && (size_t)used + 3 < size; i++)
        used += snprintf(reply + used, size - (size_t)used, "%02x", buf[i]);
}

static void answer_info(const char *cmd, const char *args, char *reply, size_t size)
{
    char text[512];
    if (strcmp(cmd, "DMI") == 0) {
        sysinfo_dmi("product_name", text, sizeof text);
    } else if (strcmp(cmd, "NET") == 0) {
        char addr[128];
        netcfg_describe("eth0", addr, sizeof addr);
        snprintf(text, sizeof text, "eth0 %s", addr);
    } else if (strcmp(cmd, "DRIVERS") == 0) {
        sysinfo_virtio_drivers(text, sizeof text);
    } else if (strcmp(cmd, "VMGENID") == 0) {
        sysinfo_vmgenid(text, sizeof text);
    } else if (strcmp(cmd, "TIME") == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(text, sizeof text, "%" PRId64, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
    } else {
        console_line_hvc0(args);
        text[0] = '\0';
    }
    snprintf(reply, size, "OK%s%s", text[0] ? " " : "", text);
}

void service_answer(const char *line, char *reply, size_t size)
{
    char cmd[16] = "";
    sscanf(line, "%15s", cmd);
    const char *args = line + strlen(cmd);
    while (*args == ' ')
        args++;
    static const char *const info[] = {"DMI", "NET", "DRIVERS", "VMGENID", "TIME", "CONSOLE"};
    if (strcmp(cmd, "PING") == 0) {
        snprintf(reply, size, "PONG");
        return;
    }
    if (strcmp(cmd, "SHA") == 0 || strcmp(cmd, "WRITE") == 0) {
        answer_disk(cmd, args, reply, size);
        return;
    }
    if (strcmp(cmd, "RNG") == 0) {
        answer_rng(args, reply, size);
        return;
    }
    for (size_t i = 0; i < sizeof info / sizeof info[0]; i++)
        if (strcmp(cmd, info[i]) == 0) {
            answer_info(cmd, args, reply, size);
            return;
        }
    snprintf(reply, size, "ERR unknown command '%s'", cmd);
}

/* Lines of one connection until the peer closes it (or a restore resets it). */
static void serve_connection(int fd)
{
    char buf[4096];
    size_t used = 0;
    for (;;) {
        ssize_t n = read(fd, buf + used, sizeof buf - 1 - used);
        if (n <= 0)
            return;
        used += (size_t)n;
        buf[used] = '\0';
        char *nl;
        while ((nl = strchr(buf, '\n'))) {
            *nl = '\0';
            if (nl > buf && nl[-1] == '\r')
                nl[-1] = '\0';
            char reply[1024];
            service_answer(buf, reply, sizeof reply - 1);
            strcat(reply, "\n");
            if (write(fd, reply, strlen(reply)) < 0)
                return;
            used -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, used + 1);
        }
        if (used == sizeof buf - 1)
            return; /* a line longer than any command */
    }
}

int service_run(unsigned port)
{
    int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_vm addr = {.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port};
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 4) < 0) {
        console_printf("service: vsock port %u: %s", port, strerror(errno));
        return -1;
    }
    /* A host that closes before reading the answer must not end the service. */
    signal(SIGPIPE, SIG_IGN);
    for (;;) {
        int conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0) {
            /* A pending connection reset by a restore (TRANSPORT_RESET)
             * fails its accept with its own error; the listener lives on. */
            if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK) {
                console_printf("service: accept: %s", strerror(errno));
                return -1;
            }
            continue;
        }
        serve_connection(conn);
        close(conn);
    }
}
