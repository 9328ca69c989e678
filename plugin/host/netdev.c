#include "host/netdev.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/sockios.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/virt-error.h"

#define TUN_DEVICE "/dev/net/tun"
#define VNET_HDR_LEN 12 /* struct virtio_net_hdr_v1, with num_buffers */
#define TAP_FLAGS (IFF_TAP | IFF_NO_PI | IFF_VNET_HDR)

/* An ioctl on an interface, made on a datagram socket as SIOCSIF* are. */
static bool if_ioctl(unsigned long request, struct ifreq *ifr, int *err)
{
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        *err = errno;
        return false;
    }
    int rc = ioctl(sock, request, ifr);
    *err = rc < 0 ? errno : 0;
    close(sock);
    return rc == 0;
}

static void ifreq_named(struct ifreq *ifr, const char *name)
{
    memset(ifr, 0, sizeof(*ifr));
    g_strlcpy(ifr->ifr_name, name, IFNAMSIZ);
}

bool netdev_exists(const char *name)
{
    struct ifreq ifr;
    int err;
    ifreq_named(&ifr, name);
    return if_ioctl(SIOCGIFINDEX, &ifr, &err);
}

static bool fail(GError **error, const char *tap, const char *what, int err)
{
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "tap '%s': cannot %s: %s", tap, what,
                g_strerror(err));
    return false;
}

/* The tap's own address: the guest's with 0xfe first, as libvirt does, so a
 * bridge (which takes the lowest address of its ports) never takes the
 * guest's address, nor one lower than a real NIC's. */
static bool set_host_mac(const char *name, const unsigned char *mac, GError **error)
{
    struct ifreq ifr;
    int err;
    ifreq_named(&ifr, name);
    ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
    memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
    ifr.ifr_hwaddr.sa_data[0] = (char)0xfe;
    return if_ioctl(SIOCSIFHWADDR, &ifr, &err) || fail(error, name, "set its MAC address", err);
}

static bool get_mtu(const char *name, uint32_t *mtu, GError **error)
{
    struct ifreq ifr;
    int err;
    ifreq_named(&ifr, name);
    if (!if_ioctl(SIOCGIFMTU, &ifr, &err))
        return fail(error, name, "read its MTU", err);
    *mtu = (uint32_t)ifr.ifr_mtu;
    return true;
}

static bool set_mtu(const char *name, uint32_t mtu, GError **error)
{
    struct ifreq ifr;
    int err;
    ifreq_named(&ifr, name);
    ifr.ifr_mtu = (int)mtu;
    if (if_ioctl(SIOCSIFMTU, &ifr, &err))
        return true;
    g_autofree char *what = g_strdup_printf("set its MTU to %u", mtu);
    return fail(error, name, what, err);
}

static bool bring_up(const char *name, GError **error)
{
    struct ifreq ifr;
    int err;
    ifreq_named(&ifr, name);
    if (!if_ioctl(SIOCGIFFLAGS, &ifr, &err))
        return fail(error, name, "read its flags", err);
    ifr.ifr_flags |= IFF_UP;
    return if_ioctl(SIOCSIFFLAGS, &ifr, &err) || fail(error, name, "bring it up", err);
}

static bool join_bridge(const char *name, const char *bridge, GError **error)
{
    struct ifreq ifr;
    int err;
    ifreq_named(&ifr, name);
    if (!if_ioctl(SIOCGIFINDEX, &ifr, &err))
        return fail(error, name, "find its index", err);
    int index = ifr.ifr_ifindex;
    ifreq_named(&ifr, bridge);
    ifr.ifr_ifindex = index;
    if (if_ioctl(SIOCBRADDIF, &ifr, &err))
        return true;
    g_autofree char *what = g_strdup_printf("join the bridge '%s'", bridge);
    return fail(error, name, what, err);
}

/* The MTU: the definition's, else the bridge's (a tap on a jumbo bridge
 * that kept 1500 would cap every port), else the kernel's. */
static bool configure(const struct netdev_tap_request *request, const char *name, GError **error)
{
    uint32_t mtu = request->mtu;
    if (!mtu && request->bridge && !get_mtu(request->bridge, &mtu, error))
        return false;
    return (!request->mac || set_host_mac(name, request->mac, error)) && (!mtu || set_mtu(name, mtu, error)) &&
           (!request->bridge || join_bridge(name, request->bridge, error)) && bring_up(name, error);
}

static bool check_names(const struct netdev_tap_request *request, GError **error)
{
    if (request->bridge && !netdev_exists(request->bridge)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "the bridge '%s' does not exist on this host", request->bridge);
        return false;
    }
    bool is_template = strchr(request->name, '%') != NULL;
    bool exists = !is_template && netdev_exists(request->name);
    if (request->existing && !exists) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "tap '%s' does not exist: with managed='no' it must be created before the domain starts",
                    request->name);
        return false;
    }
    if (!request->existing && exists) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "an interface called '%s' exists already; to use an existing tap give "
                    "<target dev='%s' managed='no'/>", request->name, request->name);
        return false;
    }
    return true;
}

int netdev_tap_open(const struct netdev_tap_request *request, char name_out[16], GError **error)
{
    if (!check_names(request, error))
        return -1;
    int fd = open(TUN_DEVICE, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fail(error, request->name, "open " TUN_DEVICE, errno);
        return -1;
    }
    struct ifreq ifr;
    ifreq_named(&ifr, request->name);
    ifr.ifr_flags = TAP_FLAGS;
    int hdr = VNET_HDR_LEN;
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        fail(error, request->name, request->existing ? "attach to it" : "create it", errno);
    } else if (ioctl(fd, TUNSETVNETHDRSZ, &hdr) < 0) {
        fail(error, ifr.ifr_name, "set its vnet header size", errno);
    } else {
        g_strlcpy(name_out, ifr.ifr_name, IFNAMSIZ);
        if (request->existing || configure(request, name_out, error))
            return fd;
    }
    close(fd);   /* a tap the daemon created goes with its only descriptor */
    return -1;
}

void netdev_tap_delete(const char *name)
{
    if (!name || !netdev_exists(name))
        return;
    int fd = open(TUN_DEVICE, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    struct ifreq ifr;
    ifreq_named(&ifr, name);
    ifr.ifr_flags = TAP_FLAGS;
    /* A tap a shim still holds answers EBUSY: it is in use, and stays. */
    if (ioctl(fd, TUNSETIFF, &ifr) == 0) {
        if (ioctl(fd, TUNSETPERSIST, 0) == 0)
            g_message("removed the leftover tap '%s'", name);
        else
            g_warning("tap '%s' was left behind and cannot be removed: %s", name, g_strerror(errno));
    }
    close(fd);
}

bool netdev_read_stats(const char *name, struct netdev_stats *stats, GError **error)
{
    g_autofree char *text = NULL;
    g_autoptr(GError) read_error = NULL;
    if (!g_file_get_contents("/proc/net/dev", &text, NULL, &read_error)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot read interface counters: %s",
                    read_error->message);
        return false;
    }
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **line = lines; *line; line++) {
        char *colon = strchr(*line, ':');
        if (!colon)
            continue;
        *colon = '\0';
        if (strcmp(g_strstrip(*line), name) != 0)
            continue;
        unsigned long long v[16];
        if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12],
                   &v[13], &v[14], &v[15]) != 16)
            break;
        *stats = (struct netdev_stats){
            .rx_bytes = v[0], .rx_packets = v[1], .rx_errs = v[2], .rx_drop = v[3],
            .tx_bytes = v[8], .tx_packets = v[9], .tx_errs = v[10], .tx_drop = v[11],
        };
        return true;
    }
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "interface '%s' has no counters on this host",
                name);
    return false;
}

char **netdev_neighbours(const unsigned char mac[6])
{
    g_autoptr(GPtrArray) out = g_ptr_array_new();
    g_autofree char *text = NULL;
    char want[18];
    g_snprintf(want, sizeof(want), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
    if (g_file_get_contents("/proc/net/arp", &text, NULL, NULL)) {
        g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
        /* IP address, HW type, Flags, HW address, Mask, Device; the first line is the heading. */
        for (char **line = lines[0] ? lines + 1 : lines; *line; line++) {
            char ip[64], hw[32];
            unsigned flags;
            if (sscanf(*line, "%63s %*s %x %31s", ip, &flags, hw) == 3 && (flags & 0x2) &&
                g_ascii_strcasecmp(hw, want) == 0)
                g_ptr_array_add(out, g_strdup(ip));
        }
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(g_steal_pointer(&out), FALSE);
}
