/* <interface>: a virtio-net device on a tap. type='ethernet' (a tap the
 * daemon creates, or opens when managed='no'), type='bridge' (a tap on an
 * existing host bridge) and type='network' (a port of a libvirt network,
 * allocated from the host's network driver at start). Every other type,
 * model or child libvirt knows is refused by name.
 *
 * Live XML (the daemon's status file) also carries what a run chose: the
 * tap's name in <target dev> when the daemon named it, and a network
 * port's id and bridge in <source portid bridge>. */
#include "domain-parse.h"

#include <string.h>

#include "conf/xml-util.h"

/* The kernel's limit on interface names (IFNAMSIZ 16, with the NUL). */
#define DOMAIN_NET_MAX_IFNAME 15
/* The shim's and the kernel's range for a tap's MTU (ETH_MIN_MTU; 64 KiB). */
#define DOMAIN_NET_MIN_MTU 68
#define DOMAIN_NET_MAX_MTU 65535


enum net_child { NET_MAC, NET_SOURCE, NET_TARGET, NET_MODEL, NET_MTU, NET_LINK, NET_ALIAS, NET_N_CHILDREN };

static const char *const net_child_names[NET_N_CHILDREN] = {
    "mac", "source", "target", "model", "mtu", "link", "alias",
};

static bool parse_type(struct domain_net *net, const xmlNode *node, GError **error)
{
    g_autofree char *type = conf_xml_prop(node, "type");
    if (!type) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "<interface> has no type attribute");
        return false;
    }
    if (strcmp(type, "ethernet") == 0)
        net->type = DOMAIN_NET_ETHERNET;
    else if (strcmp(type, "bridge") == 0)
        net->type = DOMAIN_NET_BRIDGE;
    else if (strcmp(type, "network") == 0)
        net->type = DOMAIN_NET_NETWORK;
    else {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<interface type='%s'> is not supported by vsnap: only 'ethernet', 'bridge' or "
                    "'network' (a virtio-net device on a tap)", type);
        return false;
    }
    return true;
}

static bool parse_mac(struct domain_net *net, const xmlNode *node, bool *have_mac, GError **error)
{
    static const char *const attributes[] = {"address", NULL};
    *have_mac = node != NULL;
    if (!node)
        return true;
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *address = conf_xml_prop(node, "address");
    if (!address || !domain_mac_parse(address, net->mac)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "<mac address='%s'> is not a MAC address (six hex bytes with colons)",
                    address ? address : "");
        return false;
    }
    if (net->mac[0] & 1) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "<mac address='%s'> is a multicast address: an interface needs a unicast one", address);
        return false;
    }
    return true;
}

static bool check_ifname(const char *name, const char *what, GError **error)
{
    bool valid = name[0] != '\0' && strlen(name) <= DOMAIN_NET_MAX_IFNAME && strcmp(name, ".") != 0 &&
                 strcmp(name, "..") != 0;
    for (const char *c = name; *c && valid; c++)
        valid = g_ascii_isgraph(*c) && *c != '/' && *c != ':';
    if (!valid)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "%s '%s' is not a network interface name (1 to %d characters, no '/', ':' or spaces)",
                    what, name, DOMAIN_NET_MAX_IFNAME);
    return valid;
}

/* <source bridge='br0'/>, <source network='name'/> (live XML adds portid and bridge). */
static bool parse_source(struct domain_net *net, const xmlNode *node, GError **error)
{
    static const char *const bridge_attributes[] = {"bridge", NULL};
    static const char *const network_attributes[] = {"network", "portid", "bridge", NULL};
    if (net->type == DOMAIN_NET_ETHERNET) {
        if (node) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                        "<interface type='ethernet'> takes no <source> in vsnap: the tap is <target dev>");
            return false;
        }
        return true;
    }
    const char *attribute = net->type == DOMAIN_NET_BRIDGE ? "bridge" : "network";
    if (!node) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "<interface type='%s'> needs <source %s='...'/>",
                    attribute, attribute);
        return false;
    }
    if (!conf_xml_check_attributes(node, net->type == DOMAIN_NET_BRIDGE ? bridge_attributes : network_attributes,
                                   error) ||
        !conf_xml_check_no_children(node, error))
        return false;
    net->source = conf_xml_prop(node, attribute);
    if (!net->source || net->source[0] == '\0') {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "<interface type='%s'> needs <source %s='...'/>",
                    attribute, attribute);
        return false;
    }
    if (net->type == DOMAIN_NET_BRIDGE)
        return check_ifname(net->source, "<source bridge>", error);
    net->port_id = conf_xml_prop(node, "portid");
    net->port_bridge = conf_xml_prop(node, "bridge");
    return !net->port_bridge || check_ifname(net->port_bridge, "<source bridge>", error);
}

static bool parse_target(struct domain_net *net, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"dev", "managed", NULL};
    if (!node) {
        net->ifname_auto = true;
        return true;
    }
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    net->ifname = conf_xml_prop(node, "dev");
    g_autofree char *managed = conf_xml_prop(node, "managed");
    if (managed && strcmp(managed, "yes") != 0 && strcmp(managed, "no") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "<target managed='%s'> must be 'yes' or 'no'",
                    managed);
        return false;
    }
    net->unmanaged = managed && strcmp(managed, "no") == 0;
    if (net->unmanaged && (net->type != DOMAIN_NET_ETHERNET || !net->ifname)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<target managed='no'> needs <interface type='ethernet'> and the existing tap as dev='...'");
        return false;
    }
    /* As in libvirt, names in the daemon's own pattern (vnetN) are its to
     * give: such a name is the run's, and the next run picks again. */
    net->ifname_auto = !net->ifname || (!net->unmanaged && g_str_has_prefix(net->ifname, "vnet"));
    return !net->ifname || check_ifname(net->ifname, "<target dev>", error);
}

static bool parse_model(const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"type", NULL};
    if (!node)
        return true;
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *type = conf_xml_prop(node, "type");
    if (!type || strcmp(type, "virtio") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<model type='%s'> is not supported by vsnap: interfaces are virtio-net, type='virtio'",
                    type ? type : "");
        return false;
    }
    return true;
}

static bool parse_mtu(struct domain_net *net, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"size", NULL};
    if (!node)
        return true;
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *size = conf_xml_prop(node, "size");
    uint64_t mtu;
    if (!conf_parse_uint64(size ? size : "", DOMAIN_NET_MIN_MTU, DOMAIN_NET_MAX_MTU, "<mtu size>", &mtu, error))
        return false;
    net->mtu = (uint32_t)mtu;
    return true;
}

static bool parse_link(struct domain_net *net, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"state", NULL};
    if (!node)
        return true;
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *state = conf_xml_prop(node, "state");
    if (!state || (strcmp(state, "up") != 0 && strcmp(state, "down") != 0)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "<link state='%s'> must be 'up' or 'down'",
                    state ? state : "");
        return false;
    }
    net->link_down = strcmp(state, "down") == 0;
    return true;
}

/* <alias name='net0'/>: what live XML shows; the name is always net<N>. */
static bool parse_alias(const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"name", NULL};
    return !node ||
           (conf_xml_check_attributes(node, attributes, error) && conf_xml_check_no_children(node, error));
}

/* Parse one element into net (zeroed by the caller); *have_mac says
 * whether it named its MAC. */
static bool parse_net(struct domain_net *net, const xmlNode *node, bool *have_mac, GError **error)
{
    static const char *const attributes[] = {"type", NULL};
    const xmlNode *found[NET_N_CHILDREN] = {NULL};
    return conf_xml_check_attributes(node, attributes, error) && parse_type(net, node, error) &&
           conf_xml_collect_children(node, net_child_names, NET_N_CHILDREN, found, error) && parse_mac(net, found[NET_MAC], have_mac, error) &&
           parse_source(net, found[NET_SOURCE], error) && parse_target(net, found[NET_TARGET], error) &&
           parse_model(found[NET_MODEL], error) && parse_mtu(net, found[NET_MTU], error) &&
           parse_link(net, found[NET_LINK], error) && parse_alias(found[NET_ALIAS], error);
}

/* libvirt's prefix for generated addresses (QEMU's OUI). */
static void generate_mac(unsigned char mac[6])
{
    mac[0] = 0x52;
    mac[1] = 0x54;
    mac[2] = 0x00;
    for (int i = 3; i < 6; i++)
        mac[i] = (unsigned char)g_random_int_range(0, 256);
}

static bool mac_taken(const struct domain_def *def, const struct domain_net *net)
{
    for (size_t i = 0; i < def->n_nets; i++)
        if (&def->nets[i] != net && memcmp(def->nets[i].mac, net->mac, 6) == 0)
            return true;
    return false;
}

static bool check_unique(const struct domain_def *def, const struct domain_net *net, GError **error)
{
    char mac[DOMAIN_NET_MAC_LEN];
    domain_mac_format(net->mac, mac);
    if (mac_taken(def, net)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "MAC address %s is used by two interfaces", mac);
        return false;
    }
    for (size_t i = 0; i < def->n_nets; i++) {
        const struct domain_net *other = &def->nets[i];
        if (other != net && net->ifname && other->ifname && strcmp(other->ifname, net->ifname) == 0) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "<target dev='%s'> is used by two interfaces",
                        net->ifname);
            return false;
        }
    }
    return true;
}

bool domain_parse_interface(struct domain_def *def, const xmlNode *node, GError **error)
{
    if (def->n_nets >= DOMAIN_NET_MAX) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "vsnap supports at most %d network interfaces per domain", DOMAIN_NET_MAX);
        return false;
    }
    /* Appended first, so that a part parsed is freed with def on failure. */
    def->nets = g_renew(struct domain_net, def->nets, def->n_nets + 1);
    struct domain_net *net = &def->nets[def->n_nets++];
    memset(net, 0, sizeof(*net));
    bool have_mac;
    if (!parse_net(net, node, &have_mac, error))
        return false;
    /* A generated address is drawn again while another interface has it. */
    if (!have_mac)
        do
            generate_mac(net->mac);
        while (mac_taken(def, net));
    return check_unique(def, net, error);
}

struct domain_net *domain_net_parse_string(const char *xml, GError **error)
{
    g_autoptr(xmlDoc) doc = conf_xml_read(xml, "interface", error);
    if (!doc)
        return NULL;
    const xmlNode *root = xmlDocGetRootElement(doc);
    if (!root || !conf_xml_is(root, "interface")) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "only <interface> devices can be updated on a vsnap domain");
        return NULL;
    }
    struct domain_net *net = g_new0(struct domain_net, 1);
    bool have_mac;
    if (!parse_net(net, root, &have_mac, error)) {
        domain_net_free(net);
        return NULL;
    }
    if (!have_mac) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                    "the <interface> to update needs its <mac address>, which names it");
        domain_net_free(net);
        return NULL;
    }
    return net;
}
