#include "host/network-port.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <string.h>

#include "util/virt-error.h"

/* A network daemon that misses this many keepalives this many seconds
 * apart is taken for dead and the call fails. */
#define KEEPALIVE_INTERVAL_S 2
#define KEEPALIVE_COUNT 3

/* The library's errors come back through virGetLastError; it must not also
 * print them on the daemon's stderr. */
static void quiet_errors(void *unused, virErrorPtr error)
{
    (void)unused;
    (void)error;
}

/* libvirt's client runs keepalive from an event loop. Its default
 * implementation puts its sources on GLib's default main context, which the
 * daemon's main loop runs: so the daemon's loop serves them. A thread of
 * our own iterating that context would also dispatch the daemon's own
 * callbacks, on the wrong thread. */
static gpointer start_library(gpointer unused)
{
    (void)unused;
    virSetErrorFunc(NULL, quiet_errors);
    virEventRegisterDefaultImpl();
    return NULL;
}

void network_driver_set_error(GError **error, int code, const char *what)
{
    virErrorPtr last = virGetLastError();
    g_set_error(error, VSNAP_VIR_ERROR, code, "%s: %s", what,
                last && last->message ? last->message : "unknown error");
}

/* virConnectOpen has no time limit of its own (keepalive starts once it is
 * open), so it runs on a thread of its own and the caller waits at most
 * OPEN_TIMEOUT_S; an open that finishes after its caller gave up closes
 * what it opened. */
#define OPEN_TIMEOUT_S 10

struct pending_open {
    GMutex lock;
    GCond done;
    gint refs;
    char *uri;
    bool readonly;
    bool finished, abandoned;
    virConnectPtr conn;
    char *message;
};

static void pending_open_unref(struct pending_open *p)
{
    if (!g_atomic_int_dec_and_test(&p->refs))
        return;
    g_free(p->uri);
    g_free(p->message);
    g_mutex_clear(&p->lock);
    g_cond_clear(&p->done);
    g_free(p);
}

static gpointer open_on_thread(gpointer data)
{
    struct pending_open *p = data;
    virConnectPtr conn = p->readonly ? virConnectOpenReadOnly(p->uri) : virConnectOpen(p->uri);
    virErrorPtr last = conn ? NULL : virGetLastError();
    g_mutex_lock(&p->lock);
    p->finished = true;
    if (p->abandoned && conn)
        virConnectClose(conn);
    else
        p->conn = conn;
    p->message = g_strdup(last && last->message ? last->message : "unknown error");
    g_cond_signal(&p->done);
    g_mutex_unlock(&p->lock);
    pending_open_unref(p);
    return NULL;
}

virConnectPtr host_driver_open(const char *uri, bool readonly, const char *what, GError **error)
{
    static GOnce once = G_ONCE_INIT;
    g_once(&once, start_library, NULL);
    struct pending_open *p = g_new0(struct pending_open, 1);
    g_mutex_init(&p->lock);
    g_cond_init(&p->done);
    p->refs = 2;
    p->uri = g_strdup(uri);
    p->readonly = readonly;
    g_thread_unref(g_thread_new("libvirt-open", open_on_thread, p));
    gint64 deadline = g_get_monotonic_time() + OPEN_TIMEOUT_S * G_TIME_SPAN_SECOND;
    g_mutex_lock(&p->lock);
    while (!p->finished && g_cond_wait_until(&p->done, &p->lock, deadline))
        ;
    virConnectPtr conn = p->conn;
    p->abandoned = !p->finished;
    if (!conn)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "cannot reach the host's %s driver at %s: %s",
                    what, uri, p->finished ? p->message : "it did not answer in time");
    g_mutex_unlock(&p->lock);
    pending_open_unref(p);
    if (conn)
        virConnectSetKeepAlive(conn, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT);
    return conn;
}

virConnectPtr network_driver_open(const char *uri, GError **error)
{
    return host_driver_open(uri, false, "network", error);
}

static virNetworkPtr find_network(virConnectPtr conn, const char *name, GError **error)
{
    virNetworkPtr network = virNetworkLookupByName(conn, name);
    if (!network) {
        g_autofree char *what = g_strdup_printf("network '%s'", name);
        network_driver_set_error(error, VIR_ERR_OPERATION_INVALID, what);
        return NULL;
    }
    if (virNetworkIsActive(network) != 1) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "network '%s' is not active", name);
        virNetworkFree(network);
        return NULL;
    }
    return network;
}

/* The bridge of a port's <plug type='network|bridge' bridge='...'/>. */
static char *plug_bridge(const char *port_xml, const char *network, GError **error)
{
    xmlDoc *doc = xmlReadMemory(port_xml, (int)strlen(port_xml), "networkport", NULL,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    char *bridge = NULL;
    g_autofree char *type = NULL;
    for (xmlNode *child = root ? root->children : NULL; child; child = child->next) {
        if (child->type != XML_ELEMENT_NODE || strcmp((const char *)child->name, "plug") != 0)
            continue;
        xmlChar *t = xmlGetProp(child, (const xmlChar *)"type");
        xmlChar *b = xmlGetProp(child, (const xmlChar *)"bridge");
        type = g_strdup((const char *)t);
        if (b && t && (strcmp((const char *)t, "network") == 0 || strcmp((const char *)t, "bridge") == 0))
            bridge = g_strdup((const char *)b);
        xmlFree(t);
        xmlFree(b);
    }
    xmlFreeDoc(doc);
    if (!bridge)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "network '%s' plugs its ports as '%s', not into a bridge: vsnap needs a bridge for its tap",
                    network, type ? type : "nothing");
    return bridge;
}

static char *port_definition(const struct domain_def *owner, const struct domain_net *net)
{
    char uuid[DOMAIN_UUID_STRING_LEN], mac[DOMAIN_NET_MAC_LEN];
    domain_uuid_format(owner->uuid, uuid);
    domain_mac_format(net->mac, mac);
    g_autofree char *name = g_markup_escape_text(owner->name, -1);
    /* The port's own id is the client's to choose, as libvirt's drivers do. */
    g_autofree char *port = g_uuid_string_random();
    return g_strdup_printf("<networkport>\n"
                           "  <uuid>%s</uuid>\n"
                           "  <owner><name>%s</name><uuid>%s</uuid></owner>\n"
                           "  <mac address='%s'/>\n"
                           "</networkport>\n",
                           port, name, uuid, mac);
}

static bool create_port(virNetworkPtr network, const struct domain_def *owner, struct domain_net *net,
                        GError **error)
{
    g_autofree char *definition = port_definition(owner, net);
    virNetworkPortPtr port = virNetworkPortCreateXML(network, definition, 0);
    if (!port) {
        g_autofree char *what = g_strdup_printf("cannot allocate a port on network '%s'", net->source);
        network_driver_set_error(error, VIR_ERR_OPERATION_FAILED, what);
        return false;
    }
    char uuid[VIR_UUID_STRING_BUFLEN];
    char *xml = virNetworkPortGetXMLDesc(port, 0);
    bool ok = xml && virNetworkPortGetUUIDString(port, uuid) == 0;
    if (!ok)
        network_driver_set_error(error, VIR_ERR_OPERATION_FAILED, "cannot read the network port");
    char *bridge = ok ? plug_bridge(xml, net->source, error) : NULL;
    free(xml);
    if (!bridge) {
        virNetworkPortDelete(port, 0);
        virNetworkPortFree(port);
        return false;
    }
    g_free(net->port_id);
    g_free(net->port_bridge);
    net->port_id = g_strdup(uuid);
    net->port_bridge = bridge;
    virNetworkPortFree(port);
    return true;
}

bool network_port_allocate(const char *uri, const struct domain_def *owner, struct domain_net *net,
                           GError **error)
{
    virConnectPtr conn = network_driver_open(uri, error);
    if (!conn)
        return false;
    virNetworkPtr network = find_network(conn, net->source, error);
    bool ok = network && create_port(network, owner, net, error);
    if (network)
        virNetworkFree(network);
    virConnectClose(conn);
    return ok;
}

bool network_port_release(const char *uri, const struct domain_net *net, GError **error)
{
    if (!net->port_id)
        return true;
    virConnectPtr conn = network_driver_open(uri, error);
    if (!conn)
        return false;
    virNetworkPtr network = virNetworkLookupByName(conn, net->source);
    virNetworkPortPtr port = network ? virNetworkPortLookupByUUIDString(network, net->port_id) : NULL;
    bool ok = !port || virNetworkPortDelete(port, 0) == 0;
    if (!ok) {
        g_autofree char *what = g_strdup_printf("cannot free port %s of network '%s'", net->port_id, net->source);
        network_driver_set_error(error, VIR_ERR_OPERATION_FAILED, what);
    }
    if (port)
        virNetworkPortFree(port);
    if (network)
        virNetworkFree(network);
    virConnectClose(conn);
    return ok;
}
