/* Unit tests of plugin/conf's snapshot XML: examples, round trips, defaults,
 * refusals, and libvirt's own domainsnapshot.rng on what we write. */
#include <string.h>

#include "conf-test.h"
#include "conf/snapshot-conf.h"

static const char *schema_dir;
static const char *examples_dir;

static struct snapshot_def *parse_ok(const char *xml)
{
    g_autoptr(GError) error = NULL;
    struct snapshot_def *def = snapshot_def_parse_string(xml, schema_dir, &error);
    if (!def)
        g_error("unexpected refusal: %s\n%s", error->message, xml);
    return def;
}

static char *read_example(const char *name)
{
    return conf_test_read(examples_dir, "snapshots", name, NULL);
}

static void check_libvirt_schema(const char *xml)
{
    if (!g_file_test(LIBVIRT_SCHEMAS "/domainsnapshot.rng", G_FILE_TEST_EXISTS))
        return; /* reported by test_libvirt_schema_present */
    conf_test_check_libvirt_schema(xml, "snapshot", "domainsnapshot.rng");
}

static char *check_round_trip(const char *xml)
{
    g_autoptr(snapshot_def) first = parse_ok(xml);
    char *formatted = snapshot_def_format(first);
    g_autoptr(snapshot_def) second = parse_ok(formatted);
    g_autofree char *again = snapshot_def_format(second);
    g_assert_cmpstr(formatted, ==, again);
    check_libvirt_schema(formatted);
    return formatted;
}

static void test_redefine_example(void)
{
    g_autofree char *xml = read_example("redefine.xml");
    g_autoptr(snapshot_def) def = parse_ok(xml);
    g_assert_cmpstr(def->name, ==, "after-warmup");
    g_assert_cmpstr(def->description, ==, "second layer over base");
    g_assert_cmpstr(def->parent, ==, "base");
    g_assert_true(def->state_set);
    g_assert_cmpint(def->state, ==, SNAPSHOT_STATE_RUNNING);
    g_assert_cmpint(def->creation_time, ==, 1764480000);
    g_assert_cmpint(def->memory, ==, SNAPSHOT_MEMORY_INTERNAL);
    g_assert_nonnull(def->domain);
    g_assert_cmpstr(def->domain->name, ==, "microvm");
    g_assert_cmpuint(def->domain->memory_kib, ==, 512 * 1024);
    g_assert_true(def->domain->vsock.present);
    g_autofree char *formatted = check_round_trip(xml);
    g_assert_nonnull(strstr(formatted, "<uuid>4dea22b3-1d52-d8f3-2516-782e98ab3fa0</uuid>"));
}

static void test_disks_example(void)
{
    g_autofree char *xml = read_example("disks.xml");
    g_autoptr(snapshot_def) def = parse_ok(xml);
    g_assert_true(def->disks_given);
    g_assert_cmpuint(def->n_disks, ==, 2);
    g_assert_cmpstr(def->disks[0].name, ==, "vda");
    g_assert_true(def->disks[0].external);
    g_assert_cmpstr(def->disks[0].file, ==, "/var/lib/vsnap/snapshots/rooted/installed/disk-vda.layer");
    g_assert_cmpstr(def->disks[1].name, ==, "vdb");
    g_assert_false(def->disks[1].external);
    g_assert_null(def->disks[1].file);
    g_autofree char *formatted = check_round_trip(xml);
    g_assert_nonnull(strstr(formatted, "    <disk name='vdb' snapshot='no'/>\n"));
    /* What snapshot-create-as --diskspec vda,snapshot=external sends: no file. */
    g_autoptr(snapshot_def) spec =
        parse_ok("<domainsnapshot><disks><disk name='vda' snapshot='external'/></disks></domainsnapshot>");
    g_assert_true(spec->disks[0].external);
    g_assert_null(spec->disks[0].file);
    g_autofree char *again = check_round_trip("<domainsnapshot><disks><disk name='vda'/></disks></domainsnapshot>");
    g_assert_nonnull(strstr(again, "<disk name='vda' snapshot='external' type='file'/>"));
}

static void test_create_defaults(void)
{
    g_autofree char *xml = read_example("create.xml");
    gint64 before = g_get_real_time() / G_USEC_PER_SEC;
    g_autoptr(snapshot_def) def = parse_ok(xml);
    gint64 after = g_get_real_time() / G_USEC_PER_SEC;
    g_assert_cmpstr(def->name, ==, "base");
    g_assert_cmpint(def->creation_time, >=, before);
    g_assert_cmpint(def->creation_time, <=, after);
    g_assert_false(def->state_set);
    g_assert_null(def->parent);
    g_assert_null(def->domain);
    g_assert_cmpint(def->memory, ==, SNAPSHOT_MEMORY_DEFAULT);
    g_autofree char *formatted = check_round_trip(xml);

    /* No name: named after its creation time, as libvirt does. */
    g_autoptr(snapshot_def) unnamed = parse_ok("<domainsnapshot><creationTime>1234</creationTime></domainsnapshot>");
    g_assert_cmpstr(unnamed->name, ==, "1234");
    g_autoptr(snapshot_def) empty = parse_ok("<domainsnapshot/>");
    g_assert_cmpint(g_ascii_strtoll(empty->name, NULL, 10), ==, empty->creation_time);
}

static void test_variations(void)
{
    static const char *const variations[] = {
        "<domainsnapshot><name>s</name><state>shutoff</state><memory snapshot='no'/></domainsnapshot>",
        "<domainsnapshot><name>s</name><state>paused</state><description>a &amp; b\n c</description>"
        "</domainsnapshot>",
        "<domainsnapshot><name>s</name><state>disk-snapshot</state><parent><name>p q</name></parent>"
        "</domainsnapshot>",
        "<domainsnapshot><name>s</name><state>running</state><cookie><vsnap:store xmlns:vsnap='urn:vsnap:snapshot:1' "
        "url='http://h/p?a&amp;b' id='0d6f1c0a-7b3e-4c5d-9e8f-7a6b5c4d3e2f' parent='1d6f1c0a-7b3e-4c5d-9e8f-7a6b5c4d3e2f'/>"
        "</cookie></domainsnapshot>",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(variations); i++) {
        g_autofree char *formatted = check_round_trip(variations[i]);
    }
}

static void check_refusal(const char *xml, int code, const char *part)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(snapshot_def) def = snapshot_def_parse_string(xml, schema_dir, &error);
    if (def)
        g_error("accepted, expected a refusal with '%s':\n%s", part, xml);
    if (error->domain != VSNAP_VIR_ERROR || error->code != code || !strstr(error->message, part))
        g_error("expected %d '%s', got %d '%s' for:\n%s", code, part, error->code, error->message, xml);
}

static void test_refusals(void)
{
    static const struct {
        const char *xml;
        int code;
        const char *part;
    } refusals[] = {
        {"<domainsnapshot><disks><disk name='vda' snapshot='internal'/></disks></domainsnapshot>",
         VIR_ERR_CONFIG_UNSUPPORTED, "<disk name='vda' snapshot='internal'>"},
        {"<domainsnapshot><disks><disk name='vda' type='block'/></disks></domainsnapshot>",
         VIR_ERR_CONFIG_UNSUPPORTED, "<disk name='vda' type='block'>"},
        {"<domainsnapshot><disks><disk name='vda' snapshot='no'><source file='/x'/></disk></disks></domainsnapshot>",
         VIR_ERR_CONFIG_UNSUPPORTED, "<source>"},
        {"<domainsnapshot><disks><disk name='vda'><driver type='qcow2'/></disk></disks></domainsnapshot>",
         VIR_ERR_CONFIG_UNSUPPORTED, "<driver>"},
        {"<domainsnapshot><disks><disk name='vda'><source file='x'/></disk></disks></domainsnapshot>",
         VIR_ERR_XML_DETAIL, "absolute path"},
        {"<domainsnapshot><disks><disk name='vda'/><disk name='vda'/></disks></domainsnapshot>",
         VIR_ERR_XML_ERROR, "'vda' is named twice"},
        {"<domainsnapshot><disks><disk/></disks></domainsnapshot>", VIR_ERR_XML_ERROR, "needs a name"},
        {"<domainsnapshot><memory snapshot='external' file='/x'/></domainsnapshot>", VIR_ERR_CONFIG_UNSUPPORTED, "file='/x'"},
        {"<domainsnapshot><memory snapshot='external'/></domainsnapshot>", VIR_ERR_CONFIG_UNSUPPORTED, "'external'"},
        {"<domainsnapshot><cookie><cpu mode='custom'/></cookie></domainsnapshot>", VIR_ERR_CONFIG_UNSUPPORTED,
         "unsupported element <cpu> in <cookie>"},
        {"<domainsnapshot><cookie><v:store xmlns:v='urn:vsnap:snapshot:1' url='s3://b/p' id='x'/></cookie>"
         "</domainsnapshot>", VIR_ERR_XML_DETAIL, "id='x'"},
        {"<domainsnapshot><cookie><v:store xmlns:v='urn:vsnap:snapshot:1' id='0d6f1c0a-7b3e-4c5d-9e8f-7a6b5c4d3e2f'/>"
         "</cookie></domainsnapshot>", VIR_ERR_XML_DETAIL, "needs url and id"},
        {"<domainsnapshot><cookie><v:store xmlns:v='urn:vsnap:snapshot:1' url='s3://b/p' id='0d6f1c0a-7b3e-4c5d-9e8f-7a6b5c4d3e2f' size='1'/>"
         "</cookie></domainsnapshot>", VIR_ERR_CONFIG_UNSUPPORTED, "size='1'"},
        {"<domainsnapshot><cookie><v:store xmlns:v='urn:vsnap:snapshot:1' url='ftp://h/p' id='0d6f1c0a-7b3e-4c5d-9e8f-7a6b5c4d3e2f'/>"
         "</cookie></domainsnapshot>", VIR_ERR_XML_DETAIL, "ftp://h/p: not a store URL (unknown scheme"},
        {"<domainsnapshot><cookie><v:store xmlns:v='urn:vsnap:snapshot:1' url='http://u:pw@h/p' id='0d6f1c0a-7b3e-4c5d-9e8f-7a6b5c4d3e2f'/>"
         "</cookie></domainsnapshot>", VIR_ERR_XML_DETAIL, "<vsnap:store url> in the snapshot's <cookie>: http://***@h/p"},
        {"<domainsnapshot><inactiveDomain type='kvm'/></domainsnapshot>", VIR_ERR_CONFIG_UNSUPPORTED, "<inactiveDomain>"},
        {"<domainsnapshot><state>sleeping</state></domainsnapshot>", VIR_ERR_XML_DETAIL, "'sleeping'"},
        {"<domainsnapshot><parent/></domainsnapshot>", VIR_ERR_XML_ERROR, "missing <name> in snapshot <parent>"},
        {"<domainsnapshot><parent><uuid/></parent></domainsnapshot>", VIR_ERR_CONFIG_UNSUPPORTED, "<uuid> in <parent>"},
        {"<domainsnapshot><name>a</name><name>b</name></domainsnapshot>", VIR_ERR_XML_ERROR, "more than once"},
        {"<domainsnapshot><name>a/b</name></domainsnapshot>", VIR_ERR_XML_DETAIL, "'a/b'"},
        {"<domainsnapshot><name></name></domainsnapshot>", VIR_ERR_XML_DETAIL, "must not be empty"},
        {"<domainsnapshot><creationTime>-5</creationTime></domainsnapshot>", VIR_ERR_XML_DETAIL, "creationTime"},
        {"<domainsnapshot type='x'/>", VIR_ERR_CONFIG_UNSUPPORTED, "type='x'"},
        {"<snapshot/>", VIR_ERR_XML_ERROR, "expected root element <domainsnapshot>"},
        {"<domainsnapshot><name>x</name>", VIR_ERR_XML_ERROR, "line 1"},
        {"<domainsnapshot><domain type='kvm'><name>d</name><memory>65536</memory><os><type>hvm</type>"
         "<kernel>/k</kernel></os><devices><graphics type='vnc'/></devices></domain></domainsnapshot>",
         VIR_ERR_CONFIG_UNSUPPORTED, "in the snapshot's <domain>: unsupported element <graphics> in <devices>"},
        {"<domainsnapshot><domain type='qemu'/></domainsnapshot>", VIR_ERR_CONFIG_UNSUPPORTED, "domain type 'qemu'"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(refusals); i++)
        check_refusal(refusals[i].xml, refusals[i].code, refusals[i].part);
}

/* The embedded domain may use namespaces declared on <domainsnapshot>. */
static void test_embedded_domain_namespaces(void)
{
    static const char xml[] =
        "<domainsnapshot xmlns:a='urn:a' xmlns:vsnap='urn:vsnap:domain:1'><name>s</name>"
        "<domain type='kvm'><name>d</name><metadata><a:x>kept</a:x>"
        "<vsnap:vsnap><vsnap:restore mode='copy'/></vsnap:vsnap></metadata>"
        "<memory>65536</memory><os><type>hvm</type><kernel>/k</kernel></os></domain></domainsnapshot>";
    g_autoptr(snapshot_def) def = parse_ok(xml);
    g_assert_cmpint(def->domain->vsnap.restore_mode, ==, RESTORE_MODE_COPY);
    g_assert_nonnull(strstr(def->domain->foreign_metadata, "kept"));
    g_autofree char *formatted = check_round_trip(xml);
}

static void test_libvirt_schema_present(void)
{
    if (!g_file_test(LIBVIRT_SCHEMAS "/domainsnapshot.rng", G_FILE_TEST_EXISTS))
        g_test_skip("libvirt's schemas are not installed (package libvirt0)");
}

int main(int argc, char **argv)
{
    conf_test_init(&argc, &argv, &schema_dir, &examples_dir);
    g_test_add_func("/conf/snapshot/libvirt-schema-present", test_libvirt_schema_present);
    g_test_add_func("/conf/snapshot/redefine-example", test_redefine_example);
    g_test_add_func("/conf/snapshot/create-defaults", test_create_defaults);
    g_test_add_func("/conf/snapshot/disks-example", test_disks_example);
    g_test_add_func("/conf/snapshot/variations", test_variations);
    g_test_add_func("/conf/snapshot/refusals", test_refusals);
    g_test_add_func("/conf/snapshot/embedded-domain-namespaces", test_embedded_domain_namespaces);
    return g_test_run();
}
