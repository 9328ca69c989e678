#include "driver/driver-net.h"

#include <libvirt/libvirt.h>
#include <string.h>

#include "util/atomic-file.h"
#include "driver/driver.h"
#include "monitor/monitor.h"
#include "run/process.h"
#include "util/virt-error.h"

/* The host counts from the tap's side: its receive is the guest's send. */
static void as_guest_sees(struct netdev_stats *s)
{
    struct netdev_stats host = *s;
    *s = (struct netdev_stats){
        .rx_bytes = host.tx_bytes, .rx_packets = host.tx_packets, .rx_errs = host.tx_errs,
        .rx_drop = host.tx_drop, .tx_bytes = host.rx_bytes, .tx_packets = host.rx_packets,
        .tx_errs = host.rx_errs, .tx_drop = host.rx_drop,
    };
}

bool driver_interface_stats(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                            struct netdev_stats *stats, GError **error)
{
    (void)drv;
    g_mutex_lock(&dom->lock);
    bool running = dom->run != NULL;
    const struct domain_net *net = running ? domain_def_find_net(dom->def, name) : NULL;
    g_autofree char *tap = net ? g_strdup(net->ifname) : NULL;
    g_mutex_unlock(&dom->lock);
    if (!running) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return false;
    }
    if (!tap) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "invalid path, '%s' is not a known interface",
                    name);
        return false;
    }
    if (!netdev_read_stats(tap, stats, error))
        return false;
    as_guest_sees(stats);
    return true;
}

static void clear_stat(gpointer item)
{
    g_free(((struct driver_net_stat *)item)->name);
}

GArray *driver_interfaces_stats(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    (void)drv;
    GArray *out = g_array_new(FALSE, TRUE, sizeof(struct driver_net_stat));
    g_array_set_clear_func(out, clear_stat);
    g_mutex_lock(&dom->lock);
    g_auto(GStrv) taps = g_new0(char *, dom->def->n_nets + 1);
    for (size_t i = 0; dom->run && i < dom->def->n_nets; i++)
        taps[i] = g_strdup(dom->def->nets[i].ifname);
    g_mutex_unlock(&dom->lock);
    for (char **tap = taps; *tap; tap++) {
        struct driver_net_stat stat = {0};
        if (!netdev_read_stats(*tap, &stat.stats, NULL))
            continue;
        as_guest_sees(&stat.stats);
        stat.name = g_strdup(*tap);
        g_array_append_val(out, stat);
    }
    return out;
}

static void clear_addrs(gpointer item)
{
    struct driver_net_addrs *a = item;
    g_free(a->name);
    g_strfreev(a->ipv4);
}

GArray *driver_interface_addresses(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned source,
                                   GError **error)
{
    (void)drv;
    if (source == VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE || source == VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_SUPPORT, "%s",
                    source == VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT
                        ? "the vsnap guest agent does not report the guest's interface addresses; "
                          "--source arp reads what the host has seen"
                        : "vsnap hands out no DHCP leases (a guest's address is its own); "
                          "--source arp reads what the host has seen");
        return NULL;
    }
    if (source != VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_ARP) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unknown address source %u", source);
        return NULL;
    }
    GArray *out = g_array_new(FALSE, TRUE, sizeof(struct driver_net_addrs));
    g_array_set_clear_func(out, clear_addrs);
    g_mutex_lock(&dom->lock);
    bool running = dom->run != NULL;
    for (size_t i = 0; running && i < dom->def->n_nets; i++) {
        const struct domain_net *net = &dom->def->nets[i];
        struct driver_net_addrs a = {.name = g_strdup(net->ifname), .ipv4 = netdev_neighbours(net->mac)};
        domain_mac_format(net->mac, a.mac);
        g_array_append_val(out, a);
    }
    g_mutex_unlock(&dom->lock);
    if (!running) {
        g_array_unref(out);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return NULL;
    }
    return out;
}

/* Only the link state may differ from what the domain has. */
static struct domain_net *find_updated(struct domain_def *def, const struct domain_net *update,
                                       const char *which, GError **error)
{
    char mac[DOMAIN_NET_MAC_LEN];
    domain_mac_format(update->mac, mac);
    struct domain_net *net = domain_def_find_net(def, mac);
    if (!net) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "the %s definition has no interface with MAC address %s", which, mac);
        return NULL;
    }
    const char *changed = net->type != update->type                    ? "type"
                          : g_strcmp0(net->source, update->source) != 0 ? "<source>"
                          : net->mtu != update->mtu                     ? "<mtu>"
                          : net->unmanaged != update->unmanaged         ? "<target managed>"
                          : (update->ifname && !update->ifname_auto && g_strcmp0(net->ifname, update->ifname) != 0)
                              ? "<target dev>"
                              : NULL;
    if (changed) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_UNSUPPORTED,
                    "interface %s: only its <link state> can be changed on a vsnap domain, not its %s", mac, changed);
        return NULL;
    }
    return net;
}

/* Under dom->job, running: tell the shim, then the live definition. */
static bool update_live(struct vsnap_domain *dom, const struct domain_net *update, GError **error)
{
    g_mutex_lock(&dom->lock);
    struct domain_net *net = dom->run ? find_updated(dom->def, update, "live", error) : NULL;
    size_t index = net ? (size_t)(net - dom->def->nets) : 0;
    g_autofree char *api = dom->run ? g_strdup(dom->run->api_socket) : NULL;
    g_mutex_unlock(&dom->lock);
    if (!api) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return false;
    }
    g_autofree char *id = domain_net_id(index);
    if (!net || !monitor_vm_set_link(api, id, !update->link_down, error)) {
        process_kill_if_stuck(dom, error ? *error : NULL);
        return false;
    }
    g_mutex_lock(&dom->lock);
    bool ok = true;
    if (dom->run) {
        /* While running, the persistent definition is the live one until
         * they differ: keep it as it was, to apply at the next start. */
        if (dom->persistent && !dom->next_def) {
            dom->next_def = domain_def_copy(dom->def);
            domain_def_forget_net_runtime(dom->next_def);
        }
        dom->def->nets[index].link_down = update->link_down;
        g_autofree char *xml = domain_def_format(dom->def, true, -1);
        ok = atomic_file_write(dom->run->xml_path, xml, error);
    }
    g_mutex_unlock(&dom->lock);
    return ok;
}

/* The persistent definition: the one that applies at the next start. */
static bool update_config(struct vsnap_driver *drv, struct vsnap_domain *dom, const struct domain_net *update,
                          GError **error)
{
    g_mutex_lock(&dom->lock);
    bool ok = dom->persistent;
    if (!ok)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "cannot change the persistent definition of a transient domain");
    struct domain_def *target = ok && dom->run && !dom->next_def ? domain_def_copy(dom->def) : NULL;
    if (target)
        domain_def_forget_net_runtime(target);
    struct domain_def *config = target ? target : dom->next_def ? dom->next_def : dom->def;
    struct domain_net *net = ok ? find_updated(config, update, "persistent", error) : NULL;
    if (net) {
        net->link_down = update->link_down;
        ok = driver_save_config(drv, config, error);
    }
    if (net && ok && target)
        dom->next_def = g_steal_pointer(&target);
    g_mutex_unlock(&dom->lock);
    domain_def_free(target);
    return net && ok;
}

bool driver_update_device(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *xml,
                          unsigned flags, GError **error)
{
    unsigned known = VIR_DOMAIN_AFFECT_LIVE | VIR_DOMAIN_AFFECT_CONFIG | VIR_DOMAIN_DEVICE_MODIFY_FORCE;
    if (flags & ~known) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)", flags & ~known);
        return false;
    }
    struct domain_net *update = domain_net_parse_string(xml, error);
    if (!update)
        return false;
    if (!domain_job_acquire(dom, "update-device", error)) {
        domain_net_free(update);
        return false;
    }
    bool active = vsnap_domain_is_active(dom);
    bool live = (flags & VIR_DOMAIN_AFFECT_LIVE) || (!(flags & VIR_DOMAIN_AFFECT_CONFIG) && active);
    bool config = (flags & VIR_DOMAIN_AFFECT_CONFIG) || !active;
    bool ok = true;
    if (live && !active) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        ok = false;
    }
    ok = ok && (!live || update_live(dom, update, error)) && (!config || update_config(drv, dom, update, error));
    domain_job_release(dom);
    domain_net_free(update);
    return ok;
}
