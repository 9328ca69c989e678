/* vsnap-linux-init: /init of the Linux test guest's initramfs (built by
 * guest/mkinitramfs.sh -i, booted by the suite tests/linux). As PID 1 it
 *  - mounts /proc, /sys, /dev and sets eth0's address (vsnap.ip=, default
 *    10.0.2.15/24),
 *  - forks the test service (service.h) on vsnap.test_port= (default 5001),
 *  - reports on both consoles, one line each: virtio <drivers>,
 *    vda sha256 <first MiB>, vmgenid <bound|not bound>, hwrng <bytes read>,
 *    dmi <product_name>, net <iface> <address>,
 *  - starts busybox acpid (the power button runs /etc/acpi/PWRF/00000080,
 *    busybox poweroff, which signals this process) and vsnap-agent last, so
 *    that the host's READY means every line above is out,
 *  - reaps children and powers off on SIGUSR2 (halt SIGUSR1, reboot SIGTERM),
 *    as busybox's halt, poweroff and reboot ask an init to.
 * Few programs on purpose: every exec costs ~0.6 s in a kvm_pvm guest. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "console.h"
#include "netcfg.h"
#include "service.h"
#include "sysinfo.h"

static void mount_filesystems(void)
{
    static const struct { const char *source, *target, *type; } fs[] = {
        {"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
    };
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        mkdir(fs[i].target, 0755);
        if (mount(fs[i].source, fs[i].target, fs[i].type, MS_NOSUID, NULL) < 0 && errno != EBUSY)
            console_printf("cannot mount %s: %s", fs[i].target, strerror(errno));
    }
}

static void report(void)
{
    char text[512], hex[65];
    sysinfo_virtio_drivers(text, sizeof text);
    console_printf("virtio %s", text);
    int rc = sysinfo_sha256_range("/dev/vda", 0, 1 << 20, hex);
    console_printf("vda sha256 %s", rc < 0 ? strerror(-rc) : hex);
    sysinfo_vmgenid(text, sizeof text);
    console_printf("vmgenid %s", text);
    uint8_t rng[64];
    console_printf("hwrng %d", sysinfo_hwrng(rng, sizeof rng));
    sysinfo_dmi("product_name", text, sizeof text);
    console_printf("dmi %s", text);
    netcfg_describe("eth0", text, sizeof text);
    console_printf("net eth0 %s", text);
}

static pid_t spawn(char *const argv[], sigset_t *blocked)
{
    pid_t pid = fork();
    if (pid == 0) {
        sigprocmask(SIG_UNBLOCK, blocked, NULL);
        setsid();
        execv(argv[0], argv);
        console_printf("cannot run %s: %s", argv[0], strerror(errno));
        _exit(127);
    }
    if (pid < 0)
        console_printf("cannot fork for %s: %s", argv[0], strerror(errno));
    return pid;
}

static pid_t service_pid, agent_pid, acpid_pid;

static pid_t start_service(sigset_t *blocked)
{
    char port[16];
    sysinfo_cmdline_value("test_port", "5001", port, sizeof port);
    pid_t pid = fork();
    if (pid == 0) {
        sigprocmask(SIG_UNBLOCK, blocked, NULL);
        _exit(service_run((unsigned)strtoul(port, NULL, 0)) == 0 ? 0 : 1);
    }
    return pid;
}

/* Reaps children; one of ours ending is worth a line (the tests show it). */
static void reap(void)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        if (pid == service_pid || pid == agent_pid || pid == acpid_pid)
            console_printf("%s (pid %d) ended: %s %d",
                           pid == service_pid ? "service" : pid == agent_pid ? "vsnap-agent" : "acpid", pid,
                           WIFSIGNALED(status) ? "signal" : "status",
                           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

static void end_with(int signal)
{
    int how = signal == SIGUSR2 ? (int)RB_POWER_OFF : signal == SIGUSR1 ? (int)RB_HALT_SYSTEM : (int)RB_AUTOBOOT;
    console_printf("%s", signal == SIGUSR2 ? "poweroff" : signal == SIGUSR1 ? "halt" : "reboot");
    kill(-1, SIGTERM);
    sync();
    reboot(how);
}

int main(void)
{
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGCHLD);
    sigaddset(&blocked, SIGUSR1);
    sigaddset(&blocked, SIGUSR2);
    sigaddset(&blocked, SIGTERM);
    sigprocmask(SIG_BLOCK, &blocked, NULL);

    mount_filesystems();
    char address[64];
    sysinfo_cmdline_value("ip", "10.0.2.15/24", address, sizeof address);
    int rc = netcfg_up("eth0", address);
    if (rc < 0)
        console_printf("cannot set eth0 to %s: %s", address, strerror(-rc));
    service_pid = start_service(&blocked);
    report();
    acpid_pid = spawn((char *[]){"/bin/busybox", "acpid", "-f", "-c", "/etc/acpi", "-l", "/dev/null", NULL},
                      &blocked);
    agent_pid = spawn((char *[]){"/bin/vsnap-agent", NULL}, &blocked);
    for (;;) {
        int sig = sigwaitinfo(&blocked, NULL);
        if (sig == SIGCHLD)
            reap();
        else if (sig > 0)
            end_with(sig);
    }
}
