/* Unit tests of <disk> in plugin/conf: what is accepted and how it formats
 * back (inactive and live, with a backing chain), every refusal with its
 * libvirt error code, and the VmConfig "disks" the shim gets. */
#include <json-glib/json-glib.h>
#include <string.h>

#include "conf-test.h"
#include "conf/domain-conf.h"

static const char *schema_dir;
static const char *examples_dir;

static struct domain_def *parse_ok(const char *xml)
{
    g_autoptr(GError) error = NULL;
    struct domain_def *def = domain_def_parse_string(xml, schema_dir, &error);
    if (!def)
        g_error("unexpected parse failure: %s\n--- XML ---\n%s", error->message, xml);
    return def;
}

static char *domain_with_devices(const char *devices)
{
    return g_strdup_printf("<domain type='kvm'>\n"
                           "  <name>t</name>\n"
                           "  <memory unit='MiB'>64</memory>\n"
                           "  <os><type>hvm</type><kernel>/boot/vmlinux</kernel></os>\n"
                           "  <devices>%s</devices>\n"
                           "</domain>\n",
                           devices);
}

static struct domain_def *parse_devices(const char *devices)
{
    g_autofree char *xml = domain_with_devices(devices);
    return parse_ok(xml);
}

static bool have_libvirt_schemas(void)
{
    return g_file_test(LIBVIRT_SCHEMAS "/domain.rng", G_FILE_TEST_EXISTS);
}

static void test_example(void)
{
    g_autofree char *xml = conf_test_read(examples_dir, "disks.xml", NULL);
    g_autoptr(domain_def) def = parse_ok(xml);
    g_assert_cmpuint(def->n_disks, ==, 3);
    const struct domain_disk *root = &def->disks[0], *data = &def->disks[1], *scratch = &def->disks[2];
    g_assert_cmpstr(root->target, ==, "vda");
    g_assert_cmpstr(root->path, ==, "/var/lib/vsnap/images/rooted-root.img");
    g_assert_false(root->is_block);
    g_assert_false(root->readonly);
    g_assert_null(root->serial);
    g_assert_null(root->chain);
    g_assert_cmpint(root->driver, ==, DOMAIN_DISK_DRIVER_VSNAP);
    g_assert_cmpstr(data->target, ==, "vdb");
    g_assert_cmpstr(data->path, ==, "/dev/disk/by-id/dm-name-vg0-data");
    g_assert_true(data->is_block);
    g_assert_true(data->readonly);
    g_assert_cmpstr(data->serial, ==, "data-2024");
    g_assert_cmpstr(scratch->target, ==, "vdc");
    g_assert_cmpint(scratch->driver, ==, DOMAIN_DISK_DRIVER_QEMU);

    g_assert_true(domain_def_find_disk(def, "vdb") == data);
    g_assert_true(domain_def_find_disk(def, "/var/lib/vsnap/images/rooted-root.img") == root);
    g_assert_null(domain_def_find_disk(def, "vdd"));
}

/* Defaults are written out; the driver name is kept as written. */
static void test_format(void)
{
    g_autoptr(domain_def) def = parse_devices(
        "<disk><source file='/i/a &amp; b.img'/><target dev='vdb'/></disk>"
        "<disk type='block' device='disk'><driver name='qemu'/><source dev='/dev/sdx'/>"
        "<target dev='vda' bus='virtio'/><serial>S 1.2+x_y-z</serial><readonly/></disk>"
        "<disk><driver type='raw'/><source file='/i/c.img'/><target dev='vdaa'/></disk>");
    g_autofree char *xml = domain_def_format(def, false, -1);
    const char *expected =
        "    <disk type='file' device='disk'>\n"
        "      <driver name='vsnap' type='raw'/>\n"
        "      <source file='/i/a &amp; b.img'/>\n"
        "      <target dev='vdb' bus='virtio'/>\n"
        "    </disk>\n"
        "    <disk type='block' device='disk'>\n"
        "      <driver name='qemu' type='raw'/>\n"
        "      <source dev='/dev/sdx'/>\n"
        "      <target dev='vda' bus='virtio'/>\n"
        "      <readonly/>\n"
        "      <serial>S 1.2+x_y-z</serial>\n"
        "    </disk>\n"
        "    <disk type='file' device='disk'>\n"
        "      <driver name='vsnap' type='raw'/>\n"
        "      <source file='/i/c.img'/>\n"
        "      <target dev='vdaa' bus='virtio'/>\n"
        "    </disk>\n";
    if (!strstr(xml, expected))
        g_error("disks not formatted as expected:\n%s", xml);
    /* Definition order is kept: it is the order the guest sees. */
    g_autoptr(domain_def) again = parse_ok(xml);
    g_autofree char *twice = domain_def_format(again, false, -1);
    g_assert_cmpstr(xml, ==, twice);
    g_assert_cmpstr(again->disks[0].target, ==, "vdb");
    g_assert_cmpstr(again->disks[1].target, ==, "vda");
    g_assert_cmpstr(again->disks[0].path, ==, "/i/a & b.img");
    if (have_libvirt_schemas())
        conf_test_check_libvirt_schema(xml, "domain", "domain.rng");
}

static const char *const chain[] = {"/run/vsnap/t/vda.overlay", "/var/lib/vsnap/snap/s2/vda.layer",
                                    "/var/lib/vsnap/snap/s1/vda.layer", NULL};

/* The chain as libvirt shows external snapshots: the overlay as <source>,
 * a <backingStore> per layer down to the image, and the end marker. */
static void test_live_chain(void)
{
    g_autoptr(domain_def) def = parse_devices(
        "<disk type='block'><source dev='/dev/vg/root'/><target dev='vda'/></disk>"
        "<disk><source file='/i/b.img'/><target dev='vdb'/><readonly/></disk>");
    g_autofree char *inactive_before = domain_def_format(def, false, -1);
    domain_disk_set_chain(&def->disks[0], chain);
    g_autofree char *live = domain_def_format(def, true, 4);
    const char *expected =
        "    <disk type='file' device='disk'>\n"
        "      <driver name='vsnap' type='raw'/>\n"
        "      <source file='/run/vsnap/t/vda.overlay'/>\n"
        "      <backingStore type='file'>\n"
        "        <format type='raw'/>\n"
        "        <source file='/var/lib/vsnap/snap/s2/vda.layer'/>\n"
        "        <backingStore type='file'>\n"
        "          <format type='raw'/>\n"
        "          <source file='/var/lib/vsnap/snap/s1/vda.layer'/>\n"
        "          <backingStore type='block'>\n"
        "            <format type='raw'/>\n"
        "            <source dev='/dev/vg/root'/>\n"
        "            <backingStore/>\n"
        "          </backingStore>\n"
        "        </backingStore>\n"
        "      </backingStore>\n"
        "      <target dev='vda' bus='virtio'/>\n"
        "    </disk>\n"
        "    <disk type='file' device='disk'>\n"
        "      <driver name='vsnap' type='raw'/>\n"
        "      <source file='/i/b.img'/>\n"
        "      <backingStore/>\n"
        "      <target dev='vdb' bus='virtio'/>\n"
        "      <readonly/>\n"
        "    </disk>\n";
    if (!strstr(live, expected))
        g_error("live chain not formatted as expected:\n%s", live);
    /* The inactive XML stays the user's definition. */
    g_autofree char *inactive = domain_def_format(def, false, -1);
    g_assert_cmpstr(inactive, ==, inactive_before);
    g_assert_null(strstr(inactive, "backingStore"));

    /* Live XML parses back (the daemon's status file) to the same chain;
     * as a definition it is refused: the chain is not the user's to give. */
    g_autoptr(GError) error = NULL;
    g_autoptr(domain_def) refused = domain_def_parse_string(live, schema_dir, &error);
    g_assert_null(refused);
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED);
    g_assert_nonnull(strstr(error->message, "disk 'vda': a <backingStore> chain is not supported in a definition"));
    g_clear_error(&error);
    g_autoptr(domain_def) reparsed = domain_def_parse_live_string(live, schema_dir, &error);
    g_assert_no_error(error);
    const struct domain_disk *disk = &reparsed->disks[0];
    g_assert_cmpstr(disk->path, ==, "/dev/vg/root");
    g_assert_true(disk->is_block);
    g_assert_cmpuint(g_strv_length(disk->chain), ==, 3);
    for (int i = 0; chain[i]; i++)
        g_assert_cmpstr(disk->chain[i], ==, chain[i]);
    g_assert_null(reparsed->disks[1].chain);
    g_autofree char *live_again = domain_def_format(reparsed, true, 4);
    g_assert_cmpstr(live, ==, live_again);
    g_autofree char *inactive_again = domain_def_format(reparsed, false, -1);
    g_assert_cmpstr(inactive_again, ==, inactive_before);
    if (have_libvirt_schemas())
        conf_test_check_libvirt_schema(live, "domain", "domain.rng");

    /* A chain of one layer: the overlay right over the image. */
    const char *const one[] = {"/run/o", NULL};
    domain_disk_set_chain(&def->disks[1], one);
    g_autofree char *live_one = domain_def_format(def, true, 4);
    g_assert_nonnull(strstr(live_one, "      <source file='/run/o'/>\n"
                                      "      <backingStore type='file'>\n"
                                      "        <format type='raw'/>\n"
                                      "        <source file='/i/b.img'/>\n"
                                      "        <backingStore/>\n"
                                      "      </backingStore>\n"
                                      "      <target dev='vdb' bus='virtio'/>\n"));
    domain_disk_set_chain(&def->disks[1], (const char *const[]){NULL});
    g_assert_null(def->disks[1].chain);
}

/* The live example: what the daemon keeps as status reads back whole. */
static void test_live_example(void)
{
    g_autofree char *xml = conf_test_read(examples_dir, "live", "disk-chain.xml", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(domain_def) def = domain_def_parse_live_string(xml, schema_dir, &error);
    g_assert_no_error(error);
    const struct domain_disk *vda = &def->disks[0];
    g_assert_cmpstr(vda->path, ==, "/var/lib/vsnap/images/rooted-root.img");
    g_assert_false(vda->is_block);
    g_assert_cmpuint(g_strv_length(vda->chain), ==, 3);
    g_assert_cmpstr(vda->chain[0], ==, "/var/lib/vsnap/disks/rooted/vda-5f0c1e2d3a4b6c7d.overlay");
    g_assert_cmpstr(vda->chain[2], ==, "/var/lib/vsnap/snapshots/rooted/16fd2706-8baf-433b-82eb-8c7fada847da/disk-vda.layer");
    g_assert_null(def->disks[1].chain);
    g_assert_true(def->disks[1].is_block);
    g_autofree char *live = domain_def_format(def, true, 3);
    g_autoptr(domain_def) again = domain_def_parse_live_string(live, schema_dir, &error);
    g_assert_no_error(error);
    g_autofree char *live_again = domain_def_format(again, true, 3);
    g_assert_cmpstr(live, ==, live_again);
    g_assert_nonnull(strstr(live, "<source file='/var/lib/vsnap/disks/rooted/vda-5f0c1e2d3a4b6c7d.overlay'/>"));
    g_autoptr(domain_def) as_definition = domain_def_parse_string(xml, schema_dir, &error);
    g_assert_null(as_definition);
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED);
}

/* Live dumpxml of a domain without snapshots defines as it is. */
static void test_chain_end_in_definition(void)
{
    g_autoptr(domain_def) def = parse_devices(
        "<disk><source file='/i/a.img'/><backingStore/><target dev='vda'/></disk>"
        "<disk type='block'><source dev='/dev/b'/><backingStore/><target dev='vdb'/></disk>");
    g_assert_null(def->disks[0].chain);
    g_assert_null(def->disks[1].chain);
    g_assert_cmpstr(def->disks[1].path, ==, "/dev/b");
}

static void test_copy(void)
{
    g_autofree char *xml = conf_test_read(examples_dir, "disks.xml", NULL);
    g_autoptr(domain_def) def = parse_ok(xml);
    domain_disk_set_chain(&def->disks[0], chain);
    g_autoptr(domain_def) copy = domain_def_copy(def);
    g_assert_cmpuint(copy->n_disks, ==, 3);
    g_assert_true(copy->disks != def->disks);
    g_assert_true(copy->disks[0].chain != def->disks[0].chain);
    g_assert_true(copy->disks[1].serial != def->disks[1].serial);
    g_autofree char *a = domain_def_format(def, true, 1);
    g_autofree char *b = domain_def_format(copy, true, 1);
    g_assert_cmpstr(a, ==, b);
}

/* libvirt-tck's disk (<driver name='qemu' type='raw' cache='none'/>) and
 * every mode libvirt's QEMU driver takes: kept, shown back exactly, valid
 * by libvirt's own schema, and turned into the shim's DiskConfig fields. */
static const char *const driver_modes_xml =
    "    <disk type='file' device='disk'>\n"
    "      <driver name='qemu' type='raw' cache='none'/>\n"
    "      <source file='/i/tck.img'/>\n"
    "      <target dev='vda' bus='virtio'/>\n"
    "      <boot order='1'/>\n"
    "      <address type='virtio-mmio'/>\n"
    "    </disk>\n"
    "    <disk type='file' device='disk'>\n"
    "      <driver name='vsnap' type='raw' cache='directsync' io='io_uring' discard='unmap' detect_zeroes='unmap'/>\n"
    "      <source file='/i/b.img'/>\n"
    "      <target dev='vdb' bus='virtio'/>\n"
    "      <boot order='2'/>\n"
    "    </disk>\n"
    "    <disk type='file' device='disk'>\n"
    "      <driver name='vsnap' type='raw' cache='unsafe' io='threads' discard='ignore' detect_zeroes='unmap'/>\n"
    "      <source file='/i/c.img'/>\n"
    "      <target dev='vdc' bus='virtio'/>\n"
    "    </disk>\n"
    "    <disk type='file' device='disk'>\n"
    "      <driver name='vsnap' type='raw' cache='writethrough' io='native' detect_zeroes='on'/>\n"
    "      <source file='/i/d.img'/>\n"
    "      <target dev='vdd' bus='virtio'/>\n"
    "    </disk>\n"
    "    <disk type='file' device='disk'>\n"
    "      <driver name='vsnap' type='raw' cache='default' detect_zeroes='off'/>\n"
    "      <source file='/i/e.img'/>\n"
    "      <target dev='vde' bus='virtio'/>\n"
    "    </disk>\n"
    "    <disk type='file' device='disk'>\n"
    "      <driver name='vsnap' type='raw' cache='writeback'/>\n"
    "      <source file='/i/f.img'/>\n"
    "      <target dev='vdf' bus='virtio'/>\n"
    "    </disk>\n";

static void test_driver_modes(void)
{
    g_autoptr(domain_def) def = parse_devices(driver_modes_xml);
    g_assert_cmpint(def->disks[0].cache, ==, DOMAIN_DISK_CACHE_NONE);
    g_assert_cmpuint(def->disks[0].boot_order, ==, 1);
    g_assert_true(def->disks[0].address_mmio);
    g_assert_cmpint(def->disks[1].io, ==, DOMAIN_DISK_IO_URING);
    for (int live = 0; live <= 1; live++) {
        g_autofree char *xml = domain_def_format(def, live, live ? 3 : -1);
        if (!live && !strstr(xml, driver_modes_xml))
            g_error("driver modes not shown back as given:\n%s", xml);
        if (have_libvirt_schemas())
            conf_test_check_libvirt_schema(xml, "domain", "domain.rng");
    }
    g_autoptr(GError) error = NULL;
    g_autofree char *json = domain_def_to_vm_config_json(def, NULL, NULL, &error);
    g_assert_no_error(error);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_assert_true(json_parser_load_from_data(parser, json, -1, NULL));
    JsonArray *disks = json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)), "disks");
    /* Per disk: direct, write_through, ignore_flush, sparse (-1: not sent), discard_unmap, detect_zeroes. */
    static const struct {
        int direct, write_through, ignore_flush, sparse, discard_unmap;
        const char *detect_zeroes;
    } expected[] = {
        {1, -1, -1, -1, -1, NULL},   /* none */
        {1, 1, -1, 1, 1, "unmap"},   /* directsync, discard unmap */
        {-1, -1, 1, 0, -1, "on"},    /* unsafe; unmap without discard='unmap' is on, as libvirt has it */
        {-1, 1, -1, -1, -1, "on"},   /* writethrough */
        {-1, -1, -1, -1, -1, "off"}, /* default */
        {-1, -1, -1, -1, -1, NULL},  /* writeback */
    };
    const char *const names[] = {"direct", "vsnap_write_through", "vsnap_ignore_flush", "sparse",
                                 "vsnap_discard_unmap"};
    for (guint i = 0; i < G_N_ELEMENTS(expected); i++) {
        JsonObject *d = json_array_get_object_element(disks, i);
        const int want[] = {expected[i].direct, expected[i].write_through, expected[i].ignore_flush,
                            expected[i].sparse, expected[i].discard_unmap};
        for (guint f = 0; f < G_N_ELEMENTS(names); f++) {
            int got = json_object_has_member(d, names[f]) ? json_object_get_boolean_member(d, names[f]) : -1;
            if (got != want[f])
                g_error("disk %u: %s is %d, expected %d", i, names[f], got, want[f]);
        }
        const char *dz = json_object_has_member(d, "vsnap_detect_zeroes")
                             ? json_object_get_string_member(d, "vsnap_detect_zeroes") : NULL;
        g_assert_cmpstr(dz, ==, expected[i].detect_zeroes);
        /* io='io_uring' (disk 1) reaches the shim; native and threads are its default */
        const char *io = json_object_has_member(d, "vsnap_io") ? json_object_get_string_member(d, "vsnap_io") : NULL;
        g_assert_cmpstr(io, ==, i == 1 ? "io_uring" : NULL);
    }
}

/* Refused as live XML, where a disk may have a chain (so as a definition too). */
static void check_refusal(const char *devices, int code, const char *message_part)
{
    g_autofree char *xml = domain_with_devices(devices);
    g_autoptr(GError) error = NULL;
    g_autoptr(domain_def) def = domain_def_parse_live_string(xml, schema_dir, &error);
    if (def)
        g_error("accepted, expected a refusal containing '%s':\n%s", message_part, xml);
    g_assert_true(error->domain == VSNAP_VIR_ERROR);
    if (error->code != code || !strstr(error->message, message_part))
        g_error("expected code %d with '%s', got %d '%s' for:\n%s", code, message_part, error->code,
                error->message, xml);
}

#define DISK(inner) "<disk type='file' device='disk'>" inner "</disk>"
#define SRC "<source file='/i/a.img'/>"
#define TGT "<target dev='vda'/>"

static void test_refusals(void)
{
    static const struct {
        const char *devices;
        int code;
        const char *message_part;
    } refusals[] = {
        {DISK("<driver name='qemu' type='qcow2'/>" SRC TGT), VIR_ERR_CONFIG_UNSUPPORTED, "qemu-img convert -O raw"},
        {DISK("<driver type='qcow2'/>" SRC TGT), VIR_ERR_CONFIG_UNSUPPORTED, "image format 'qcow2' is not supported"},
        {DISK("<driver type='vmdk'/>" SRC TGT), VIR_ERR_CONFIG_UNSUPPORTED, "image format 'vmdk'"},
        {DISK("<driver name='phy'/>" SRC TGT), VIR_ERR_CONFIG_UNSUPPORTED, "<driver name='phy'>"},
        {DISK("<driver name='vsnap' cache='bogus'/>" SRC TGT), VIR_ERR_CONFIG_UNSUPPORTED,
         "<driver cache='bogus'> is not supported by vsnap: use 'default', 'none', 'writethrough'"},
        {DISK("<driver io='aio'/>" SRC TGT), VIR_ERR_CONFIG_UNSUPPORTED, "use 'native', 'threads', 'io_uring'"},
        {DISK("<driver discard='on'/>" SRC TGT), VIR_ERR_CONFIG_UNSUPPORTED, "use 'unmap', 'ignore'"},
        {DISK("<driver detect_zeroes='yes'/>" SRC TGT), VIR_ERR_CONFIG_UNSUPPORTED, "use 'off', 'on', 'unmap'"},
        {DISK("<driver error_policy='stop'/>" SRC TGT), VIR_ERR_CONFIG_UNSUPPORTED, "error_policy='stop'"},
        {"<disk type='file' device='cdrom'>" SRC TGT "</disk>", VIR_ERR_CONFIG_UNSUPPORTED, "<disk device='cdrom'>"},
        {"<disk type='file' device='floppy'>" SRC TGT "</disk>", VIR_ERR_CONFIG_UNSUPPORTED, "<disk device='floppy'>"},
        {"<disk type='block' device='lun'><source dev='/dev/sda'/>" TGT "</disk>", VIR_ERR_CONFIG_UNSUPPORTED, "device='lun'"},
        {"<disk type='network'><source protocol='nbd' name='x'/>" TGT "</disk>", VIR_ERR_CONFIG_UNSUPPORTED, "<disk type='network'>"},
        {"<disk type='volume'><source pool='p' volume='v'/>" TGT "</disk>", VIR_ERR_CONFIG_UNSUPPORTED, "<disk type='volume'>"},
        {"<disk type='dir'><source dir='/d'/>" TGT "</disk>", VIR_ERR_CONFIG_UNSUPPORTED, "<disk type='dir'>"},
        {DISK(SRC "<target dev='sda' bus='sata'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "disk <target dev='sda' bus='sata'> is not supported"},
        {DISK(SRC "<target dev='hda' bus='ide'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "disk <target dev='hda' bus='ide'> is not supported by vsnap: its disks are virtio-blk only; set the disk's bus to virtio"},
        {DISK(SRC "<target bus='sata'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "disk <target bus='sata'> is not supported"},
        {DISK(SRC "<target dev='sda' bus='scsi'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "<target dev='sda' bus='scsi'>"},
        {DISK(SRC "<target dev='sda' bus='usb'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "<target dev='sda' bus='usb'>"},
        {DISK(SRC "<target dev='sda'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "<target dev='sda'>"},
        {DISK(SRC "<target dev='vd1'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "<target dev='vd1'>"},
        {DISK(SRC "<target dev='vd'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "<target dev='vd'>"},
        {DISK(SRC "<target dev='vda' removable='on'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "removable='on'"},
        {DISK(SRC "<target bus='virtio'/>"), VIR_ERR_XML_ERROR, "no dev attribute"},
        {DISK(SRC), VIR_ERR_XML_ERROR, "needs <target dev='vdX'/>"},
        {DISK(TGT), VIR_ERR_XML_ERROR, "needs <source file="},
        {"<disk type='block'>" TGT "</disk>", VIR_ERR_XML_ERROR, "needs <source dev="},
        {DISK("<source/>" TGT), VIR_ERR_XML_ERROR, "<source> needs file="},
        {DISK("<source dev='/dev/sda'/>" TGT), VIR_ERR_CONFIG_UNSUPPORTED, "dev='/dev/sda' on <source>"},
        {DISK("<source file='a.img'/>" TGT), VIR_ERR_XML_DETAIL, "absolute path"},
        {DISK("<source file='/i/a.img'><seclabel relabel='no'/></source>" TGT), VIR_ERR_CONFIG_UNSUPPORTED, "<seclabel> in <source>"},
        {DISK(SRC TGT "<shareable/>"), VIR_ERR_CONFIG_UNSUPPORTED, "<shareable/> disks are not supported"},
        {DISK(SRC TGT "<transient/>"), VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <transient> in <disk>"},
        {DISK(SRC TGT "<boot order='0'/>"), VIR_ERR_XML_DETAIL, "boot order"},
        {DISK(SRC TGT "<boot/>"), VIR_ERR_XML_ERROR, "the order attribute is missing"},
        {DISK(SRC TGT "<boot order='1' loadparm='x'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "loadparm='x'"},
        {DISK(SRC TGT "<boot order='2'/>") DISK("<source file='/i/b.img'/><target dev='vdb'/><boot order='2'/>"),
         VIR_ERR_XML_ERROR, "boot order 2 is used by two disks ('vda' and 'vdb')"},
        {DISK(SRC TGT "<address type='pci' domain='0x0000' bus='0x00' slot='0x04' function='0x0'/>"),
         VIR_ERR_CONFIG_UNSUPPORTED, "<address type='pci'> is not supported by vsnap: its machine has no pci bus"},
        {DISK(SRC TGT "<address type='drive' controller='0' bus='0' target='0' unit='0'/>"),
         VIR_ERR_CONFIG_UNSUPPORTED, "<address type='drive'>"},
        {DISK(SRC TGT "<address type='virtio-mmio' slot='1'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "slot='1'"},
        {DISK(SRC TGT "<iotune><total_bytes_sec>1</total_bytes_sec></iotune>"), VIR_ERR_CONFIG_UNSUPPORTED, "<iotune>"},
        {DISK(SRC TGT "<readonly/><readonly/>"), VIR_ERR_XML_ERROR, "<readonly> appears more than once"},
        {DISK(SRC SRC TGT), VIR_ERR_XML_ERROR, "<source> appears more than once"},
        {DISK(SRC TGT "<readonly x='1'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "x='1' on <readonly>"},
        {"<disk type='file' snapshot='external'>" SRC TGT "</disk>", VIR_ERR_CONFIG_UNSUPPORTED, "snapshot='external'"},
        {DISK(SRC TGT "<serial>a/b</serial>"), VIR_ERR_XML_DETAIL, "<serial> must be"},
        {DISK(SRC TGT "<serial></serial>"), VIR_ERR_XML_DETAIL, "<serial> must be"},
        {DISK(SRC TGT "<serial>123456789012345678901</serial>"), VIR_ERR_CONFIG_UNSUPPORTED, "longer than the 20 bytes"},
        {DISK(SRC TGT) DISK("<source file='/i/b.img'/>" TGT), VIR_ERR_XML_ERROR, "disk target 'vda' is used twice"},
        {DISK(SRC TGT) DISK(SRC "<target dev='vdb'/>"), VIR_ERR_CONFIG_UNSUPPORTED, "is the image of two disks ('vda' and 'vdb')"},
        /* Backing chains: raw layers that are files above the image. */
        {DISK(SRC "<backingStore type='file'><format type='qcow2'/><source file='/b'/></backingStore>" TGT),
         VIR_ERR_CONFIG_UNSUPPORTED, "image format 'qcow2'"},
        {DISK(SRC "<backingStore type='file'><source file='/b'/></backingStore>" TGT), VIR_ERR_XML_ERROR,
         "needs <format type='raw'>"},
        {DISK(SRC "<backingStore type='file'><format type='raw'/></backingStore>" TGT), VIR_ERR_XML_ERROR,
         "needs <source>"},
        {DISK(SRC "<backingStore type='network'><format type='raw'/><source protocol='nbd'/></backingStore>" TGT),
         VIR_ERR_CONFIG_UNSUPPORTED, "<backingStore type='network'>"},
        {DISK(SRC "<backingStore type='file' index='1'><format type='raw'/><source file='/b'/></backingStore>" TGT),
         VIR_ERR_CONFIG_UNSUPPORTED, "index='1'"},
        {"<disk type='block'><source dev='/dev/o'/><backingStore type='file'><format type='raw'/>"
         "<source file='/b'/></backingStore>" TGT "</disk>",
         VIR_ERR_CONFIG_UNSUPPORTED, "only the bottom of a backing chain"},
        {DISK(SRC "<backingStore type='block'><format type='raw'/><source dev='/dev/b'/><backingStore type='file'>"
                  "<format type='raw'/><source file='/c'/></backingStore></backingStore>" TGT),
         VIR_ERR_CONFIG_UNSUPPORTED, "only the bottom of a backing chain"},
        {DISK(SRC "<backingStore type='file'><format type='raw'/><source file='/b'/><mirror/></backingStore>" TGT),
         VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <mirror> in <backingStore>"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(refusals); i++)
        check_refusal(refusals[i].devices, refusals[i].code, refusals[i].message_part);
}

/* A chain longer than vsnap keeps is refused, not walked without end. */
static void test_chain_limit(void)
{
    g_autoptr(GString) devices = g_string_new("<disk><source file='/top'/>");
    for (int i = 0; i < 220; i++)
        g_string_append_printf(devices, "<backingStore type='file'><format type='raw'/><source file='/l%d'/>", i);
    for (int i = 0; i < 220; i++)
        g_string_append(devices, "</backingStore>");
    g_string_append(devices, "<target dev='vda'/></disk>");
    check_refusal(devices->str, VIR_ERR_CONFIG_UNSUPPORTED, "more than 200 layers");
}

static JsonObject *parse_json(const char *text, JsonParser *parser)
{
    g_autoptr(GError) error = NULL;
    g_assert_true(json_parser_load_from_data(parser, text, -1, &error));
    return json_node_get_object(json_parser_get_root(parser));
}

static void test_vm_config(void)
{
    g_autofree char *xml = conf_test_read(examples_dir, "disks.xml", NULL);
    g_autoptr(domain_def) def = parse_ok(xml);
    def->vsock.cid = 9;
    g_autoptr(GError) error = NULL;
    g_autofree char *json = domain_def_to_vm_config_json(def, "/v.sock", NULL, &error);
    g_assert_no_error(error);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root = parse_json(json, parser);
    JsonArray *disks = json_object_get_array_member(root, "disks");
    g_assert_cmpuint(json_array_get_length(disks), ==, 3);

    JsonObject *vda = json_array_get_object_element(disks, 0);
    g_assert_cmpstr(json_object_get_string_member(vda, "path"), ==, "/var/lib/vsnap/images/rooted-root.img");
    g_assert_false(json_object_get_boolean_member(vda, "readonly"));
    g_assert_cmpstr(json_object_get_string_member(vda, "id"), ==, "vda");
    g_assert_cmpstr(json_object_get_string_member(vda, "image_type"), ==, "Raw");
    g_assert_false(json_object_has_member(vda, "serial"));
    g_assert_cmpuint(json_object_get_size(vda), ==, 4);

    JsonObject *vdb = json_array_get_object_element(disks, 1);
    g_assert_cmpstr(json_object_get_string_member(vdb, "path"), ==, "/dev/disk/by-id/dm-name-vg0-data");
    g_assert_true(json_object_get_boolean_member(vdb, "readonly"));
    g_assert_cmpstr(json_object_get_string_member(vdb, "id"), ==, "vdb");
    g_assert_cmpstr(json_object_get_string_member(vdb, "serial"), ==, "data-2024");
    g_assert_cmpuint(json_object_get_size(vdb), ==, 5);

    JsonObject *vdc = json_array_get_object_element(disks, 2);
    g_assert_cmpstr(json_object_get_string_member(vdc, "id"), ==, "vdc");

    g_assert_false(json_object_has_member(root, "vsnap_work_dir"));

    /* A disk with a chain continues on it: layers base first, the overlay;
     * the shim keeps overlays in the work directory given. */
    const char *chain[] = {"/d/vda-1.overlay", "/s/s2/disk-vda.layer", "/s/s1/disk-vda.layer", NULL};
    domain_disk_set_chain(&def->disks[0], chain);
    g_autofree char *chained = domain_def_to_vm_config_json(def, "/v.sock", "/state/disks/rooted", &error);
    g_assert_no_error(error);
    g_autoptr(JsonParser) chained_parser = json_parser_new();
    JsonObject *chained_root = parse_json(chained, chained_parser);
    g_assert_cmpstr(json_object_get_string_member(chained_root, "vsnap_work_dir"), ==, "/state/disks/rooted");
    JsonObject *chained_vda =
        json_array_get_object_element(json_object_get_array_member(chained_root, "disks"), 0);
    g_assert_cmpstr(json_object_get_string_member(chained_vda, "path"), ==, "/var/lib/vsnap/images/rooted-root.img");
    JsonArray *layers = json_object_get_array_member(chained_vda, "vsnap_chain");
    g_assert_cmpuint(json_array_get_length(layers), ==, 2);
    g_assert_cmpstr(json_array_get_string_element(layers, 0), ==, "/s/s1/disk-vda.layer");
    g_assert_cmpstr(json_array_get_string_element(layers, 1), ==, "/s/s2/disk-vda.layer");
    g_assert_cmpstr(json_object_get_string_member(chained_vda, "vsnap_overlay"), ==, "/d/vda-1.overlay");
    JsonObject *chained_vdb =
        json_array_get_object_element(json_object_get_array_member(chained_root, "disks"), 1);
    g_assert_false(json_object_has_member(chained_vdb, "vsnap_chain"));

    /* No disk, no "disks" member (Cloud Hypervisor's default: none). */
    g_autoptr(domain_def) bare = parse_devices("");
    g_autofree char *bare_json = domain_def_to_vm_config_json(bare, NULL, NULL, &error);
    g_assert_no_error(error);
    g_autoptr(JsonParser) bare_parser = json_parser_new();
    g_assert_false(json_object_has_member(parse_json(bare_json, bare_parser), "disks"));
}

/* A definition for saved state must have the saved disks: each difference
 * is refused naming the disk. */
static void test_same_disks(void)
{
    static const char a[] = "<disk type='file'><source file='/img/a'/><target dev='vda'/></disk>";
    static const char b[] = "<disk type='file'><source file='/img/b'/><target dev='vdb'/></disk>";
    g_autofree char *two = g_strconcat(a, b, NULL);
    g_autoptr(domain_def) saved = parse_devices(two);
    g_autoptr(domain_def) same = parse_devices(two);
    g_autoptr(GError) error = NULL;
    g_assert_true(domain_def_check_same_disks(saved, same, &error));
    g_assert_no_error(error);
    /* Live state (a chain over the image) is not part of the comparison. */
    const char *chain[] = {"/run/overlay", NULL};
    domain_disk_set_chain(&saved->disks[0], chain);
    g_assert_true(domain_def_check_same_disks(saved, same, &error));

    struct {
        const char *devices, *named;
    } cases[] = {
        {"<disk type='file'><source file='/img/other'/><target dev='vda'/></disk>"
         "<disk type='file'><source file='/img/b'/><target dev='vdb'/></disk>",
         "disk 'vda' has image '/img/a' in the saved domain, '/img/other'"},
        {"<disk type='file'><source file='/img/b'/><target dev='vdb'/></disk>"
         "<disk type='file'><source file='/img/a'/><target dev='vda'/></disk>",
         "disk 'vda' of the saved domain is 'vdb'"},
        {"<disk type='file'><source file='/img/a'/><target dev='vda'/></disk>",
         "disk 'vdb' of the saved domain is missing"},
        {"<disk type='file'><source file='/img/a'/><target dev='vda'/></disk>"
         "<disk type='file'><source file='/img/b'/><target dev='vdb'/></disk>"
         "<disk type='file'><source file='/img/c'/><target dev='vdc'/></disk>",
         "disk 'vdc' is not one of the saved domain's"},
        {"<disk type='file'><source file='/img/a'/><target dev='vda'/><readonly/></disk>"
         "<disk type='file'><source file='/img/b'/><target dev='vdb'/></disk>",
         "disk 'vda' is writable in the saved domain"},
        {"<disk type='block'><source dev='/img/a'/><target dev='vda'/></disk>"
         "<disk type='file'><source file='/img/b'/><target dev='vdb'/></disk>",
         "disk 'vda' has image '/img/a'"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(domain_def) given = parse_devices(cases[i].devices);
        g_autoptr(GError) refusal = NULL;
        g_assert_false(domain_def_check_same_disks(saved, given, &refusal));
        g_assert_error(refusal, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED);
        if (!strstr(refusal->message, cases[i].named))
            g_error("case %zu: '%s' does not say '%s'", i, refusal->message, cases[i].named);
    }
}

int main(int argc, char **argv)
{
    conf_test_init(&argc, &argv, &schema_dir, &examples_dir);
    g_test_add_func("/conf/disks/example", test_example);
    g_test_add_func("/conf/disks/format", test_format);
    g_test_add_func("/conf/disks/live-chain", test_live_chain);
    g_test_add_func("/conf/disks/live-example", test_live_example);
    g_test_add_func("/conf/disks/chain-end-in-definition", test_chain_end_in_definition);
    g_test_add_func("/conf/disks/copy", test_copy);
    g_test_add_func("/conf/disks/refusals", test_refusals);
    g_test_add_func("/conf/disks/driver-modes", test_driver_modes);
    g_test_add_func("/conf/disks/chain-limit", test_chain_limit);
    g_test_add_func("/conf/disks/vm-config", test_vm_config);
    g_test_add_func("/conf/disks/same-disks", test_same_disks);
    return g_test_run();
}
