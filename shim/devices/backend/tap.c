/* Tap devices for virtio-net (see tap.h). */
#define G_LOG_DOMAIN "vsnap-shim"

#include "devices/tap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static bool tap_failed(GError **error, const struct net_config *cfg, const char *tap, const char *what)
{
    int e = errno;
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "net %s: tap %s: %s: %s", cfg->id,
                tap && *tap ? tap : "(new)", what, g_strerror(e));
    return false;
}

/* An AF_INET datagram socket: what the SIOCSIF* ioctls are made on. */
static bool ifreq_ioctl(unsigned long request, struct ifreq *ifr)
{
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return false;
    int r = ioctl(sock, request, ifr);
    int e = errno;
    close(sock);
    errno = e;
    return r == 0;
}

static struct ifreq ifreq_for(const char *name)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    g_strlcpy(ifr.ifr_name, name, sizeof ifr.ifr_name);
    return ifr;
}

static bool set_ipv4(const char *name, unsigned long request, const char *text)
{
    struct ifreq ifr = ifreq_for(name);
    struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
    sin->sin_family = AF_INET;
    if (inet_pton(AF_INET, text, &sin->sin_addr) != 1) {
        errno = EINVAL;
        return false;
    }
    return ifreq_ioctl(request, &ifr);
}

static bool set_host_mac(const char *name, const char *text)
{
    struct ifreq ifr = ifreq_for(name);
    uint8_t mac[6];
    if (!net_mac_parse(text, mac)) {
        errno = EINVAL;
        return false;
    }
    ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
    memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
    return ifreq_ioctl(SIOCSIFHWADDR, &ifr);
}

static bool set_mtu(const char *name, uint32_t mtu)
{
    struct ifreq ifr = ifreq_for(name);
    if (!ifreq_ioctl(SIOCGIFMTU, &ifr))
        return false;
    if ((uint32_t)ifr.ifr_mtu == mtu)
        return true; /* nothing to do: no CAP_NET_ADMIN needed */
    ifr.ifr_mtu = (int)mtu;
    return ifreq_ioctl(SIOCSIFMTU, &ifr);
}

static bool bring_up(const char *name)
{
    struct ifreq ifr = ifreq_for(name);
    if (!ifreq_ioctl(SIOCGIFFLAGS, &ifr))
        return false;
    if (ifr.ifr_flags & IFF_UP)
        return true;
    ifr.ifr_flags |= IFF_UP;
    return ifreq_ioctl(SIOCSIFFLAGS, &ifr);
}

/* Attach to (or create) the tap called name; "vmtap%d" makes a new one. */
static int open_named(const char *name, char out_name[16])
{
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct ifreq ifr = ifreq_for(name);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    g_strlcpy(out_name, ifr.ifr_name, 16);
    return fd;
}

/* A descriptor from the client: it must be a tap with a vnet header. */
static bool adopt_fd(struct tap *tap, const struct net_config *cfg, GError **error)
{
    tap->fd = fcntl(cfg->fds[0], F_DUPFD_CLOEXEC, 3);
    if (tap->fd < 0)
        return tap_failed(error, cfg, "(descriptor)", "cannot duplicate the descriptor");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    if (ioctl(tap->fd, TUNGETIFF, &ifr) < 0)
        return tap_failed(error, cfg, "(descriptor)", "not a tap device (TUNGETIFF)");
    g_strlcpy(tap->name, ifr.ifr_name, sizeof tap->name);
    if (!(ifr.ifr_flags & IFF_TAP) || !(ifr.ifr_flags & IFF_NO_PI) || !(ifr.ifr_flags & IFF_VNET_HDR)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "net %s: tap %s: the descriptor must be a tap opened with IFF_TAP, IFF_NO_PI and IFF_VNET_HDR",
                    cfg->id, tap->name);
        return false;
    }
    int flags = fcntl(tap->fd, F_GETFL);
    if (flags < 0 || fcntl(tap->fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return tap_failed(error, cfg, tap->name, "cannot make the descriptor non-blocking");
    return true;
}

static bool configure(struct tap *tap, const struct net_config *cfg, GError **error)
{
    int hdr = TAP_VNET_HDR_LEN;
    if (ioctl(tap->fd, TUNSETVNETHDRSZ, &hdr) < 0)
        return tap_failed(error, cfg, tap->name, "TUNSETVNETHDRSZ");
    if (!tap_set_offload(tap, 0, error))
        return false;
    if (cfg->ip && !set_ipv4(tap->name, SIOCSIFADDR, cfg->ip))
        return tap_failed(error, cfg, tap->name, "cannot set ip");
    if (cfg->mask && !set_ipv4(tap->name, SIOCSIFNETMASK, cfg->mask))
        return tap_failed(error, cfg, tap->name, "cannot set mask");
    if (cfg->host_mac && !set_host_mac(tap->name, cfg->host_mac))
        return tap_failed(error, cfg, tap->name, "cannot set host_mac");
    if (cfg->mtu && !set_mtu(tap->name, cfg->mtu))
        return tap_failed(error, cfg, tap->name, "cannot set the mtu");
    /* A tap handed over is the client's to bring up (it may not want it up yet). */
    if (cfg->nfds == 0 && !bring_up(tap->name))
        return tap_failed(error, cfg, tap->name, "cannot bring the interface up");
    return true;
}

bool tap_open(struct tap *tap, const struct net_config *cfg, GError **error)
{
    memset(tap, 0, sizeof *tap);
    tap->fd = -1;
    bool ok;
    if (cfg->nfds > 0) {
        ok = adopt_fd(tap, cfg, error);
    } else {
        tap->created = !cfg->tap;
        tap->fd = open_named(cfg->tap ? cfg->tap : "vmtap%d", tap->name);
        ok = tap->fd >= 0 || tap_failed(error, cfg, cfg->tap, "cannot open it (TUNSETIFF)");
    }
    if (ok && configure(tap, cfg, error))
        return true;
    tap_close(tap);
    return false;
}

void tap_close(struct tap *tap)
{
    if (tap->fd >= 0)
        close(tap->fd);
    tap->fd = -1;
}

bool tap_set_offload(struct tap *tap, unsigned flags, GError **error)
{
    if (ioctl(tap->fd, TUNSETOFFLOAD, (unsigned long)flags) == 0)
        return true;
    int e = errno;
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "tap %s: TUNSETOFFLOAD 0x%x: %s", tap->name, flags,
                g_strerror(e));
    return false;
}

bool tap_attached(struct tap *tap)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    return ioctl(tap->fd, TUNGETIFF, &ifr) == 0;
}
