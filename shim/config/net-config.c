/* The network interfaces of a VmConfig: their lifetime (a config owns its tap
 * descriptors), value checks and JSON form (parsing is vm-config.c's schema). */
#define G_LOG_DOMAIN "vsnap-shim"

#include "disk-config-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "config/shim-error.h"
#include "json/vjson.h"

void net_config_init(struct net_config *net)
{
    memset(net, 0, sizeof *net);
    net->num_queues = VSNAP_NET_QUEUES;
    net->queue_size = VSNAP_NET_DEFAULT_QUEUE_SIZE;
    net->offload_tso = net->offload_ufo = net->offload_csum = true;
}

/* A copy owns its own descriptors: the VM built from one copy and the config
 * the VMM keeps for the next boot close theirs independently. */
void net_config_copy(struct net_config *to, const struct net_config *from)
{
    *to = *from;
    to->tap = g_strdup(from->tap);
    to->ip = g_strdup(from->ip);
    to->mask = g_strdup(from->mask);
    to->mac = g_strdup(from->mac);
    to->host_mac = g_strdup(from->host_mac);
    to->id = g_strdup(from->id);
    to->vhost_mode = g_strdup(from->vhost_mode);
    to->fds = from->nfds ? g_new(int, from->nfds) : NULL;
    for (unsigned i = 0; i < from->nfds; i++) {
        to->fds[i] = from->fds[i] >= 0 ? fcntl(from->fds[i], F_DUPFD_CLOEXEC, 3) : -1;
        if (from->fds[i] >= 0 && to->fds[i] < 0)
            g_warning("net %s: cannot duplicate tap descriptor %d: %s", from->id ? from->id : "?", from->fds[i],
                      g_strerror(errno));
    }
}

void net_config_clear(struct net_config *net)
{
    g_clear_pointer(&net->tap, g_free);
    g_clear_pointer(&net->ip, g_free);
    g_clear_pointer(&net->mask, g_free);
    g_clear_pointer(&net->mac, g_free);
    g_clear_pointer(&net->host_mac, g_free);
    g_clear_pointer(&net->id, g_free);
    g_clear_pointer(&net->vhost_mode, g_free);
    for (unsigned i = 0; i < net->nfds; i++)
        if (net->fds[i] >= 0)
            close(net->fds[i]);
    g_clear_pointer(&net->fds, g_free);
    net->nfds = 0;
}

void vm_config_add_net(struct vm_config *cfg, const struct net_config *net)
{
    cfg->nets = g_renew(struct net_config, cfg->nets, cfg->nnets + 1);
    net_config_copy(&cfg->nets[cfg->nnets++], net);
}

const struct net_config *vm_config_find_net(const struct vm_config *cfg, const char *id)
{
    for (unsigned i = 0; i < cfg->nnets; i++)
        if (g_strcmp0(cfg->nets[i].id, id) == 0)
            return &cfg->nets[i];
    return NULL;
}

bool vm_config_remove_net(struct vm_config *cfg, const char *id)
{
    const struct net_config *net = vm_config_find_net(cfg, id);
    if (!net)
        return false;
    unsigned i = (unsigned)(net - cfg->nets);
    net_config_clear(&cfg->nets[i]);
    memmove(&cfg->nets[i], &cfg->nets[i + 1], (cfg->nnets - i - 1) * sizeof cfg->nets[0]);
    cfg->nnets--;
    return true;
}

void vm_config_name_nets(struct vm_config *cfg)
{
    unsigned next = 0;
    for (unsigned i = 0; i < cfg->nnets; i++) {
        if (cfg->nets[i].id)
            continue;
        char *name = NULL;
        do {
            g_free(name);
            name = g_strdup_printf("_net%u", next++);
        } while (vm_config_find_net(cfg, name) || vm_config_find_disk(cfg, name));
        cfg->nets[i].id = name;
    }
}

bool net_mac_parse(const char *text, uint8_t mac[6])
{
    if (!text || strlen(text) != 17)
        return false;
    for (unsigned i = 0; i < 6; i++) {
        const char *p = text + 3 * i;
        if (!g_ascii_isxdigit(p[0]) || !g_ascii_isxdigit(p[1]) || (i < 5 && p[2] != ':'))
            return false;
        mac[i] = (uint8_t)(g_ascii_xdigit_value(p[0]) << 4 | g_ascii_xdigit_value(p[1]));
    }
    return true;
}

/* ---- value checks ---- */

static bool net_invalid(GError **error, int code, unsigned index, const char *field, const char *why)
{
    g_set_error(error, SHIM_ERROR, code, "invalid field 'net[%u].%s': %s", index, field, why);
    return false;
}

static bool is_ipv4(const char *text)
{
    unsigned parts = 0;
    const char *p = text;
    while (*p) {
        unsigned value = 0, digits = 0;
        while (g_ascii_isdigit(*p) && digits < 4)
            value = value * 10 + (unsigned)(*p++ - '0'), digits++;
        if (digits == 0 || digits > 3 || value > 255)
            return false;
        parts++;
        if (*p == '.' && parts < 4)
            p++;
        else if (*p)
            return false;
    }
    return parts == 4;
}

static bool check_mac(const char *text, unsigned i, const char *field, bool guest, GError **error)
{
    uint8_t mac[6];
    if (!text)
        return true;
    if (!net_mac_parse(text, mac))
        return net_invalid(error, SHIM_ERROR_INVALID, i, field, "expected a MAC address like 52:54:00:12:34:56");
    if (guest && (mac[0] & 1))
        return net_invalid(error, SHIM_ERROR_INVALID, i, field, "a multicast address cannot be an interface's");
    return true;
}

static bool check_addresses(const struct net_config *n, unsigned i, GError **error)
{
    if (n->ip && !is_ipv4(n->ip))
        return net_invalid(error, SHIM_ERROR_UNSUPPORTED, i, "ip", "vsnap sets IPv4 addresses (a.b.c.d) only");
    if (n->mask && !is_ipv4(n->mask))
        return net_invalid(error, SHIM_ERROR_INVALID, i, "mask", "expected an IPv4 netmask (a.b.c.d)");
    if (n->mask && !n->ip)
        return net_invalid(error, SHIM_ERROR_INVALID, i, "mask", "given without ip");
    return check_mac(n->mac, i, "mac", true, error) && check_mac(n->host_mac, i, "host_mac", false, error);
}

static bool check_net(const struct vm_config *cfg, unsigned i, GError **error)
{
    const struct net_config *n = &cfg->nets[i];
    if (!n->id || !*n->id)
        return net_invalid(error, SHIM_ERROR_INVALID, i, "id", "must not be empty");
    if (vm_config_find_net(cfg, n->id) != n || vm_config_find_disk(cfg, n->id) ||
        disk_config_id_is_reserved(n->id)) {
        g_autofree char *why = g_strdup_printf("'%s' is the id of another device", n->id);
        return net_invalid(error, SHIM_ERROR_INVALID, i, "id", why);
    }
    if (n->tap && (!*n->tap || strlen(n->tap) >= 16 || strchr(n->tap, '/') || strchr(n->tap, ' ')))
        return net_invalid(error, SHIM_ERROR_INVALID, i, "tap", "not an interface name (1-15 bytes, no '/' or ' ')");
    if (n->num_queues != VSNAP_NET_QUEUES) {
        g_autofree char *why = g_strdup_printf("%u: vsnap gives an interface one RX/TX queue pair (num_queues 2); "
                                               "multiqueue is not supported", n->num_queues);
        return net_invalid(error, SHIM_ERROR_UNSUPPORTED, i, "num_queues", why);
    }
    if (n->queue_size < 4 || n->queue_size > VSNAP_NET_MAX_QUEUE_SIZE || (n->queue_size & (n->queue_size - 1))) {
        g_autofree char *why = g_strdup_printf("%u is not a power of two between 4 and %d", n->queue_size,
                                               VSNAP_NET_MAX_QUEUE_SIZE);
        return net_invalid(error, SHIM_ERROR_INVALID, i, "queue_size", why);
    }
    if (n->mtu && (n->mtu < VSNAP_NET_MIN_MTU || n->mtu > VSNAP_NET_MAX_MTU)) {
        g_autofree char *why = g_strdup_printf("%u is outside %d .. %d", n->mtu, VSNAP_NET_MIN_MTU, VSNAP_NET_MAX_MTU);
        return net_invalid(error, SHIM_ERROR_INVALID, i, "mtu", why);
    }
    if (n->vhost_mode && strcmp(n->vhost_mode, "Client") != 0)
        return net_invalid(error, SHIM_ERROR_UNSUPPORTED, i, "vhost_mode", "vhost-user is not supported by vsnap");
    if (n->nfds > VSNAP_NET_MAX_FDS) {
        g_autofree char *why = g_strdup_printf("%u descriptors: one tap descriptor per queue pair, and vsnap gives "
                                               "one pair", n->nfds);
        return net_invalid(error, SHIM_ERROR_UNSUPPORTED, i, "fds", why);
    }
    for (unsigned k = 0; k < n->nfds; k++)
        if (n->fds[k] < 0)
            return net_invalid(error, SHIM_ERROR_INVALID, i, "fds",
                               "tap descriptors come with the request over the API socket (SCM_RIGHTS); "
                               "none came for this one");
    return check_addresses(n, i, error);
}

bool vm_config_check_nets(const struct vm_config *cfg, GError **error)
{
    for (unsigned i = 0; i < cfg->nnets; i++)
        if (!check_net(cfg, i, error))
            return false;
    return true;
}

/* ---- JSON ---- */

/* Descriptors are never written out: a number means nothing to another
 * process, and a config read back (a snapshot's) must not name one. */
void net_config_add_json(JsonBuilder *b, const struct net_config *net)
{
    vjson_object_begin(b, NULL);
    vjson_str(b, "tap", net->tap);
    vjson_str(b, "ip", net->ip);
    vjson_str(b, "mask", net->mask);
    vjson_str(b, "mac", net->mac);
    vjson_str(b, "host_mac", net->host_mac);
    if (net->mtu)
        vjson_int(b, "mtu", net->mtu);
    vjson_int(b, "num_queues", net->num_queues);
    vjson_int(b, "queue_size", net->queue_size);
    vjson_str(b, "id", net->id);
    vjson_bool(b, "offload_tso", net->offload_tso);
    vjson_bool(b, "offload_ufo", net->offload_ufo);
    vjson_bool(b, "offload_csum", net->offload_csum);
    vjson_object_end(b);
}
