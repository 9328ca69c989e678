/* <os>, <features>, <cpu> and <clock>: only what is true of every vsnap VM
 * (direct kernel boot of an x86-64 hvm guest, ACPI, local APIC, host CPU,
 * UTC clock) is accepted, so that keeping it promises nothing false. */
#include "domain-parse.h"

#include <string.h>

#include "conf/xml-util.h"

static const char *const no_attributes[] = {NULL};

static bool check_value(const char *value, const char *expected, const char *what, GError **error)
{
    if (value && strcmp(value, expected) != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "%s '%s' is not supported by vsnap: only '%s'", what, value, expected);
        return false;
    }
    return true;
}

static bool parse_os_type(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"arch", "machine", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *arch = conf_xml_prop(node, "arch");
    g_autofree char *machine = conf_xml_prop(node, "machine");
    g_autofree char *type = conf_xml_text_trimmed(node);
    if (!check_value(type, "hvm", "os type", error) || !check_value(arch, DOMAIN_ARCH, "architecture", error) ||
        !check_value(machine, DOMAIN_MACHINE, "machine type", error))
        return false;
    g_free(def->os_type);
    def->os_type = g_steal_pointer(&type);
    return true;
}

static bool parse_path(const xmlNode *node, char **out, GError **error)
{
    if (!conf_xml_check_attributes(node, no_attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *path = conf_xml_text_trimmed(node);
    g_autofree char *what = g_strdup_printf("<%s>", (const char *)node->name);
    if (!domain_check_absolute_path(path, what, error))
        return false;
    *out = g_steal_pointer(&path);
    return true;
}

static bool parse_kernel(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_path(node, &def->kernel, error);
}

static bool parse_initrd(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_path(node, &def->initrd, error);
}

static bool parse_cmdline(struct domain_def *def, const xmlNode *node, GError **error)
{
    if (!conf_xml_check_attributes(node, no_attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    def->cmdline = conf_xml_text(node);
    return true;
}

/* virt-manager's New VM wizard and virt-install write <boot dev='hd'/> for
 * every imported disk. libvirt's QEMU driver keeps it beside a <kernel>,
 * which boots first, so vsnap keeps it too; it promises nothing more. The
 * other devices (cdrom, network, fd) name a boot vsnap has no device for. */
static bool parse_boot(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"dev", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *dev = conf_xml_prop(node, "dev");
    if (!dev || strcmp(dev, "hd") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<boot dev='%s'> in <os> is not supported by vsnap: it boots the <kernel> "
                    "(direct kernel boot); only dev='hd' is accepted, and kept", dev ? dev : "");
        return false;
    }
    def->boot_hd = true;
    return true;
}

bool domain_parse_os(struct domain_def *def, const xmlNode *os, GError **error)
{
    static const struct domain_child_parser children[] = {
        {"type", parse_os_type, false},
        {"kernel", parse_kernel, false},
        {"initrd", parse_initrd, false},
        {"cmdline", parse_cmdline, false},
        {"boot", parse_boot, false},
        {"smbios", domain_parse_smbios, false},
    };
    uint32_t seen = 0;
    /* firmware='efi' and friends are refused here, by name. */
    if (!conf_xml_check_attributes(os, no_attributes, error) ||
        !domain_parse_children(def, os, children, G_N_ELEMENTS(children), &seen, error))
        return false;
    if (!def->os_type) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "missing <type> in <os>");
        return false;
    }
    return true;
}

static bool parse_flag(const xmlNode *node, bool *flag, GError **error)
{
    if (!conf_xml_check_attributes(node, no_attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    *flag = true;
    return true;
}

static bool parse_acpi(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_flag(node, &def->features.acpi, error);
}

static bool parse_apic(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_flag(node, &def->features.apic, error);
}

static bool parse_pae(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_flag(node, &def->features.pae, error);
}

bool domain_parse_features(struct domain_def *def, const xmlNode *features, GError **error)
{
    static const struct domain_child_parser children[] = {
        {"acpi", parse_acpi, false},
        {"apic", parse_apic, false},
        {"pae", parse_pae, false},
    };
    uint32_t seen = 0;
    return conf_xml_check_attributes(features, no_attributes, error) &&
           domain_parse_children(def, features, children, G_N_ELEMENTS(children), &seen, error);
}

static bool parse_migratable(struct domain_def *def, const char *value, GError **error)
{
    if (!value)
        def->cpu.migratable = CPU_MIGRATABLE_UNSET;
    else if (strcmp(value, "on") == 0)
        def->cpu.migratable = CPU_MIGRATABLE_ON;
    else if (strcmp(value, "off") == 0)
        def->cpu.migratable = CPU_MIGRATABLE_OFF;
    else {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "<cpu migratable='%s'> must be 'on' or 'off'", value);
        return false;
    }
    return true;
}

bool domain_parse_cpu(struct domain_def *def, const xmlNode *cpu, GError **error)
{
    static const char *const attributes[] = {"mode", "check", "migratable", NULL};
    if (!conf_xml_check_attributes(cpu, attributes, error) || !conf_xml_check_no_children(cpu, error))
        return false;
    g_autofree char *mode = conf_xml_prop(cpu, "mode");
    g_autofree char *check = conf_xml_prop(cpu, "check");
    g_autofree char *migratable = conf_xml_prop(cpu, "migratable");
    /* The shim gives the guest the host's CPUID; libvirt's default mode is
     * 'custom', which vsnap cannot provide. */
    if (!check_value(mode ? mode : "custom", "host-passthrough", "<cpu> mode", error) ||
        !check_value(check, "none", "<cpu> check", error) || !parse_migratable(def, migratable, error))
        return false;
    def->cpu.present = true;
    def->cpu.check_none = check != NULL;
    return true;
}

bool domain_parse_clock(struct domain_def *def, const xmlNode *clock, GError **error)
{
    static const char *const attributes[] = {"offset", NULL};
    if (!conf_xml_check_attributes(clock, attributes, error) || !conf_xml_check_no_children(clock, error))
        return false;
    g_autofree char *offset = conf_xml_prop(clock, "offset");
    if (!check_value(offset ? offset : "utc", "utc", "<clock> offset", error))
        return false;
    def->clock_utc = true;
    return true;
}
