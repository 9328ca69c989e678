#include "process-net.h"

#include <unistd.h>

#include "monitor/monitor.h"
#include "host/netdev.h"
#include "host/network-port.h"
#include "util/virt-error.h"

static const char *bridge_of(const struct domain_net *net)
{
    switch (net->type) {
    case DOMAIN_NET_BRIDGE:
        return net->source;
    case DOMAIN_NET_NETWORK:
        return net->port_bridge;
    case DOMAIN_NET_ETHERNET:
        break;
    }
    return NULL;
}

static int open_tap(struct vsnap_driver *drv, const struct domain_def *live, struct domain_net *net,
                    GError **error)
{
    if (net->type == DOMAIN_NET_NETWORK && !network_port_allocate(drv->paths.network_uri, live, net, error))
        return -1;
    struct netdev_tap_request request = {
        .name = net->ifname ? net->ifname : NETDEV_TAP_TEMPLATE,
        .existing = net->unmanaged,
        .mac = net->mac,
        .mtu = net->mtu,
        .bridge = bridge_of(net),
    };
    char name[16];
    int fd = netdev_tap_open(&request, name, error);
    if (fd < 0) {
        g_autoptr(GError) release_error = NULL;
        if (!network_port_release(drv->paths.network_uri, net, &release_error))
            g_warning("domain %s: %s", live->name, release_error->message);
        g_clear_pointer(&net->port_id, g_free);
        g_clear_pointer(&net->port_bridge, g_free);
        return -1;
    }
    if (!net->ifname)
        net->ifname = g_strdup(name);
    return fd;
}

static void release_ports(struct vsnap_driver *drv, const struct domain_def *live)
{
    for (size_t i = 0; i < live->n_nets; i++) {
        g_autoptr(GError) error = NULL;
        if (!network_port_release(drv->paths.network_uri, &live->nets[i], &error))
            g_warning("domain %s: %s", live->name, error->message);
    }
}

bool process_net_prepare(struct vsnap_driver *drv, struct domain_def *live, struct run_nets *nets,
                         GError **error)
{
    /* A definition read from a snapshot or save image names the taps and
     * ports of the run it was taken from: this run gets its own. */
    domain_def_forget_net_runtime(live);
    nets->fds = g_new(int, MAX(live->n_nets, 1));
    nets->n = 0;
    for (size_t i = 0; i < live->n_nets; i++) {
        int fd = open_tap(drv, live, &live->nets[i], error);
        if (fd < 0) {
            g_prefix_error(error, "domain '%s' interface %zu: ", live->name, i);
            process_net_close(nets);
            release_ports(drv, live);
            return false;
        }
        nets->fds[nets->n++] = fd;
    }
    return true;
}

void process_net_close(struct run_nets *nets)
{
    for (size_t i = 0; i < nets->n; i++)
        close(nets->fds[i]);
    g_clear_pointer(&nets->fds, g_free);
    nets->n = 0;
}

bool process_net_apply_links(const char *api_socket, const struct domain_def *live, GError **error)
{
    for (size_t i = 0; i < live->n_nets; i++) {
        if (!live->nets[i].link_down)
            continue;
        g_autofree char *id = domain_net_id(i);
        if (!monitor_vm_set_link(api_socket, id, false, error))
            return false;
    }
    return true;
}

void process_net_release(struct vsnap_driver *drv, const struct domain_def *live)
{
    release_ports(drv, live);
    for (size_t i = 0; i < live->n_nets; i++)
        if (!live->nets[i].unmanaged)
            netdev_tap_delete(live->nets[i].ifname);
}
