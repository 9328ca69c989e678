#include "pid1.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

static void mount_one(const char *source, const char *target, const char *type)
{
    mkdir(target, 0755);
    if (mount(source, target, type, MS_NOSUID | MS_NOEXEC, NULL) < 0 && errno != EBUSY)
        fprintf(stderr, "vsnap-agent: cannot mount %s on %s: %s\n", type, target, strerror(errno));
}

void pid1_mount_filesystems(void)
{
    mount_one("proc", "/proc", "proc");
    mount_one("sysfs", "/sys", "sysfs");
    mkdir("/dev", 0755);
    if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, NULL) < 0 && errno != EBUSY)
        fprintf(stderr, "vsnap-agent: cannot mount devtmpfs on /dev: %s\n", strerror(errno));
}

void pid1_reap_children(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}
