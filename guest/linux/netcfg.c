#include "netcfg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static void set_sockaddr(struct sockaddr *sa, in_addr_t addr)
{
    struct sockaddr_in *in = (struct sockaddr_in *)sa;
    memset(in, 0, sizeof *in);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = addr;
}

static int bring_up(int fd, const char *iface)
{
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", iface);
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
        return -errno;
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    return ioctl(fd, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

static int set_address(int fd, const char *iface, in_addr_t addr, in_addr_t mask)
{
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", iface);
    set_sockaddr(&ifr.ifr_addr, addr);
    if (ioctl(fd, SIOCSIFADDR, &ifr) < 0)
        return -errno;
    set_sockaddr(&ifr.ifr_netmask, mask);
    return ioctl(fd, SIOCSIFNETMASK, &ifr) < 0 ? -errno : 0;
}

int netcfg_up(const char *iface, const char *address)
{
    char text[64];
    snprintf(text, sizeof text, "%s", address);
    char *slash = strchr(text, '/');
    int prefix = slash ? atoi(slash + 1) : 24;
    if (slash)
        *slash = '\0';
    struct in_addr addr;
    if (inet_pton(AF_INET, text, &addr) != 1 || prefix < 1 || prefix > 32)
        return -EINVAL;
    in_addr_t mask = htonl(prefix == 32 ? 0xffffffffu : ~(0xffffffffu >> prefix));
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = bring_up(fd, "lo");
    if (rc == 0)
        rc = set_address(fd, iface, addr.s_addr, mask);
    if (rc == 0)
        rc = bring_up(fd, iface);
    close(fd);
    return rc;
}

static int prefix_of(in_addr_t mask)
{
    return __builtin_popcount(ntohl(mask));
}

void netcfg_describe(const char *iface, char *out, size_t size)
{
    snprintf(out, size, "none");
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    struct ifreq a = {0}, m = {0}, h = {0};
    snprintf(a.ifr_name, sizeof a.ifr_name, "%s", iface);
    memcpy(m.ifr_name, a.ifr_name, sizeof a.ifr_name);
    memcpy(h.ifr_name, a.ifr_name, sizeof a.ifr_name);
    if (ioctl(fd, SIOCGIFADDR, &a) == 0 && ioctl(fd, SIOCGIFNETMASK, &m) == 0 &&
        ioctl(fd, SIOCGIFHWADDR, &h) == 0) {
        char ip[INET_ADDRSTRLEN];
        const unsigned char *mac = (const unsigned char *)h.ifr_hwaddr.sa_data;
        inet_ntop(AF_INET, &((struct sockaddr_in *)&a.ifr_addr)->sin_addr, ip, sizeof ip);
        snprintf(out, size, "%s/%d %02x:%02x:%02x:%02x:%02x:%02x", ip,
                 prefix_of(((struct sockaddr_in *)&m.ifr_netmask)->sin_addr.s_addr),
                 mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
    }
    close(fd);
}
