#include "host/host-networks.h"

#include <libvirt/virterror.h>
#include <string.h>

#include "conf/domain-conf.h"
#include "host/network-port.h"
#include "util/virt-error.h"

void host_network_clear(struct host_network *net)
{
    g_clear_pointer(&net->name, g_free);
}

static void clear_item(gpointer item)
{
    host_network_clear(item);
}

GArray *host_networks_list(const char *uri, unsigned flags)
{
    GArray *out = g_array_new(FALSE, TRUE, sizeof(struct host_network));
    g_array_set_clear_func(out, clear_item);
    g_autoptr(GError) error = NULL;
    virConnectPtr conn = network_driver_open(uri, &error);
    if (!conn) {
        g_debug("no networks to list: %s", error->message);
        return out;
    }
    virNetworkPtr *nets = NULL;
    int n = virConnectListAllNetworks(conn, &nets, flags);
    for (int i = 0; i < n; i++) {
        struct host_network item = {.name = g_strdup(virNetworkGetName(nets[i]))};
        virNetworkGetUUID(nets[i], item.uuid);
        g_array_append_val(out, item);
        virNetworkFree(nets[i]);
    }
    free(nets);
    virConnectClose(conn);
    return out;
}

/* The network called name (or with uuid) on a new connection; *conn_out
 * to close after. */
static virNetworkPtr find(const char *uri, const char *name, const unsigned char *uuid, virConnectPtr *conn_out,
                          GError **error)
{
    g_autoptr(GError) open_error = NULL;
    virConnectPtr conn = network_driver_open(uri, &open_error);
    virNetworkPtr net = !conn ? NULL : uuid ? virNetworkLookupByUUID(conn, uuid) : virNetworkLookupByName(conn, name);
    if (!net) {
        char text[DOMAIN_UUID_STRING_LEN] = "";
        if (uuid)
            domain_uuid_format(uuid, text);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_NETWORK, "Network not found: no network with matching %s '%s'%s",
                    uuid ? "uuid" : "name", uuid ? text : name, conn ? "" : " (no network driver answers)");
        if (conn)
            virConnectClose(conn);
        return NULL;
    }
    *conn_out = conn;
    return net;
}

static void done(virNetworkPtr net, virConnectPtr conn)
{
    virNetworkFree(net);
    virConnectClose(conn);
}

bool host_network_lookup(const char *uri, const char *name, const unsigned char *uuid,
                         struct host_network *out, GError **error)
{
    virConnectPtr conn;
    virNetworkPtr net = find(uri, name, uuid, &conn, error);
    if (!net)
        return false;
    out->name = g_strdup(virNetworkGetName(net));
    virNetworkGetUUID(net, out->uuid);
    done(net, conn);
    return true;
}

int host_network_fact(const char *uri, const char *name, enum host_network_fact fact, GError **error)
{
    virConnectPtr conn;
    virNetworkPtr net = find(uri, name, NULL, &conn, error);
    if (!net)
        return -1;
    int value = -1, autostart = 0;
    switch (fact) {
    case HOST_NETWORK_ACTIVE:
        value = virNetworkIsActive(net);
        break;
    case HOST_NETWORK_PERSISTENT:
        value = virNetworkIsPersistent(net);
        break;
    case HOST_NETWORK_AUTOSTART:
        value = virNetworkGetAutostart(net, &autostart) == 0 ? autostart : -1;
        break;
    }
    if (value < 0)
        network_driver_set_error(error, VIR_ERR_OPERATION_FAILED, name);
    done(net, conn);
    return value;
}

static char *text_answer(char *value, const char *name, GError **error)
{
    if (!value) {
        network_driver_set_error(error, VIR_ERR_OPERATION_FAILED, name);
        return NULL;
    }
    char *copy = g_strdup(value);
    free(value);
    return copy;
}

char *host_network_xml(const char *uri, const char *name, unsigned flags, GError **error)
{
    virConnectPtr conn;
    virNetworkPtr net = find(uri, name, NULL, &conn, error);
    if (!net)
        return NULL;
    char *xml = text_answer(virNetworkGetXMLDesc(net, flags), name, error);
    done(net, conn);
    return xml;
}

char *host_network_bridge(const char *uri, const char *name, GError **error)
{
    virConnectPtr conn;
    virNetworkPtr net = find(uri, name, NULL, &conn, error);
    if (!net)
        return NULL;
    char *bridge = text_answer(virNetworkGetBridgeName(net), name, error);
    done(net, conn);
    return bridge;
}
