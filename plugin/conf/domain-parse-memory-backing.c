/* <memoryBacking>: guest RAM on huge pages. The shim backs RAM with a
 * memfd always, on 2 MiB hugetlbfs pages with <hugepages/> (memory.hugepages
 * and hugepage_size in its Cloud Hypervisor config). So <hugepages> is
 * accepted with no <page> or with one <page> of 2 MiB (libvirt's default
 * unit is KiB), <source type='memfd'/> is what RAM is anyway, and every
 * other child (nosharepages, locked, access, allocation, discard) and
 * page size is refused naming it. */
#include <string.h>

#include "domain-parse.h"
#include "util/virt-error.h"
#include "conf/xml-util.h"

#define HUGE_PAGE_KIB 2048u

static bool parse_page(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"size", "unit", "nodeset", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *nodeset = conf_xml_prop(node, "nodeset");
    if (nodeset) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<hugepages><page nodeset='%s'> is not supported by vsnap: its guests have no NUMA nodes",
                    nodeset);
        return false;
    }
    g_autofree char *size = conf_xml_prop(node, "size");
    g_autofree char *unit = conf_xml_prop(node, "unit");
    uint64_t kib = 0;
    if (!size) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "<hugepages><page> needs a size");
        return false;
    }
    if (!domain_memory_to_kib(size, unit, &kib, error))
        return false;
    if (kib != HUGE_PAGE_KIB) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<hugepages><page> of %" G_GUINT64_FORMAT " KiB is not supported by vsnap: guest RAM is "
                    "backed by 2 MiB huge pages (size='2048' unit='KiB') only", kib);
        return false;
    }
    def->memory_backing.page_kib = kib;
    return true;
}

static bool parse_hugepages(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const struct domain_child_parser children[] = {
        {"page", parse_page, false},
    };
    uint32_t seen = 0;
    if (!conf_xml_check_attributes(node, (const char *const[]){NULL}, error) ||
        !domain_parse_children(def, node, children, G_N_ELEMENTS(children), &seen, error))
        return false;
    def->memory_backing.hugepages = true;
    return true;
}

static bool parse_source(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"type", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *type = conf_xml_prop(node, "type");
    if (g_strcmp0(type, "memfd") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<memoryBacking><source type='%s'> is not supported by vsnap: guest RAM is a memfd "
                    "(type='memfd')", type ? type : "");
        return false;
    }
    def->memory_backing.source_memfd = true;
    return true;
}

bool domain_parse_memory_backing(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const struct domain_child_parser children[] = {
        {"hugepages", parse_hugepages, false},
        {"source", parse_source, false},
    };
    uint32_t seen = 0;
    if (!conf_xml_check_attributes(node, (const char *const[]){NULL}, error) ||
        !domain_parse_children(def, node, children, G_N_ELEMENTS(children), &seen, error))
        return false;
    def->memory_backing.present = true;
    return true;
}

bool domain_check_memory_backing(const struct domain_def *def, GError **error)
{
    if (def->memory_backing.hugepages && def->memory_kib % HUGE_PAGE_KIB) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<memory> of %" G_GUINT64_FORMAT " KiB is not a whole number of the 2 MiB huge pages "
                    "<memoryBacking><hugepages/> puts it on", def->memory_kib);
        return false;
    }
    return true;
}
