/* Unit tests of plugin/conf's domain XML: parse, format, round trips, every
 * refusal with its libvirt error code, UUIDs, memory units and VmConfig. */
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

/* format(parse(format(parse(x)))) == format(parse(x)), and the formatted XML
 * is itself valid (parse validates against domain.rng). */
static char *check_round_trip(const char *xml)
{
    g_autoptr(domain_def) first = parse_ok(xml);
    char *formatted = domain_def_format(first, false, -1);
    g_autoptr(domain_def) second = parse_ok(formatted);
    g_autofree char *again = domain_def_format(second, false, -1);
    g_assert_cmpstr(formatted, ==, again);
    g_assert_cmpmem(first->uuid, 16, second->uuid, 16);
    return formatted;
}

static void test_examples_round_trip(void)
{
    g_autoptr(GDir) dir = g_dir_open(examples_dir, 0, NULL);
    g_assert_nonnull(dir);
    int count = 0;
    for (const char *name; (name = g_dir_read_name(dir));) {
        if (!g_str_has_suffix(name, ".xml"))
            continue;
        g_autofree char *path = g_build_filename(examples_dir, name, NULL);
        g_autofree char *xml = NULL;
        g_assert_true(g_file_get_contents(path, &xml, NULL, NULL));
        g_autofree char *formatted = check_round_trip(xml);
        count++;
    }
    g_assert_cmpint(count, >=, 4);
}

static char *read_example(const char *name)
{
    return conf_test_read(examples_dir, name, NULL);
}

/* What dumpxml returns must be valid libvirt domain XML for libvirt's own
 * schema too (libvirt0 installs it), inactive and live. */
static void check_libvirt_domain_schema(const char *xml)
{
    conf_test_check_libvirt_schema(xml, "domain", "domain.rng");
}

static void test_libvirt_schema(void)
{
    if (!g_file_test(LIBVIRT_SCHEMAS "/domain.rng", G_FILE_TEST_EXISTS)) {
        g_test_skip("libvirt's schemas are not installed (package libvirt0)");
        return;
    }
    static const char *const examples[] = {"minimal.xml", "microvm.xml", "virt-install.xml", "serial-file.xml",
                                           "disks.xml", "stock-guest.xml", "hugepages.xml"};
    for (size_t i = 0; i < G_N_ELEMENTS(examples); i++) {
        g_autofree char *xml = read_example(examples[i]);
        g_autoptr(domain_def) def = parse_ok(xml);
        g_autofree char *inactive = domain_def_format(def, false, -1);
        check_libvirt_domain_schema(inactive);
        def->serial.path = def->serial.type == DOMAIN_CHR_PTY ? g_strdup("/dev/pts/3") : def->serial.path;
        def->vsock.cid = def->vsock.auto_cid ? 99 : def->vsock.cid;
        g_autofree char *live = domain_def_format(def, true, 12);
        check_libvirt_domain_schema(live);
    }
}

static void test_example_fields(void)
{
    g_autofree char *xml = read_example("microvm.xml");
    g_autoptr(domain_def) def = parse_ok(xml);
    char uuid[DOMAIN_UUID_STRING_LEN];
    domain_uuid_format(def->uuid, uuid);
    g_assert_cmpstr(def->name, ==, "microvm");
    g_assert_cmpstr(uuid, ==, "4dea22b3-1d52-d8f3-2516-782e98ab3fa0");
    g_assert_cmpstr(def->title, ==, "Test microVM");
    g_assert_cmpuint(def->memory_kib, ==, 1024 * 1024);
    g_assert_cmpuint(def->current_memory_kib, ==, 1024 * 1024);
    g_assert_cmpuint(def->vcpus, ==, 2);
    g_assert_cmpstr(def->os_type, ==, "hvm");
    g_assert_cmpstr(def->kernel, ==, "/var/lib/vsnap/images/bzImage");
    g_assert_cmpstr(def->initrd, ==, "/var/lib/vsnap/images/initramfs.cpio.gz");
    g_assert_cmpstr(def->cmdline, ==, "console=ttyS0 reboot=k panic=1 quiet");
    g_assert_cmpint(def->on_reboot, ==, DOMAIN_ACTION_RESTART);
    g_assert_true(def->vsock.present);
    g_assert_true(def->vsock.auto_cid);
    g_assert_cmpint(def->serial.type, ==, DOMAIN_CHR_PTY);
    g_assert_cmpint(def->console.type, ==, DOMAIN_CHR_PTY);
    g_assert_cmpint(def->vsnap.restore_mode, ==, RESTORE_MODE_ONDEMAND);
    g_assert_cmpuint(def->vsnap.readiness_port, ==, 1024);

    g_autofree char *file_xml = read_example("serial-file.xml");
    g_autoptr(domain_def) logged = parse_ok(file_xml);
    g_assert_cmpint(logged->serial.type, ==, DOMAIN_CHR_FILE);
    g_assert_cmpstr(logged->serial.path, ==, "/var/log/vsnap/logged-serial.log");
    g_assert_false(logged->vsock.auto_cid);
    g_assert_cmpuint(logged->vsock.cid, ==, 42);
    g_assert_cmpint(logged->vsnap.restore_mode, ==, RESTORE_MODE_MERGE);
    g_assert_cmpuint(logged->vsnap.readiness_port, ==, 5000);
    g_assert_cmpuint(logged->memory_kib, ==, 512 * 1024);
    g_assert_cmpint(logged->on_crash, ==, DOMAIN_ACTION_COREDUMP_DESTROY);
    g_assert_cmpint(logged->on_poweroff, ==, DOMAIN_ACTION_DESTROY);
}

/* A domain with the given extra children of <domain> and of <devices>. */
static char *domain_with(const char *top, const char *devices)
{
    return g_strdup_printf("<domain type='kvm'>\n"
                           "  <name>t</name>\n"
                           "  <memory unit='MiB'>64</memory>\n"
                           "  <os><type>hvm</type><kernel>/boot/vmlinux</kernel></os>\n"
                           "%s\n"
                           "  <devices>%s</devices>\n"
                           "</domain>\n",
                           top, devices);
}

static void test_variations_round_trip(void)
{
    static const char *const tops[] = {
        "",
        "<uuid>0d6f1c0a-7b3e-4c5d-9e8f-7a6b5c4d3e2f</uuid>",
        "<title>a &amp; b &lt;c&gt; 'q' \"d\"</title><description>multi\nline\n  text &amp; more</description>",
        "<vcpu>64</vcpu><currentMemory unit='KiB'>65536</currentMemory>",
        "<features><pae/><acpi/></features><cpu mode='host-passthrough'/><clock/>",
        "<cpu mode='host-passthrough' migratable='off'/>",
        "<on_poweroff>preserve</on_poweroff><on_reboot>rename-restart</on_reboot>"
        "<on_crash>coredump-restart</on_crash>",
        "<metadata><a:x xmlns:a='urn:a'><a:y k='v'>text <a:z/> more</a:y></a:x>"
        "<b:x xmlns:b='urn:b'/></metadata>",
        "<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'><vsnap:restore mode='copy'/></vsnap:vsnap>"
        "</metadata>",
        "<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>"
        "<vsnap:store url='s3://bucket/a&amp;b'/></vsnap:vsnap></metadata>",
        "<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>"
        "<vsnap:from domain='o &amp; p' snapshot='s1'/><vsnap:restore mode='ondemand'/></vsnap:vsnap></metadata>",
    };
    static const char *const devices[] = {
        "",
        "<console type='pty'/>",
        "<serial type='pty'/>",
        "<vsock/>",
        "<vsock model='virtio'><cid address='3'/></vsock>",
        "<vsock><cid auto='yes' address='77'/></vsock>",
        "<emulator>/usr/local/bin/vsnap-shim</emulator><memballoon model='none'/>",
        "<serial type='file'><source path='/tmp/x &amp; y.log'/></serial>",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(tops); i++) {
        g_autofree char *xml = domain_with(tops[i], "");
        g_autofree char *formatted = check_round_trip(xml);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(devices); i++) {
        g_autofree char *xml = domain_with("", devices[i]);
        g_autofree char *formatted = check_round_trip(xml);
    }
}

static void test_round_trip_keeps_values(void)
{
    g_autofree char *xml = domain_with(
        "<title>a &amp; b</title><description> d\n</description>"
        "<metadata><a:x xmlns:a='urn:a'><a:y k='v'>text</a:y></a:x></metadata>"
        "<cpu mode='host-passthrough' check='none' migratable='on'/><features><apic/></features>",
        "<console type='pty'/>");
    g_autoptr(domain_def) def = parse_ok(xml);
    g_autofree char *formatted = domain_def_format(def, false, -1);
    g_autoptr(domain_def) again = parse_ok(formatted);
    g_assert_cmpstr(again->title, ==, "a & b");
    g_assert_cmpstr(again->description, ==, " d\n");
    g_assert_nonnull(strstr(formatted, "<a:y k=\"v\">text</a:y>"));
    g_assert_nonnull(strstr(formatted, "xmlns:a=\"urn:a\""));
    g_assert_true(again->cpu.present && again->cpu.check_none);
    g_assert_cmpint(again->cpu.migratable, ==, CPU_MIGRATABLE_ON);
    g_assert_true(again->features.apic && !again->features.acpi);
    /* A console alone gets its serial port, as libvirt does. */
    g_assert_cmpint(again->serial.type, ==, DOMAIN_CHR_PTY);
    g_assert_nonnull(strstr(formatted, "<serial type='pty'>"));
}

/* virt-manager's wizard and virt-install write <boot dev='hd'/> beside the
 * kernel; it is kept, in libvirt's order (after <cmdline>). */
/* A clone restores by sharing unless its definition says another mode. */
static void test_clone_defaults_to_shared(void)
{
    g_autofree char *xml = domain_with("<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>"
                                       "<vsnap:from domain='o' snapshot='s1'/></vsnap:vsnap></metadata>", "");
    g_autoptr(domain_def) def = parse_ok(xml);
    g_assert_true(domain_def_is_clone(def));
    g_assert_cmpstr(def->vsnap.from_domain, ==, "o");
    g_assert_cmpstr(def->vsnap.from_snapshot, ==, "s1");
    g_assert_cmpint(def->vsnap.restore_mode, ==, RESTORE_MODE_SHARED);
    g_autofree char *formatted = check_round_trip(xml);
    g_assert_nonnull(strstr(formatted, "<vsnap:from domain='o' snapshot='s1'/>"));
    g_autoptr(domain_def) copy = domain_def_copy(def);
    g_assert_cmpstr(copy->vsnap.from_snapshot, ==, "s1");
    g_autofree char *huge_xml = domain_with("<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>"
                                            "<vsnap:from domain='o' snapshot='s1'/></vsnap:vsnap></metadata>"
                                            "<memoryBacking><hugepages/></memoryBacking>", "");
    g_autoptr(domain_def) huge = parse_ok(huge_xml);
    g_assert_cmpint(huge->vsnap.restore_mode, ==, RESTORE_MODE_ONDEMAND);
    g_autofree char *plain_xml = domain_with("", "");
    g_autoptr(domain_def) plain = parse_ok(plain_xml);
    g_assert_false(domain_def_is_clone(plain));
    g_assert_cmpint(plain->vsnap.restore_mode, ==, RESTORE_MODE_ONDEMAND);
}

static void test_os_boot_hd_kept(void)
{
    const char *xml = "<domain type='kvm'><name>t</name><memory unit='MiB'>64</memory>"
                      "<os><type>hvm</type><boot dev='hd'/><kernel>/k</kernel><cmdline>c</cmdline></os>"
                      "</domain>";
    g_autofree char *formatted = check_round_trip(xml);
    g_assert_nonnull(strstr(formatted, "<cmdline>c</cmdline>\n    <boot dev='hd'/>\n  </os>"));
    g_autofree char *huge_xml = domain_with("<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>"
                                            "<vsnap:from domain='o' snapshot='s1'/></vsnap:vsnap></metadata>"
                                            "<memoryBacking><hugepages/></memoryBacking>", "");
    g_autoptr(domain_def) huge = parse_ok(huge_xml);
    g_assert_cmpint(huge->vsnap.restore_mode, ==, RESTORE_MODE_ONDEMAND);
    g_autofree char *plain_xml = domain_with("", "");
    g_autoptr(domain_def) without = parse_ok(plain_xml);
    g_autofree char *plain = domain_def_format(without, false, -1);
    g_assert_null(strstr(plain, "<boot"));
}

static void test_live_details(void)
{
    g_autofree char *xml = domain_with("", "<serial type='pty'/><console type='pty'/><vsock/>");
    g_autoptr(domain_def) def = parse_ok(xml);
    g_autofree char *inactive_before = domain_def_format(def, false, -1);
    def->serial.path = g_strdup("/dev/pts/7");
    def->vsock.cid = 1234;
    g_autofree char *live = domain_def_format(def, true, 5);
    g_autofree char *inactive = domain_def_format(def, false, 5);
    g_assert_nonnull(strstr(live, "<domain type='kvm' id='5'>"));
    g_assert_nonnull(strstr(live, "<source path='/dev/pts/7'/>"));
    g_assert_nonnull(strstr(live, "tty='/dev/pts/7'"));
    g_assert_nonnull(strstr(live, "<cid auto='yes' address='1234'/>"));
    g_assert_null(strstr(inactive, "id='5'"));
    g_assert_null(strstr(inactive, "/dev/pts/7"));
    g_assert_null(strstr(inactive, "1234"));
    g_assert_cmpstr(inactive, ==, inactive_before);
    /* Live XML parses back (the daemon may keep it as status) to the same. */
    g_autoptr(domain_def) reparsed = parse_ok(live);
    g_assert_cmpstr(reparsed->serial.path, ==, "/dev/pts/7");
    g_assert_cmpuint(reparsed->vsock.cid, ==, 1234);
    g_assert_true(reparsed->vsock.auto_cid);
    g_autofree char *live_again = domain_def_format(reparsed, true, 5);
    g_assert_cmpstr(live, ==, live_again);
}

static void test_copy(void)
{
    g_autofree char *xml = read_example("virt-install.xml");
    g_autoptr(domain_def) def = parse_ok(xml);
    g_autoptr(domain_def) copy = domain_def_copy(def);
    g_autofree char *a = domain_def_format(def, false, -1);
    g_autofree char *b = domain_def_format(copy, false, -1);
    g_assert_cmpstr(a, ==, b);
    g_assert_true(copy->kernel != def->kernel);
    g_assert_true(copy->foreign_metadata != def->foreign_metadata);
}

struct refusal {
    const char *top;
    const char *devices;
    int code;
    const char *message_part;
};

static void check_refusal(const char *xml, int code, const char *message_part)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(domain_def) def = domain_def_parse_string(xml, schema_dir, &error);
    if (def)
        g_error("accepted, expected a refusal containing '%s':\n%s", message_part, xml);
    g_assert_true(error->domain == VSNAP_VIR_ERROR);
    if (error->code != code || !strstr(error->message, message_part))
        g_error("expected code %d with '%s', got %d '%s' for:\n%s", code, message_part, error->code,
                error->message, xml);
}

static void test_refusals(void)
{
    static const struct refusal refusals[] = {
        {"", "<interface type='user'/>", VIR_ERR_CONFIG_UNSUPPORTED, "<interface type='user'> is not supported by vsnap"},
        {"", "<graphics type='vnc'/>", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <graphics> in <devices>"},
        {"", "<video/>", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <video> in <devices>"},
        {"", "<input type='tablet' bus='usb'/>", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <input> in <devices>"},
        {"", "<controller type='usb'/>", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <controller> in <devices>"},
        {"", "<rng model='virtio'/>", VIR_ERR_XML_ERROR, "<rng> needs a <backend model='random'>"},
        {"", "<rng model='virtio'><backend model='egd'/></rng>", VIR_ERR_CONFIG_UNSUPPORTED, "only 'random'"},
        {"", "<rng model='virtio-transitional'><backend model='random'/></rng>", VIR_ERR_CONFIG_UNSUPPORTED, "only 'virtio'"},
        {"", "<rng model='virtio'><backend model='random'>dev/random</backend></rng>", VIR_ERR_XML_DETAIL, "absolute path"},
        {"", "<rng model='virtio'><backend model='random'/><rate bytes='0'/></rng>", VIR_ERR_XML_DETAIL, "out of range"},
        {"", "<rng model='virtio'><backend model='random'/></rng><rng model='virtio'><backend model='random'/></rng>", VIR_ERR_CONFIG_UNSUPPORTED, "only one <rng>"},
        {"<sysinfo type='fwcfg'/>", "", VIR_ERR_CONFIG_UNSUPPORTED, "<sysinfo type='fwcfg'>"},
        {"<sysinfo type='smbios'><bios><entry name='vendor'>x</entry></bios></sysinfo>", "", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <bios> in <sysinfo>"},
        {"<sysinfo type='smbios'><system><entry name='colour'>x</entry></system></sysinfo>", "", VIR_ERR_XML_DETAIL, "name='colour'"},
        {"<sysinfo type='smbios'><system><entry name='serial'></entry></system></sysinfo>", "", VIR_ERR_XML_DETAIL, "an empty <entry>"},
        {"<sysinfo type='smbios'><system><entry name='uuid'>00000000-0000-0000-0000-000000000001</entry></system></sysinfo>", "", VIR_ERR_XML_DETAIL, "UUID mismatch"},
        {"<sysinfo type='smbios'><oemStrings><entry></entry></oemStrings></sysinfo>", "", VIR_ERR_XML_DETAIL, "an empty <entry>"},
        {"<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'><vsnap:notify port='0'/></vsnap:vsnap></metadata>", "", VIR_ERR_XML_DETAIL, "out of range"},
        {"<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'><vsnap:from domain='o'/></vsnap:vsnap></metadata>", "", VIR_ERR_XML_DETAIL, "needs both"},
        {"<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'><vsnap:from domain='t' snapshot='s'/></vsnap:vsnap></metadata>", "", VIR_ERR_CONFIG_UNSUPPORTED, "clone of itself"},
        {"<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'><vsnap:notify credential='maybe'/></vsnap:vsnap></metadata>", "", VIR_ERR_XML_DETAIL, "credential='maybe'"},
        {"", "<memballoon model='virtio'/>", VIR_ERR_CONFIG_UNSUPPORTED, "memballoon model='virtio'"},
        {"", "<emulator>/usr/bin/qemu-system-x86_64</emulator>", VIR_ERR_CONFIG_UNSUPPORTED, "qemu-system-x86_64"},
        {"", "<emulator>vsnap-shim</emulator>", VIR_ERR_XML_DETAIL, "absolute path"},
        {"", "<serial type='tcp'/>", VIR_ERR_CONFIG_UNSUPPORTED, "<serial type='tcp'>"},
        {"", "<serial/>", VIR_ERR_XML_ERROR, "<serial> has no type"},
        {"", "<serial type='file'/>", VIR_ERR_XML_ERROR, "needs <source path"},
        {"", "<serial type='file'><source path='rel.log'/></serial>", VIR_ERR_XML_DETAIL, "absolute path"},
        {"", "<serial type='pty'/><serial type='pty'/>", VIR_ERR_CONFIG_UNSUPPORTED, "only one <serial>"},
        {"", "<serial type='pty'><target port='1'/></serial>", VIR_ERR_CONFIG_UNSUPPORTED, "port='1'"},
        {"", "<serial type='pty'><target type='pci-serial'/></serial>", VIR_ERR_CONFIG_UNSUPPORTED, "pci-serial"},
        {"", "<serial type='pty'><log file='/x'/></serial>", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <log> in <serial>"},
        {"", "<console type='file'/>", VIR_ERR_CONFIG_UNSUPPORTED, "<console type='file'>"},
        {"", "<console type='pty'><target type='virtio'/></console>", VIR_ERR_CONFIG_UNSUPPORTED, "virtio"},
        {"", "<serial type='file'><source path='/x'/></serial><console type='pty'/>", VIR_ERR_CONFIG_UNSUPPORTED, "not a pty"},
        {"", "<vsock model='vhost'/>", VIR_ERR_CONFIG_UNSUPPORTED, "<vsock model='vhost'>"},
        {"", "<vsock><cid auto='no' address='2'/></vsock>", VIR_ERR_XML_DETAIL, "out of range"},
        {"", "<vsock><cid auto='no'/></vsock>", VIR_ERR_XML_ERROR, "needs an address"},
        {"", "<vsock><cid auto='no' address='4294967295'/></vsock>", VIR_ERR_XML_DETAIL, "out of range"},
        {"", "<vsock><cid auto='maybe'/></vsock>", VIR_ERR_XML_DETAIL, "auto='maybe'"},
        {"", "<vsock/><vsock/>", VIR_ERR_XML_ERROR, "<vsock> appears more than once"},
        {"", "<vsock><address type='pci'/></vsock>", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <address> in <vsock>"},
        {"<resource><partition>/machine</partition></resource>", "", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <resource> in <domain>"},
        {"<pm><suspend-to-mem enabled='no'/></pm>", "", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <pm> in <domain>"},
        {"<features><vmport state='off'/></features>", "", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <vmport> in <features>"},
        {"<features><apic eoi='on'/></features>", "", VIR_ERR_CONFIG_UNSUPPORTED, "eoi='on'"},
        {"<cpu mode='host-model'/>", "", VIR_ERR_CONFIG_UNSUPPORTED, "'host-model'"},
        {"<cpu><model>qemu64</model></cpu>", "", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <model> in <cpu>"},
        {"<cpu mode='host-passthrough'><topology sockets='1' cores='2' threads='1'/></cpu>", "", VIR_ERR_CONFIG_UNSUPPORTED, "<topology> in <cpu>"},
        {"<cpu mode='host-passthrough' check='full'/>", "", VIR_ERR_CONFIG_UNSUPPORTED, "'full'"},
        {"<clock offset='localtime'/>", "", VIR_ERR_CONFIG_UNSUPPORTED, "'localtime'"},
        {"<clock offset='utc'><timer name='rtc' tickpolicy='catchup'/></clock>", "", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <timer> in <clock>"},
        {"<vcpu placement='auto'>2</vcpu>", "", VIR_ERR_CONFIG_UNSUPPORTED, "placement='auto'"},
        {"<vcpu current='1'>2</vcpu>", "", VIR_ERR_CONFIG_UNSUPPORTED, "current='1'"},
        {"<vcpu>65</vcpu>", "", VIR_ERR_XML_DETAIL, "out of range"},
        {"<vcpu>0</vcpu>", "", VIR_ERR_XML_DETAIL, "out of range"},
        {"<vcpu>two</vcpu>", "", VIR_ERR_XML_DETAIL, "decimal number"},
        {"<maxMemory slots='16' unit='KiB'>1524288</maxMemory>", "", VIR_ERR_CONFIG_UNSUPPORTED, "<maxMemory>"},
        {"<currentMemory unit='MiB'>32</currentMemory>", "", VIR_ERR_CONFIG_UNSUPPORTED, "no memory balloon"},
        {"<uuid>not-a-uuid</uuid>", "", VIR_ERR_XML_DETAIL, "malformed uuid"},
        {"<uuid>0d6f1c0a7b3e4c5d9e8f7a6b5c4d3e2</uuid>", "", VIR_ERR_XML_DETAIL, "malformed uuid"},
        {"<title>two\nlines</title>", "", VIR_ERR_XML_DETAIL, "newlines"},
        {"<name>again</name>", "", VIR_ERR_XML_ERROR, "<name> appears more than once"},
        {"<on_crash>explode</on_crash>", "", VIR_ERR_XML_DETAIL, "'explode'"},
        {"<qemu:commandline xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'/>", "", VIR_ERR_CONFIG_UNSUPPORTED, "<qemu:commandline> in <domain>"},
        {"<metadata><plain/></metadata>", "", VIR_ERR_XML_DETAIL, "must be in an XML namespace"},
        {"<metadata><v:other xmlns:v='urn:vsnap:domain:1'/></metadata>", "", VIR_ERR_CONFIG_UNSUPPORTED, "<v:other>"},
        {"<metadata><v:vsnap xmlns:v='urn:vsnap:domain:1'><v:restore mode='lazy'/></v:vsnap></metadata>", "", VIR_ERR_XML_DETAIL, "mode='lazy'"},
        {"<metadata><v:vsnap xmlns:v='urn:vsnap:domain:1'><v:readiness port='0'/></v:vsnap></metadata>", "", VIR_ERR_XML_DETAIL, "out of range"},
        {"<metadata><v:vsnap xmlns:v='urn:vsnap:domain:1'><v:store path='/x'/></v:vsnap></metadata>", "", VIR_ERR_CONFIG_UNSUPPORTED, "path='/x'"},
        {"<metadata><v:vsnap xmlns:v='urn:vsnap:domain:1'><v:store url='ftp://h/x'/></v:vsnap></metadata>", "", VIR_ERR_XML_DETAIL, "ftp://h/x: not a store URL (unknown scheme"},
        {"<metadata><v:vsnap xmlns:v='urn:vsnap:domain:1'><v:store url='file://rel/x'/></v:vsnap></metadata>", "", VIR_ERR_XML_DETAIL, "file://rel/x: not a store URL"},
        {"<metadata><v:vsnap xmlns:v='urn:vsnap:domain:1'><v:store url='s3:///p'/></v:vsnap></metadata>", "", VIR_ERR_XML_DETAIL, "no bucket"},
        {"<metadata><v:vsnap xmlns:v='urn:vsnap:domain:1'><v:store url='s3://b'/><v:store url='s3://c'/></v:vsnap></metadata>", "", VIR_ERR_XML_ERROR, "more than once"},
        {"<iothreads>1</iothreads>", "", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <iothreads> in <domain>"},
        {"<memoryBacking><hugepages><page size='1' unit='G'/></hugepages></memoryBacking>", "", VIR_ERR_CONFIG_UNSUPPORTED, "1048576 KiB is not supported by vsnap"},
        {"<memoryBacking><hugepages><page size='2048' nodeset='0'/></hugepages></memoryBacking>", "", VIR_ERR_CONFIG_UNSUPPORTED, "nodeset='0'"},
        {"<memoryBacking><hugepages><page unit='KiB'/></hugepages></memoryBacking>", "", VIR_ERR_XML_ERROR, "needs a size"},
        {"<memoryBacking><nosharepages/></memoryBacking>", "", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <nosharepages> in <memoryBacking>"},
        {"<memoryBacking><locked/></memoryBacking>", "", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <locked> in <memoryBacking>"},
        {"<memoryBacking><source type='anonymous'/></memoryBacking>", "", VIR_ERR_CONFIG_UNSUPPORTED, "type='anonymous'"},
        {"<memoryBacking><hugepages/></memoryBacking><memoryBacking/>", "", VIR_ERR_XML_ERROR, "<memoryBacking> appears more than once"},
        {"<devices/>", "", VIR_ERR_XML_ERROR, "<devices> appears more than once"},
        {"", "text<serial type='pty'/>", VIR_ERR_XML_DETAIL, "schema"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(refusals); i++) {
        g_autofree char *xml = domain_with(refusals[i].top, refusals[i].devices);
        check_refusal(xml, refusals[i].code, refusals[i].message_part);
    }
}

static void test_refusals_whole_document(void)
{
    static const struct {
        const char *xml;
        int code;
        const char *message_part;
    } refusals[] = {
        {"<domain type='kvm'><name>x</name>", VIR_ERR_XML_ERROR, "line 1, column"},
        {"<domain type='kvm'>\n  <name>x</nam>\n</domain>", VIR_ERR_XML_ERROR, "line 2, column"},
        {"", VIR_ERR_XML_ERROR, "malformed"},
        {"<!DOCTYPE domain [<!ENTITY a 'b'>]><domain type='kvm'><name>&a;</name></domain>", VIR_ERR_XML_ERROR, "document type"},
        {"<vm/>", VIR_ERR_XML_ERROR, "expected root element <domain>, found <vm>"},
        {"<domain><name>x</name></domain>", VIR_ERR_XML_ERROR, "no type attribute"},
        {"<domain type='qemu'><name>x</name></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "domain type 'qemu'"},
        {"<domain type='kvm' xmlns:x='urn:x' x:y='1'><name>x</name></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "x:y='1'"},
        {"<domain type='kvm'><memory>65536</memory><os><type>hvm</type><kernel>/k</kernel></os></domain>", VIR_ERR_XML_ERROR, "missing <name>"},
        {"<domain type='kvm'><name></name><memory>65536</memory></domain>", VIR_ERR_XML_ERROR, "must not be empty"},
        {"<domain type='kvm'><name>a/b</name></domain>", VIR_ERR_XML_DETAIL, "must not contain '/'"},
        {"<domain type='kvm'><name>x</name><os><type>hvm</type><kernel>/k</kernel></os></domain>", VIR_ERR_XML_ERROR, "missing <memory>"},
        {"<domain type='kvm'><name>x</name><memory>65536</memory></domain>", VIR_ERR_XML_ERROR, "missing <os>"},
        {"<domain type='kvm'><name>x</name><memory>65536</memory><os><type>hvm</type></os></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "<os><kernel> is required"},
        {"<domain type='kvm'><name>x</name><memory>65536</memory><os><kernel>/k</kernel></os></domain>", VIR_ERR_XML_ERROR, "missing <type> in <os>"},
        {"<domain type='kvm'><name>x</name><memory>65536</memory><os><type>xen</type><kernel>/k</kernel></os></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "os type 'xen'"},
        {"<domain type='kvm'><name>x</name><memory>65536</memory><os><type arch='aarch64'>hvm</type><kernel>/k</kernel></os></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "'aarch64'"},
        {"<domain type='kvm'><name>x</name><memory>65536</memory><os><type machine='q35'>hvm</type><kernel>/k</kernel></os></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "'q35'"},
        {"<domain type='kvm'><name>x</name><memory>65536</memory><os firmware='efi'><type>hvm</type><kernel>/k</kernel></os></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "firmware='efi' on <os>"},
        {"<domain type='kvm'><name>x</name><memory>65536</memory><os><type>hvm</type><loader>/x</loader></os></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "unsupported element <loader> in <os>"},
        {"<domain type='kvm'><name>x</name><memory>65536</memory><os><type>hvm</type><kernel>/k</kernel><boot dev='cdrom'/></os></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "<boot dev='cdrom'> in <os> is not supported by vsnap: it boots the <kernel>"},
        {"<domain type='kvm'><name>x</name><memory>65536</memory><os><type>hvm</type><kernel>/k</kernel><boot dev='hd' order='1'/></os></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "order='1'"},
        {"<domain type='kvm'><name>x</name><memory>65536</memory><os><type>hvm</type><kernel>vmlinux</kernel></os></domain>", VIR_ERR_XML_DETAIL, "absolute path"},
        {"<domain type='kvm'><name>x</name><memory unit='XB'>1</memory></domain>", VIR_ERR_XML_DETAIL, "unknown memory unit 'XB'"},
        {"<domain type='kvm'><name>x</name><memory unit='EiB'>100</memory></domain>", VIR_ERR_XML_DETAIL, "too large"},
        {"<domain type='kvm'><name>x</name><memory dumpCore='on'>65536</memory></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "dumpCore='on'"},
        {"<domain type='kvm'><name>x</name><memory unit='MiB'>8</memory><os><type>hvm</type><kernel>/k</kernel></os></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "16 MiB to 64 GiB"},
        {"<domain type='kvm'><name>x</name><memory unit='GiB'>65</memory><os><type>hvm</type><kernel>/k</kernel></os></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "16 MiB to 64 GiB"},
        {"<domain type='kvm'><name>x</name><memory>65537</memory><os><type>hvm</type><kernel>/k</kernel></os></domain>", VIR_ERR_CONFIG_UNSUPPORTED, "4 KiB pages"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(refusals); i++)
        check_refusal(refusals[i].xml, refusals[i].code, refusals[i].message_part);

    g_autoptr(GError) error = NULL;
    g_assert_null(domain_def_parse_string(NULL, schema_dir, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG);
}

static void test_uuid(void)
{
    unsigned char a[16], b[16];
    char text[DOMAIN_UUID_STRING_LEN];
    g_assert_true(domain_uuid_parse("4dea22b3-1d52-d8f3-2516-782e98ab3fa0", a));
    g_assert_true(domain_uuid_parse("4DEA22B31D52D8F32516782E98AB3FA0", b));
    g_assert_cmpmem(a, 16, b, 16);
    g_assert_true(domain_uuid_parse("  4d-ea-22b31d52d8f32516782e98ab3fa0 ", b));
    g_assert_cmpmem(a, 16, b, 16);
    domain_uuid_format(a, text);
    g_assert_cmpstr(text, ==, "4dea22b3-1d52-d8f3-2516-782e98ab3fa0");
    g_assert_false(domain_uuid_parse("4dea22b3-1d52-d8f3-2516-782e98ab3fa", a));
    g_assert_false(domain_uuid_parse("4dea22b3-1d52-d8f3-2516-782e98ab3fa00", a));
    g_assert_false(domain_uuid_parse("4dea22b3-1d52-d8f3-2516-782e98ab3fag", a));
    g_assert_false(domain_uuid_parse("", a));

    /* Generated when absent: a version 4 UUID, different each time, kept by
     * format so a reparse sees the same one. */
    g_autofree char *xml = domain_with("", "");
    g_autoptr(domain_def) first = parse_ok(xml);
    g_autoptr(domain_def) second = parse_ok(xml);
    g_assert_cmpint(memcmp(first->uuid, second->uuid, 16), !=, 0);
    g_assert_cmpint(first->uuid[6] >> 4, ==, 4);
    domain_uuid_format(first->uuid, text);
    g_autofree char *formatted = domain_def_format(first, false, -1);
    g_assert_nonnull(strstr(formatted, text));
    g_autoptr(domain_def) reparsed = parse_ok(formatted);
    g_assert_cmpmem(first->uuid, 16, reparsed->uuid, 16);
}

static void test_memory_units(void)
{
    static const struct {
        const char *value, *unit;
        uint64_t kib;
    } cases[] = {
        {"1024", NULL, 1024},
        {"1024", "KiB", 1024},
        {"1024", "k", 1024},
        {"1024", "K", 1024},
        {"1", "M", 1024},
        {"1", "MiB", 1024},
        {"1", "mib", 1024},
        {"1", "G", 1024 * 1024},
        {"2", "GiB", 2 * 1024 * 1024},
        {"1", "T", 1024ull * 1024 * 1024},
        {"1", "TiB", 1024ull * 1024 * 1024},
        {"1", "P", 1024ull * 1024 * 1024 * 1024},
        {"1", "EiB", 1024ull * 1024 * 1024 * 1024 * 1024},
        {"1024", "b", 1},
        {"1024", "bytes", 1},
        {"1", "byte", 1},
        {"1025", "b", 2}, /* rounded up to whole KiB, as libvirt */
        {"1", "b", 1},
        {"0", "b", 0},
        {"1000", "KB", 1000 * 1000 / 1024 + 1},
        {"1", "MB", 1000 * 1000 / 1024 + 1},
        {"1", "GB", 976563},
        {"4096", "kb", 4000},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        uint64_t kib = 0;
        if (!domain_memory_to_kib(cases[i].value, cases[i].unit, &kib, &error))
            g_error("%s %s: %s", cases[i].value, cases[i].unit, error->message);
        if (kib != cases[i].kib)
            g_error("%s %s: got %" G_GUINT64_FORMAT " KiB, expected %" G_GUINT64_FORMAT, cases[i].value,
                    cases[i].unit, kib, cases[i].kib);
    }
    static const struct {
        const char *value, *unit;
    } bad[] = {
        {"1", "KiBB"}, {"1", "x"}, {"1", ""}, {"-1", "KiB"}, {"1.5", "GiB"}, {"", "KiB"},
        {"16", "EiB"}, {"18446744073709551616", "b"}, {"0x10", "KiB"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        uint64_t kib = 0;
        if (domain_memory_to_kib(bad[i].value, bad[i].unit, &kib, &error))
            g_error("'%s' '%s' accepted as %" G_GUINT64_FORMAT, bad[i].value, bad[i].unit, kib);
        g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL);
    }
}

static JsonObject *parse_json(const char *text, JsonParser *parser)
{
    g_autoptr(GError) error = NULL;
    g_assert_true(json_parser_load_from_data(parser, text, -1, &error));
    return json_node_get_object(json_parser_get_root(parser));
}

static void test_vm_config(void)
{
    g_autofree char *xml = read_example("microvm.xml");
    g_autoptr(domain_def) def = parse_ok(xml);
    g_autoptr(GError) error = NULL;

    /* Automatic CID not assigned yet: the daemon must assign it first. */
    g_assert_null(domain_def_to_vm_config_json(def, "/run/vsnap/microvm/vsock.sock", NULL, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR);
    g_clear_error(&error);
    def->vsock.cid = 7;
    g_assert_null(domain_def_to_vm_config_json(def, NULL, NULL, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR);
    g_clear_error(&error);

    g_autofree char *json = domain_def_to_vm_config_json(def, "/run/vsnap/microvm/vsock.sock", NULL, &error);
    g_assert_no_error(error);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root = parse_json(json, parser);
    JsonObject *payload = json_object_get_object_member(root, "payload");
    g_assert_cmpstr(json_object_get_string_member(payload, "kernel"), ==, "/var/lib/vsnap/images/bzImage");
    g_assert_cmpstr(json_object_get_string_member(payload, "initramfs"), ==,
                    "/var/lib/vsnap/images/initramfs.cpio.gz");
    /* systemd's vmm.notify_socket credential rides along by default. */
    g_assert_cmpstr(json_object_get_string_member(payload, "cmdline"), ==,
                    "console=ttyS0 reboot=k panic=1 quiet systemd.set_credential=vmm.notify_socket:vsock-stream:2:1025");
    JsonObject *cpus = json_object_get_object_member(root, "cpus");
    g_assert_cmpint(json_object_get_int_member(cpus, "boot_vcpus"), ==, 2);
    g_assert_cmpint(json_object_get_int_member(cpus, "max_vcpus"), ==, 2);
    JsonObject *memory = json_object_get_object_member(root, "memory");
    g_assert_cmpint(json_object_get_int_member(memory, "size"), ==, 1ll << 30);
    g_assert_cmpuint(json_object_get_size(memory), ==, 1);
    JsonObject *serial = json_object_get_object_member(root, "serial");
    g_assert_cmpstr(json_object_get_string_member(serial, "mode"), ==, "Pty");
    JsonObject *console = json_object_get_object_member(root, "console");
    g_assert_cmpstr(json_object_get_string_member(console, "mode"), ==, "Off");
    JsonObject *vsock = json_object_get_object_member(root, "vsock");
    g_assert_cmpint(json_object_get_int_member(vsock, "cid"), ==, 7);
    g_assert_cmpstr(json_object_get_string_member(vsock, "socket"), ==, "/run/vsnap/microvm/vsock.sock");
    g_assert_cmpint(json_object_get_int_member(vsock, "readiness_port"), ==, 1024);
    g_assert_cmpint(json_object_get_int_member(vsock, "notify_port"), ==, 1025);
    JsonObject *platform = json_object_get_object_member(root, "platform");
    g_assert_cmpstr(json_object_get_string_member(platform, "uuid"), ==, "4dea22b3-1d52-d8f3-2516-782e98ab3fa0");
    g_assert_false(json_object_has_member(platform, "serial_number")); /* no <smbios mode='sysinfo'/> */
    JsonArray *oem = json_object_get_array_member(platform, "oem_strings");
    g_assert_cmpuint(json_array_get_length(oem), ==, 1);
    g_assert_cmpstr(json_array_get_string_element(oem, 0), ==,
                    "io.systemd.credential:vmm.notify_socket=vsock-stream:2:1025");
    g_assert_cmpuint(json_object_get_size(root), ==, 7);
    /* The shim picks the pty: no path goes with it. */
    g_assert_cmpuint(json_object_get_size(serial), ==, 1);
}

/* <memoryBacking><hugepages/>: parsed, shown back as given, and the
 * shim's memory.hugepages; RAM must be whole huge pages. */
static void test_memory_backing(void)
{
    g_autofree char *xml = read_example("hugepages.xml");
    g_autoptr(domain_def) def = parse_ok(xml);
    g_assert_true(def->memory_backing.hugepages);
    g_assert_cmpuint(def->memory_backing.page_kib, ==, 2048);
    def->vsock.cid = 9;
    g_autofree char *formatted = check_round_trip(xml);
    g_assert_nonnull(strstr(formatted, "  <memoryBacking>\n    <hugepages>\n      <page size='2048' unit='KiB'/>\n"
                                       "    </hugepages>\n  </memoryBacking>\n"));
    g_autoptr(GError) error = NULL;
    g_autofree char *json = domain_def_to_vm_config_json(def, "/v.sock", NULL, &error);
    g_assert_no_error(error);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *memory = json_object_get_object_member(parse_json(json, parser), "memory");
    g_assert_true(json_object_get_boolean_member(memory, "hugepages"));
    g_assert_cmpint(json_object_get_int_member(memory, "hugepage_size"), ==, 2 << 20);

    g_autofree char *bare = domain_with("<memoryBacking><hugepages/><source type='memfd'/></memoryBacking>", "");
    g_autofree char *bare_formatted = check_round_trip(bare);
    g_assert_nonnull(strstr(bare_formatted, "  <memoryBacking>\n    <hugepages/>\n    <source type='memfd'/>\n"
                                            "  </memoryBacking>\n"));
    g_autofree char *odd = g_strdup("<domain type='kvm'><name>t</name><memory unit='KiB'>66560</memory>"
                                    "<memoryBacking><hugepages/></memoryBacking>"
                                    "<os><type>hvm</type><kernel>/boot/vmlinux</kernel></os></domain>");
    check_refusal(odd, VIR_ERR_CONFIG_UNSUPPORTED, "66560 KiB is not a whole number of the 2 MiB huge pages");
}

static void test_vm_config_file_and_minimal(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *file_xml = read_example("serial-file.xml");
    g_autoptr(domain_def) logged = parse_ok(file_xml);
    g_autofree char *json = domain_def_to_vm_config_json(logged, "/v.sock", NULL, &error);
    g_assert_no_error(error);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root = parse_json(json, parser);
    JsonObject *serial = json_object_get_object_member(root, "serial");
    g_assert_cmpstr(json_object_get_string_member(serial, "mode"), ==, "File");
    g_assert_cmpstr(json_object_get_string_member(serial, "file"), ==, "/var/log/vsnap/logged-serial.log");
    JsonObject *vsock = json_object_get_object_member(root, "vsock");
    g_assert_cmpint(json_object_get_int_member(vsock, "cid"), ==, 42);
    g_assert_cmpint(json_object_get_int_member(vsock, "readiness_port"), ==, 5000);
    g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(root, "memory"), "size"), ==,
                    512ll << 20);

    g_autofree char *minimal_xml = read_example("minimal.xml");
    g_autoptr(domain_def) minimal = parse_ok(minimal_xml);
    g_autofree char *minimal_json = domain_def_to_vm_config_json(minimal, NULL, NULL, &error);
    g_assert_no_error(error);
    g_autoptr(JsonParser) minimal_parser = json_parser_new();
    root = parse_json(minimal_json, minimal_parser);
    g_assert_false(json_object_has_member(root, "vsock"));
    JsonObject *payload = json_object_get_object_member(root, "payload");
    g_assert_false(json_object_has_member(payload, "initramfs"));
    g_assert_false(json_object_has_member(payload, "cmdline"));
    g_assert_cmpstr(json_object_get_string_member(json_object_get_object_member(root, "serial"), "mode"), ==,
                    "Null");
    g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(root, "cpus"), "boot_vcpus"), ==, 1);
}

/* The stock-guest example: sysinfo, smbios mode, rng and the notify port,
 * parsed, and turned into the shim's VmConfig. */
static void test_stock_guest(void)
{
    g_autofree char *xml = read_example("stock-guest.xml");
    g_autoptr(domain_def) def = parse_ok(xml);
    g_assert_true(def->sysinfo.present);
    g_assert_cmpint(def->smbios_mode, ==, DOMAIN_SMBIOS_SYSINFO);
    g_assert_cmpstr(def->sysinfo.manufacturer, ==, "Example Corp");
    g_assert_cmpstr(def->sysinfo.serial, ==, "ds=nocloud;s=http://192.0.2.1:8000/stock-guest/");
    g_assert_cmpuint(g_strv_length(def->sysinfo.oem_strings), ==, 1);
    g_assert_true(def->rng.present);
    g_assert_cmpstr(def->rng.backend, ==, "/dev/urandom");
    g_assert_cmpuint(def->rng.rate_bytes, ==, 4096);
    g_assert_cmpuint(def->rng.rate_period_ms, ==, 1000);
    g_assert_cmpuint(def->notify.port, ==, 1025);
    g_autoptr(domain_def) copy = domain_def_copy(def);
    g_assert_cmpstr(copy->sysinfo.oem_strings[0], ==, def->sysinfo.oem_strings[0]);
    g_assert_cmpstr(copy->rng.backend, ==, "/dev/urandom");
    if (g_file_test(LIBVIRT_SCHEMAS "/domain.rng", G_FILE_TEST_EXISTS)) {
        g_autofree char *formatted = domain_def_format(def, false, -1);
        check_libvirt_domain_schema(formatted);
    }

    def->vsock.cid = 9;
    def->notify.port = 7000;
    g_autoptr(GError) error = NULL;
    g_autofree char *json = domain_def_to_vm_config_json(def, "/v.sock", NULL, &error);
    g_assert_no_error(error);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root = parse_json(json, parser);
    g_assert_cmpstr(json_object_get_string_member(json_object_get_object_member(root, "payload"), "cmdline"), ==,
                    "console=ttyS0 root=/dev/vda rw systemd.set_credential=vmm.notify_socket:vsock-stream:2:7000");
    g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(root, "vsock"), "notify_port"), ==, 7000);
    JsonObject *rng = json_object_get_object_member(root, "rng");
    g_assert_cmpstr(json_object_get_string_member(rng, "src"), ==, "/dev/urandom");
    JsonObject *bandwidth = json_object_get_object_member(json_object_get_object_member(rng, "rate_limiter"), "bandwidth");
    g_assert_cmpint(json_object_get_int_member(bandwidth, "size"), ==, 4096);
    g_assert_cmpint(json_object_get_int_member(bandwidth, "refill_time"), ==, 1000);
    JsonObject *platform = json_object_get_object_member(root, "platform");
    g_assert_cmpstr(json_object_get_string_member(platform, "uuid"), ==, "6a5c1f9e-3b7d-4e2a-9c8b-1d0f2e3a4b5c");
    g_assert_cmpstr(json_object_get_string_member(platform, "serial_number"), ==,
                    "ds=nocloud;s=http://192.0.2.1:8000/stock-guest/");
    JsonObject *system = json_object_get_object_member(platform, "system");
    g_assert_cmpstr(json_object_get_string_member(system, "manufacturer"), ==, "Example Corp");
    g_assert_cmpstr(json_object_get_string_member(system, "product_name"), ==, "stock-guest");
    JsonArray *oem = json_object_get_array_member(platform, "oem_strings");
    g_assert_cmpuint(json_array_get_length(oem), ==, 2);
    g_assert_cmpstr(json_array_get_string_element(oem, 0), ==, "io.systemd.credential:system.hostname=stock-guest");
    g_assert_cmpstr(json_array_get_string_element(oem, 1), ==,
                    "io.systemd.credential:vmm.notify_socket=vsock-stream:2:7000");

    /* credential='off': neither the command line nor SMBIOS carries it. */
    def->notify.no_credential = true;
    g_autofree char *quiet = domain_def_to_vm_config_json(def, "/v.sock", NULL, &error);
    g_assert_null(strstr(quiet, "vmm.notify_socket"));
    g_autofree char *formatted = domain_def_format(def, false, -1);
    g_assert_nonnull(strstr(formatted, "<vsnap:notify port='7000' credential='off'/>"));
    g_autoptr(domain_def) again = parse_ok(formatted);
    g_assert_true(again->notify.no_credential);

    /* sysinfo without <smbios mode='sysinfo'/> stays out of the tables, as in libvirt. */
    def->smbios_mode = DOMAIN_SMBIOS_DEFAULT;
    g_autofree char *emulated = domain_def_to_vm_config_json(def, "/v.sock", NULL, &error);
    g_assert_null(strstr(emulated, "Example Corp"));
}

static void test_smbios_needs_sysinfo(void)
{
    g_autofree char *xml = g_strdup("<domain type='kvm'><name>t</name><memory unit='MiB'>64</memory>"
                                    "<os><type>hvm</type><kernel>/boot/vmlinux</kernel><smbios mode='sysinfo'/></os>"
                                    "</domain>");
    g_autoptr(GError) error = NULL;
    g_assert_null(domain_def_parse_string(xml, schema_dir, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR);
    g_assert_nonnull(strstr(error->message, "needs a <sysinfo"));
    g_clear_error(&error);
    g_autofree char *host = g_strdup("<domain type='kvm'><name>t</name><memory unit='MiB'>64</memory>"
                                     "<os><type>hvm</type><kernel>/boot/vmlinux</kernel><smbios mode='host'/></os>"
                                     "</domain>");
    g_assert_null(domain_def_parse_string(host, schema_dir, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED);
}

static void test_missing_schema(void)
{
    g_autofree char *xml = domain_with("", "");
    g_autoptr(GError) error = NULL;
    g_assert_null(domain_def_parse_string(xml, "/nonexistent", &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR);
    g_clear_error(&error);
    g_assert_null(domain_def_parse_string(xml, NULL, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG);
}

int main(int argc, char **argv)
{
    conf_test_init(&argc, &argv, &schema_dir, &examples_dir);
    g_test_add_func("/conf/domain/examples-round-trip", test_examples_round_trip);
    g_test_add_func("/conf/domain/example-fields", test_example_fields);
    g_test_add_func("/conf/domain/libvirt-schema", test_libvirt_schema);
    g_test_add_func("/conf/domain/variations-round-trip", test_variations_round_trip);
    g_test_add_func("/conf/domain/round-trip-keeps-values", test_round_trip_keeps_values);
    g_test_add_func("/conf/domain/os-boot-hd-kept", test_os_boot_hd_kept);
    g_test_add_func("/conf/domain/clone-defaults-to-shared", test_clone_defaults_to_shared);
    g_test_add_func("/conf/domain/live-details", test_live_details);
    g_test_add_func("/conf/domain/copy", test_copy);
    g_test_add_func("/conf/domain/refusals", test_refusals);
    g_test_add_func("/conf/domain/refusals-whole-document", test_refusals_whole_document);
    g_test_add_func("/conf/domain/uuid", test_uuid);
    g_test_add_func("/conf/domain/memory-units", test_memory_units);
    g_test_add_func("/conf/domain/vm-config", test_vm_config);
    g_test_add_func("/conf/domain/memory-backing", test_memory_backing);
    g_test_add_func("/conf/domain/vm-config-file-and-minimal", test_vm_config_file_and_minimal);
    g_test_add_func("/conf/domain/missing-schema", test_missing_schema);
    g_test_add_func("/conf/domain/stock-guest", test_stock_guest);
    g_test_add_func("/conf/domain/smbios-needs-sysinfo", test_smbios_needs_sysinfo);
    return g_test_run();
}
