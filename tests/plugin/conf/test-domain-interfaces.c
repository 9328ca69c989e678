/* Unit tests of <interface> in plugin/conf: the three types, generated MACs
 * (libvirt's 52:54:00 prefix, kept by a format/parse round trip), live
 * XML's runtime parts and their absence from inactive XML, every refusal
 * with its libvirt error code, a lone <interface> (device updates) and the
 * VmConfig "net" the shim gets. */
#include <json-glib/json-glib.h>
#include <string.h>

#include "conf-test.h"
#include "conf/domain-conf.h"
#include "json/vjson.h"

static const char *schema_dir;
static const char *examples_dir;

static char *domain_with_devices(const char *devices)
{
    return g_strdup_printf("<domain type='kvm'><name>t</name><memory unit='MiB'>64</memory>"
                           "<os><type>hvm</type><kernel>/boot/vmlinux</kernel></os>"
                           "<devices>%s</devices></domain>\n",
                           devices);
}

static struct domain_def *parse_ok(const char *xml, bool live)
{
    g_autoptr(GError) error = NULL;
    struct domain_def *def = live ? domain_def_parse_live_string(xml, schema_dir, &error)
                                  : domain_def_parse_string(xml, schema_dir, &error);
    if (!def)
        g_error("unexpected parse failure: %s\n--- XML ---\n%s", error->message, xml);
    return def;
}

static struct domain_def *parse_devices(const char *devices)
{
    g_autofree char *xml = domain_with_devices(devices);
    return parse_ok(xml, false);
}

static void check_refusal(const char *devices, int code, const char *message_part)
{
    g_autofree char *xml = domain_with_devices(devices);
    g_autoptr(GError) error = NULL;
    g_autoptr(domain_def) def = domain_def_parse_string(xml, schema_dir, &error);
    if (def)
        g_error("accepted, expected a refusal containing '%s':\n%s", message_part, devices);
    if (!g_error_matches(error, VSNAP_VIR_ERROR, code) || !strstr(error->message, message_part))
        g_error("for %s\nexpected code %d with '%s', got %d: %s", devices, code, message_part, error->code,
                error->message);
}

static void test_example(void)
{
    g_autofree char *xml = conf_test_read(examples_dir, "network.xml", NULL);
    g_autoptr(domain_def) def = parse_ok(xml, false);
    g_assert_cmpuint(def->n_nets, ==, 3);
    const struct domain_net *eth = &def->nets[0], *br = &def->nets[1], *nw = &def->nets[2];
    char mac[DOMAIN_NET_MAC_LEN];
    g_assert_cmpint(eth->type, ==, DOMAIN_NET_ETHERNET);
    domain_mac_format(eth->mac, mac);
    g_assert_cmpstr(mac, ==, "52:54:00:6e:65:01");
    g_assert_cmpstr(eth->ifname, ==, "vsnap-tap0");
    g_assert_false(eth->ifname_auto);
    g_assert_false(eth->unmanaged);
    g_assert_null(eth->source);
    g_assert_cmpint(br->type, ==, DOMAIN_NET_BRIDGE);
    g_assert_cmpstr(br->source, ==, "br0");
    g_assert_null(br->ifname);
    g_assert_true(br->ifname_auto);
    g_assert_cmpuint(br->mtu, ==, 9000);
    g_assert_false(br->link_down);
    g_assert_cmpint(nw->type, ==, DOMAIN_NET_NETWORK);
    g_assert_cmpstr(nw->source, ==, "isolated");
    g_assert_true(nw->link_down);
    /* Generated in libvirt's prefix. */
    g_assert_cmpint(nw->mac[0], ==, 0x52);
    g_assert_cmpint(nw->mac[1], ==, 0x54);
    g_assert_cmpint(nw->mac[2], ==, 0x00);

    g_assert_true(domain_def_find_net(def, "vsnap-tap0") == eth);
    g_assert_true(domain_def_find_net(def, "52:54:00:6E:65:02") == br);
    g_assert_null(domain_def_find_net(def, "br0"));
}

/* A generated MAC is written out, so the definition keeps it. */
static void test_generated_mac_is_kept(void)
{
    g_autoptr(domain_def) def = parse_devices("<interface type='ethernet'/><interface type='ethernet'/>");
    g_assert_cmpint(memcmp(def->nets[0].mac, def->nets[1].mac, 6), !=, 0);
    g_autofree char *xml = domain_def_format(def, false, -1);
    g_autoptr(domain_def) again = parse_ok(xml, false);
    g_assert_cmpint(memcmp(def->nets[0].mac, again->nets[0].mac, 6), ==, 0);
    g_assert_cmpint(memcmp(def->nets[1].mac, again->nets[1].mac, 6), ==, 0);
    g_autofree char *xml2 = domain_def_format(again, false, -1);
    g_assert_cmpstr(xml, ==, xml2);
}

static void test_format(void)
{
    g_autoptr(domain_def) def = parse_devices(
        "<interface type='ethernet'><target dev='tap7' managed='no'/><mac address='52:54:00:AA:bb:0c'/>"
        "<link state='up'/></interface>"
        "<interface type='network'><source network='iso'/><mac address='52:54:00:00:00:02'/>"
        "<model type='virtio'/><mtu size='1400'/><link state='down'/></interface>");
    g_autofree char *xml = domain_def_format(def, false, -1);
    const char *expected =
        "    <interface type='ethernet'>\n"
        "      <mac address='52:54:00:aa:bb:0c'/>\n"
        "      <target dev='tap7' managed='no'/>\n"
        "      <model type='virtio'/>\n"
        "    </interface>\n"
        "    <interface type='network'>\n"
        "      <mac address='52:54:00:00:00:02'/>\n"
        "      <source network='iso'/>\n"
        "      <model type='virtio'/>\n"
        "      <mtu size='1400'/>\n"
        "      <link state='down'/>\n"
        "    </interface>\n";
    if (!strstr(xml, expected))
        g_error("formatted:\n%s\nexpected to contain:\n%s", xml, expected);
    if (g_file_test(LIBVIRT_SCHEMAS "/domain.rng", G_FILE_TEST_EXISTS))
        conf_test_check_libvirt_schema(xml, "domain", "domain.rng");
}

/* What a run chose shows in live XML, parses back from it, and is gone from
 * inactive XML and after domain_def_forget_net_runtime. */
static void test_live(void)
{
    g_autoptr(domain_def) def = parse_devices(
        "<interface type='network'><source network='iso'/><mac address='52:54:00:00:00:03'/></interface>"
        "<interface type='bridge'><source bridge='br0'/><target dev='mytap'/></interface>");
    def->nets[0].ifname = g_strdup("vnet4");
    def->nets[0].port_id = g_strdup("0b6a7b1c-1111-2222-3333-444455556666");
    def->nets[0].port_bridge = g_strdup("virbr9");
    g_autofree char *live = domain_def_format(def, true, 3);
    g_assert_nonnull(strstr(live, "<source network='iso' portid='0b6a7b1c-1111-2222-3333-444455556666' "
                                  "bridge='virbr9'/>\n      <target dev='vnet4'/>"));
    g_assert_nonnull(strstr(live, "<alias name='net0'/>"));
    g_assert_nonnull(strstr(live, "<alias name='net1'/>"));
    g_autofree char *inactive = domain_def_format(def, false, -1);
    g_assert_null(strstr(inactive, "vnet4"));
    g_assert_null(strstr(inactive, "portid"));
    g_assert_null(strstr(inactive, "alias"));
    g_assert_nonnull(strstr(inactive, "<target dev='mytap'/>"));

    g_autoptr(domain_def) back = parse_ok(live, true);
    g_assert_cmpstr(back->nets[0].ifname, ==, "vnet4");
    g_assert_cmpstr(back->nets[0].port_bridge, ==, "virbr9");
    g_assert_cmpstr(back->nets[0].port_id, ==, "0b6a7b1c-1111-2222-3333-444455556666");
    /* Live XML alone cannot tell that the daemon named vnet4; the status
     * file is read back as it was written, and the run forgets its name when
     * the definition comes from the persistent one. */
    domain_def_forget_net_runtime(def);
    g_assert_null(def->nets[0].ifname);
    g_assert_null(def->nets[0].port_id);
    g_assert_cmpstr(def->nets[1].ifname, ==, "mytap");

    g_autoptr(domain_def) copy = domain_def_copy(back);
    g_assert_cmpstr(copy->nets[0].port_bridge, ==, "virbr9");
    g_assert_true(copy->nets[0].port_bridge != back->nets[0].port_bridge);
}

#define ETH(inner) "<interface type='ethernet'>" inner "</interface>"

static void test_refusals(void)
{
    static const struct {
        const char *devices;
        int code;
        const char *message_part;
    } refusals[] = {
        {"<interface type='user'/>", VIR_ERR_CONFIG_UNSUPPORTED, "<interface type='user'> is not supported"},
        {"<interface type='direct'><source dev='eth0' mode='vepa'/></interface>", VIR_ERR_CONFIG_UNSUPPORTED,
         "<interface type='direct'>"},
        {"<interface type='vhostuser'/>", VIR_ERR_CONFIG_UNSUPPORTED, "<interface type='vhostuser'>"},
        {"<interface type='hostdev'/>", VIR_ERR_CONFIG_UNSUPPORTED, "<interface type='hostdev'>"},
        {"<interface type='mcast'/>", VIR_ERR_CONFIG_UNSUPPORTED, "<interface type='mcast'>"},
        {"<interface/>", VIR_ERR_XML_ERROR, "no type attribute"},
        {ETH("<model type='e1000'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "<model type='e1000'> is not supported"},
        {ETH("<model type='rtl8139'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "<model type='rtl8139'>"},
        {ETH("<bandwidth/>"), VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <bandwidth> in <interface>"},
        {ETH("<filterref filter='clean-traffic'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "<filterref>"},
        {ETH("<driver name='vhost'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "<driver>"},
        {ETH("<address type='pci'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "<address>"},
        {ETH("<mac address='52:54:00:00:00'/>"), VIR_ERR_XML_DETAIL, "is not a MAC address"},
        {ETH("<mac address='01:00:5e:00:00:01'/>"), VIR_ERR_XML_DETAIL, "multicast"},
        {ETH("<mac address='52:54:00:00:00:01'/>") ETH("<mac address='52:54:00:00:00:01'/>"), VIR_ERR_XML_ERROR,
         "is used by two interfaces"},
        {ETH("<target dev='t0'/>") ETH("<target dev='t0'/>"), VIR_ERR_XML_ERROR, "<target dev='t0'> is used by two"},
        {ETH("<target dev='a/b'/>"), VIR_ERR_XML_DETAIL, "not a network interface name"},
        {ETH("<target dev='sixteen-chars-xx'/>"), VIR_ERR_XML_DETAIL, "not a network interface name"},
        {ETH("<target managed='no'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "managed='no'"},
        {"<interface type='bridge'><source bridge='br0'/><target dev='t' managed='no'/></interface>",
         VIR_ERR_CONFIG_UNSUPPORTED, "managed='no'"},
        {ETH("<source bridge='br0'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "takes no <source>"},
        {"<interface type='bridge'/>", VIR_ERR_XML_ERROR, "needs <source bridge="},
        {"<interface type='network'><source bridge='x'/></interface>", VIR_ERR_XML_ERROR, "needs <source network="},
        {"<interface type='network'/>", VIR_ERR_XML_ERROR, "needs <source network="},
        {ETH("<mtu size='67'/>"), VIR_ERR_XML_DETAIL, "<mtu size>"},
        {ETH("<mtu size='65536'/>"), VIR_ERR_XML_DETAIL, "<mtu size>"},
        {ETH("<link state='sideways'/>"), VIR_ERR_XML_DETAIL, "must be 'up' or 'down'"},
        {ETH("<link state='up'/><link state='up'/>"), VIR_ERR_XML_ERROR, "appears more than once"},
        {ETH("") ETH("") ETH("") ETH("") ETH("") ETH("") ETH("") ETH("") ETH(""), VIR_ERR_CONFIG_UNSUPPORTED,
         "at most 8 network interfaces"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(refusals); i++)
        check_refusal(refusals[i].devices, refusals[i].code, refusals[i].message_part);
}

static void test_device_update(void)
{
    g_autoptr(GError) error = NULL;
    struct domain_net *net = domain_net_parse_string(
        "<interface type='bridge'><mac address='52:54:00:00:00:09'/><source bridge='br0'/>"
        "<target dev='vnet0'/><model type='virtio'/><link state='down'/><alias name='net0'/></interface>",
        &error);
    g_assert_no_error(error);
    g_assert_true(net->link_down);
    domain_net_free(net);
    net = domain_net_parse_string("<interface type='bridge'><source bridge='br0'/></interface>", &error);
    g_assert_null(net);
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED);
    g_clear_error(&error);
    net = domain_net_parse_string("<disk/>", &error);
    g_assert_null(net);
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED);
}

static void test_vm_config(void)
{
    g_autofree char *xml = conf_test_read(examples_dir, "network.xml", NULL);
    g_autoptr(domain_def) def = parse_ok(xml, false);
    g_autoptr(GError) error = NULL;
    g_autofree char *json = domain_def_to_vm_config_json(def, NULL, NULL, &error);
    g_assert_no_error(error);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_assert_true(json_parser_load_from_data(parser, json, -1, NULL));
    JsonArray *nets = json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)), "net");
    g_assert_cmpuint(json_array_get_length(nets), ==, 3);
    JsonObject *first = json_array_get_object_element(nets, 0);
    g_assert_cmpstr(json_object_get_string_member(first, "id"), ==, "net0");
    g_assert_cmpstr(json_object_get_string_member(first, "mac"), ==, "52:54:00:6e:65:01");
    g_assert_false(json_object_has_member(first, "tap"));   /* the descriptor is the tap */
    g_assert_false(json_object_has_member(first, "mtu"));
    g_assert_cmpint(json_object_get_int_member(first, "num_queues"), ==, 2);
    JsonArray *fds = json_object_get_array_member(first, "fds");
    g_assert_cmpuint(json_array_get_length(fds), ==, 1);
    JsonObject *second = json_array_get_object_element(nets, 1);
    g_assert_cmpstr(json_object_get_string_member(second, "id"), ==, "net1");
    g_assert_cmpint(json_object_get_int_member(second, "mtu"), ==, 9000);

    g_autoptr(domain_def) bare = parse_devices("");
    g_autofree char *bare_json = domain_def_to_vm_config_json(bare, NULL, NULL, &error);
    g_assert_null(strstr(bare_json, "\"net\""));
}

/* vm.restore's config_overrides.net: the host's part only (id, the
 * definition's MAC, the descriptor's placeholder). */
static void test_restore_overrides(void)
{
    g_autoptr(domain_def) def = parse_devices(
        "<interface type='bridge'><source bridge='br0'/><mac address='52:54:00:0b:00:02'/><mtu size='1400'/>"
        "</interface>");
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    domain_def_add_vm_net_overrides(b, def);
    vjson_object_end(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *json = json_to_string(root, FALSE);
    g_assert_cmpstr(json, ==, "{\"net\":[{\"id\":\"net0\",\"mac\":\"52:54:00:0b:00:02\",\"fds\":[-1]}]}");
}

int main(int argc, char **argv)
{
    conf_test_init(&argc, &argv, &schema_dir, &examples_dir);
    g_test_add_func("/conf/interfaces/example", test_example);
    g_test_add_func("/conf/interfaces/generated-mac-is-kept", test_generated_mac_is_kept);
    g_test_add_func("/conf/interfaces/format", test_format);
    g_test_add_func("/conf/interfaces/live", test_live);
    g_test_add_func("/conf/interfaces/refusals", test_refusals);
    g_test_add_func("/conf/interfaces/device-update", test_device_update);
    g_test_add_func("/conf/interfaces/vm-config", test_vm_config);
    g_test_add_func("/conf/interfaces/restore-overrides", test_restore_overrides);
    return g_test_run();
}
