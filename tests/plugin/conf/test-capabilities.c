/* Unit tests of plugin/conf's capabilities: the real host probed through /proc
 * and /sys, the documents checked for well-formedness, for the facts they
 * must carry, and against libvirt's own schemas (libvirt0 installs them). */
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <string.h>
#include <unistd.h>

#include "conf/capabilities.h"
#include "conf/xml-util.h"

#define SHIM "/usr/libexec/vsnap/vsnap-shim"
#define LIBVIRT_SCHEMAS "/usr/share/libvirt/schemas"

G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlXPathContext, xmlXPathFreeContext)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlXPathObject, xmlXPathFreeObject)

/* The string value of an XPath expression in doc ("" if nothing matches). */
static char *xpath_string(xmlDoc *doc, const char *expr)
{
    g_autoptr(xmlXPathContext) ctxt = xmlXPathNewContext(doc);
    g_autofree char *wrapped = g_strdup_printf("string(%s)", expr);
    g_autoptr(xmlXPathObject) obj = xmlXPathEvalExpression((const xmlChar *)wrapped, ctxt);
    g_assert_nonnull(obj);
    return g_strdup(obj->stringval ? (const char *)obj->stringval : "");
}

static double xpath_number(xmlDoc *doc, const char *expr)
{
    g_autoptr(xmlXPathContext) ctxt = xmlXPathNewContext(doc);
    g_autoptr(xmlXPathObject) obj = xmlXPathEvalExpression((const xmlChar *)expr, ctxt);
    g_assert_nonnull(obj);
    return xmlXPathCastToNumber(obj);
}

static void check_libvirt_schema(xmlDoc *doc, const char *schema)
{
    g_autofree char *path = g_build_filename(LIBVIRT_SCHEMAS, schema, NULL);
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_test_skip("libvirt's schemas are not installed (package libvirt0)");
        return;
    }
    g_autoptr(GError) error = NULL;
    if (!conf_xml_validate(doc, LIBVIRT_SCHEMAS, schema, &error))
        g_error("not valid for libvirt's %s: %s", schema, error->message);
}

static xmlDoc *read_ok(const char *xml)
{
    g_autoptr(GError) error = NULL;
    xmlDoc *doc = conf_xml_read(xml, "capabilities", &error);
    if (!doc)
        g_error("%s\n%s", error->message, xml);
    return doc;
}

static char *host_vendor_id(void)
{
    g_autofree char *cpuinfo = NULL;
    g_assert_true(g_file_get_contents("/proc/cpuinfo", &cpuinfo, NULL, NULL));
    const char *line = strstr(cpuinfo, "vendor_id");
    g_assert_nonnull(line);
    const char *colon = strchr(line, ':');
    return g_strstrip(g_strndup(colon + 1, strcspn(colon + 1, "\n")));
}

static guint64 proc_mem_total_kib(void)
{
    g_autofree char *meminfo = NULL;
    g_assert_true(g_file_get_contents("/proc/meminfo", &meminfo, NULL, NULL));
    const char *line = strstr(meminfo, "MemTotal:");
    g_assert_nonnull(line);
    return g_ascii_strtoull(line + strlen("MemTotal:"), NULL, 10);
}

static void test_capabilities_host(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *xml = capabilities_get_xml(SHIM, &error);
    g_assert_no_error(error);
    g_autoptr(xmlDoc) doc = read_ok(xml);

    g_autofree char *arch = xpath_string(doc, "/capabilities/host/cpu/arch");
    g_assert_cmpstr(arch, ==, "x86_64");
    g_autofree char *vendor = xpath_string(doc, "/capabilities/host/cpu/vendor");
    g_autofree char *vendor_id = host_vendor_id();
    if (strcmp(vendor_id, "GenuineIntel") == 0)
        g_assert_cmpstr(vendor, ==, "Intel");
    else if (strcmp(vendor_id, "AuthenticAMD") == 0)
        g_assert_cmpstr(vendor, ==, "AMD");
    else
        g_assert_cmpstr(vendor, !=, "");
    /* Long mode is a flag of every x86_64 host: the feature list is real. */
    g_assert_cmpfloat(xpath_number(doc, "count(/capabilities/host/cpu/feature[@name='lm'])"), ==, 1);

    /* The cells hold every online CPU once, and the host's memory. */
    g_autoptr(host_info) host = host_info_probe(&error);
    g_assert_no_error(error);
    g_assert_cmpuint(host->online_cpus, ==, (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
    g_assert_cmpfloat(xpath_number(doc, "count(//cells/cell/cpus/cpu)"), ==, host->online_cpus);
    /* The host's memory is MemTotal, what nodeinfo reports; one cell owns it
     * all, several cells cannot own more. */
    g_assert_cmpuint(host->memory_kib, ==, proc_mem_total_kib());
    if (host->cells->len == 1)
        g_assert_cmpfloat(xpath_number(doc, "/capabilities/host/topology/cells/cell/memory"), ==,
                          (double)host->memory_kib);
    else
        g_assert_cmpfloat(xpath_number(doc, "sum(//cells/cell/memory)"), <=, (double)host->memory_kib);
    g_assert_cmpuint(host->memory_kib, >, 0);
    g_assert_cmpuint(host->sockets * host->dies * host->cores * host->threads, ==, host->online_cpus);
    g_autofree char *threads = xpath_string(doc, "/capabilities/host/cpu/topology/@threads");
    g_assert_cmpuint(g_ascii_strtoull(threads, NULL, 10), ==, host->threads);

    g_autofree char *uuid = xpath_string(doc, "/capabilities/host/uuid");
    if (g_file_test("/etc/machine-id", G_FILE_TEST_EXISTS))
        g_assert_cmpuint(strlen(uuid), ==, 36);
    check_libvirt_schema(doc, "capability.rng");
}

static void test_capabilities_guest(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *xml = capabilities_get_xml(SHIM, &error);
    g_assert_no_error(error);
    g_autoptr(xmlDoc) doc = read_ok(xml);
    g_autofree char *os_type = xpath_string(doc, "/capabilities/guest/os_type");
    g_autofree char *arch = xpath_string(doc, "/capabilities/guest/arch/@name");
    g_autofree char *wordsize = xpath_string(doc, "/capabilities/guest/arch/wordsize");
    g_autofree char *emulator = xpath_string(doc, "/capabilities/guest/arch/emulator");
    g_autofree char *machine = xpath_string(doc, "/capabilities/guest/arch/machine");
    g_autofree char *domain = xpath_string(doc, "/capabilities/guest/arch/domain/@type");
    g_assert_cmpstr(os_type, ==, "hvm");
    g_assert_cmpstr(arch, ==, "x86_64");
    g_assert_cmpstr(wordsize, ==, "64");
    g_assert_cmpstr(emulator, ==, SHIM);
    g_assert_cmpstr(machine, ==, "vsnap");
    g_assert_cmpstr(domain, ==, "kvm");

    g_assert_null(capabilities_get_xml("vsnap-shim", &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG);
}

static void test_domain_capabilities(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *xml = domain_capabilities_format(SHIM, NULL, NULL, NULL, NULL, &error);
    g_assert_no_error(error);
    g_autoptr(xmlDoc) doc = read_ok(xml);
    g_autofree char *path = xpath_string(doc, "/domainCapabilities/path");
    g_autofree char *domain = xpath_string(doc, "/domainCapabilities/domain");
    g_autofree char *arch = xpath_string(doc, "/domainCapabilities/arch");
    g_autofree char *vcpu = xpath_string(doc, "/domainCapabilities/vcpu/@max");
    g_autofree char *passthrough =
        xpath_string(doc, "/domainCapabilities/cpu/mode[@name='host-passthrough']/@supported");
    g_autofree char *disk = xpath_string(doc, "/domainCapabilities/devices/disk/@supported");
    g_assert_cmpstr(path, ==, SHIM);
    g_assert_cmpstr(domain, ==, "kvm");
    g_assert_cmpstr(arch, ==, "x86_64");
    g_assert_cmpstr(vcpu, ==, "64");
    g_assert_cmpstr(passthrough, ==, "yes");
    g_assert_cmpstr(disk, ==, "yes");
    g_autofree char *disk_device = xpath_string(doc, "/domainCapabilities/devices/disk/enum[@name='diskDevice']/value");
    g_autofree char *disk_bus = xpath_string(doc, "/domainCapabilities/devices/disk/enum[@name='bus']/value");
    g_assert_cmpstr(disk_device, ==, "disk");
    g_assert_cmpstr(disk_bus, ==, "virtio");
    g_autofree char *rng = xpath_string(doc, "/domainCapabilities/devices/rng/@supported");
    g_autofree char *rng_backend = xpath_string(doc, "/domainCapabilities/devices/rng/enum[@name='backendModel']/value");
    g_assert_cmpstr(rng, ==, "yes");
    g_assert_cmpstr(rng_backend, ==, "random");
    check_libvirt_schema(doc, "domaincaps.rng");

    /* What clients may ask for: vsnap's own values, or NULL. */
    g_autofree char *same = domain_capabilities_format(SHIM, "/opt/vsnap/bin/vsnap-shim", "x86_64", "vsnap",
                                                       "kvm", &error);
    g_assert_no_error(error);
    g_assert_cmpstr(same, ==, xml);
    static const char *const refused[][4] = {
        {"/usr/bin/qemu-system-x86_64", NULL, NULL, NULL},
        {NULL, "aarch64", NULL, NULL},
        {NULL, NULL, "pc-q35-7.2", NULL},
        {NULL, NULL, NULL, "qemu"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(refused); i++) {
        g_autoptr(GError) refusal = NULL;
        g_assert_null(domain_capabilities_format(SHIM, refused[i][0], refused[i][1], refused[i][2],
                                                 refused[i][3], &refusal));
        g_assert_error(refusal, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED);
        const char *named = refused[i][0] ? refused[i][0] : refused[i][1] ? refused[i][1]
                                                           : refused[i][2] ? refused[i][2] : refused[i][3];
        g_assert_nonnull(strstr(refusal->message, named));
    }
}

static void test_parse_cpuinfo(void)
{
    /* The shape of an Intel host's /proc/cpuinfo (two processors). */
    static const char text[] = "processor\t: 0\n"
                               "vendor_id\t: GenuineIntel\n"
                               "cpu family\t: 6\n"
                               "model\t\t: 85\n"
                               "model name\t: Intel(R) Xeon(R) Gold 6138 CPU @ 2.00GHz\n"
                               "stepping\t: 4\n"
                               "microcode\t: 0x2006e05\n"
                               "cpu MHz\t\t: 2000.000\n"
                               "flags\t\t: fpu vme pae vmx lm  avx512f\n"
                               "address sizes\t: 46 bits physical, 48 bits virtual\n"
                               "\n"
                               "processor\t: 1\n"
                               "vendor_id\t: SomethingElse\n"
                               "flags\t\t: other\n";
    struct host_cpu_info cpu = {0};
    g_autoptr(GError) error = NULL;
    g_assert_true(host_cpu_parse_cpuinfo(text, &cpu, &error));
    g_assert_cmpstr(cpu.vendor, ==, "Intel");
    g_assert_cmpstr(cpu.model, ==, "Intel(R) Xeon(R) Gold 6138 CPU @ 2.00GHz");
    g_assert_cmpuint(cpu.family, ==, 6);
    g_assert_cmpuint(cpu.model_number, ==, 85);
    g_assert_cmpuint(cpu.stepping, ==, 4);
    g_assert_cmpuint(cpu.microcode, ==, 0x2006e05);
    g_assert_cmpuint(cpu.mhz, ==, 2000);
    g_assert_cmpuint(cpu.phys_bits, ==, 46);
    g_assert_cmpuint(cpu.flags->len, ==, 6);
    g_assert_cmpstr(cpu.flags->pdata[5], ==, "avx512f");
    g_free(cpu.vendor);
    g_free(cpu.model);
    g_ptr_array_unref(cpu.flags);

    struct host_cpu_info empty = {0};
    g_assert_false(host_cpu_parse_cpuinfo("garbage\n\n", &empty, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR);
    g_ptr_array_unref(empty.flags);
}

static void test_parse_cpu_list(void)
{
    g_autoptr(GArray) ids = g_array_new(false, false, sizeof(unsigned));
    g_autoptr(GError) error = NULL;
    g_assert_true(host_parse_cpu_list("0-2,5,7-8\n", ids, &error));
    static const unsigned expected[] = {0, 1, 2, 5, 7, 8};
    g_assert_cmpmem(ids->data, ids->len * sizeof(unsigned), expected, sizeof(expected));
    static const char *const bad[] = {"3-1", "a", "1,,2", "-1", "0-99999999", "1-"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GArray) none = g_array_new(false, false, sizeof(unsigned));
        g_autoptr(GError) refusal = NULL;
        if (host_parse_cpu_list(bad[i], none, &refusal))
            g_error("CPU list '%s' accepted", bad[i]);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/conf/capabilities/host", test_capabilities_host);
    g_test_add_func("/conf/capabilities/guest", test_capabilities_guest);
    g_test_add_func("/conf/capabilities/domain-capabilities", test_domain_capabilities);
    g_test_add_func("/conf/capabilities/parse-cpuinfo", test_parse_cpuinfo);
    g_test_add_func("/conf/capabilities/parse-cpu-list", test_parse_cpu_list);
    return g_test_run();
}
