/* <sysinfo type='smbios'> and <os><smbios mode=...>: what the guest reads in
 * SMBIOS. Of libvirt's sysinfo, the <system> entries and <oemStrings> are
 * supported (the shim's platform config carries them); <bios>, <baseBoard>,
 * <chassis> and the rest are refused by name. As in libvirt's QEMU driver,
 * sysinfo reaches the guest only with <smbios mode='sysinfo'/>; the domain's
 * UUID is the SMBIOS system UUID whatever the mode. */
#include "domain-parse.h"

#include <string.h>

#include "conf/xml-util.h"

static const char *const no_attributes[] = {NULL};

/* The <system> entries libvirt knows, and where each goes. */
static char **system_entry_slot(struct domain_sysinfo *s, const char *name)
{
    static const char *const names[] = {"manufacturer", "product", "version", "serial", "uuid", "sku", "family"};
    char **slots[] = {&s->manufacturer, &s->product, &s->version, &s->serial, &s->uuid, &s->sku, &s->family};
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
        if (name && strcmp(name, names[i]) == 0)
            return slots[i];
    return NULL;
}

/* <entry>text</entry>: text must not be empty (SMBIOS cannot say "" apart from "none"). */
static char *entry_text(const xmlNode *entry, const char *where, GError **error)
{
    if (!conf_xml_check_no_children(entry, error))
        return NULL;
    char *text = conf_xml_text(entry);
    if (!*text) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "an empty <entry> in <sysinfo><%s>", where);
        g_free(text);
        return NULL;
    }
    return text;
}

static bool parse_system(struct domain_sysinfo *s, const xmlNode *system, GError **error)
{
    static const char *const attributes[] = {"name", NULL};
    if (!conf_xml_check_attributes(system, no_attributes, error))
        return false;
    for (const xmlNode *entry = system->children; entry; entry = entry->next) {
        if (!conf_xml_is_element(entry))
            continue;
        if (!conf_xml_is(entry, "entry")) {
            conf_xml_set_unsupported_element(error, entry);
            return false;
        }
        if (!conf_xml_check_attributes(entry, attributes, error))
            return false;
        g_autofree char *name = conf_xml_prop(entry, "name");
        char **slot = system_entry_slot(s, name);
        if (!slot) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                        "<sysinfo><system><entry name='%s'> is not one of manufacturer, product, version, serial, "
                        "uuid, sku, family", name ? name : "");
            return false;
        }
        if (*slot) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                        "<sysinfo><system><entry name='%s'> is given twice", name);
            return false;
        }
        if (!(*slot = entry_text(entry, "system", error)))
            return false;
    }
    return true;
}

static bool parse_oem_strings(struct domain_sysinfo *s, const xmlNode *oem, GError **error)
{
    if (!conf_xml_check_attributes(oem, no_attributes, error))
        return false;
    g_autoptr(GStrvBuilder) strings = g_strv_builder_new();
    for (char **old = s->oem_strings; old && *old; old++)
        g_strv_builder_add(strings, *old);
    for (const xmlNode *entry = oem->children; entry; entry = entry->next) {
        if (!conf_xml_is_element(entry))
            continue;
        if (!conf_xml_is(entry, "entry")) {
            conf_xml_set_unsupported_element(error, entry);
            return false;
        }
        if (!conf_xml_check_attributes(entry, no_attributes, error))
            return false;
        g_autofree char *text = entry_text(entry, "oemStrings", error);
        if (!text)
            return false;
        g_strv_builder_add(strings, text);
    }
    g_strfreev(s->oem_strings);
    s->oem_strings = g_strv_builder_end(strings);
    return true;
}

bool domain_parse_sysinfo(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"type", NULL};
    if (!conf_xml_check_attributes(node, attributes, error))
        return false;
    g_autofree char *type = conf_xml_prop(node, "type");
    if (!type || strcmp(type, "smbios") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<sysinfo type='%s'> is not supported by vsnap: only 'smbios'", type ? type : "");
        return false;
    }
    static const char *const children[] = {"system", "oemStrings"};
    const xmlNode *found[G_N_ELEMENTS(children)] = {NULL};
    if (!conf_xml_collect_children(node, children, G_N_ELEMENTS(children), found, error) ||
        (found[0] && !parse_system(&def->sysinfo, found[0], error)) ||
        (found[1] && !parse_oem_strings(&def->sysinfo, found[1], error)))
        return false;
    def->sysinfo.present = true;
    return true;
}

bool domain_parse_smbios(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"mode", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *mode = conf_xml_prop(node, "mode");
    if (mode && strcmp(mode, "sysinfo") == 0) {
        def->smbios_mode = DOMAIN_SMBIOS_SYSINFO;
        return true;
    }
    if (mode && strcmp(mode, "emulate") == 0) {
        def->smbios_mode = DOMAIN_SMBIOS_EMULATE;
        return true;
    }
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                "<smbios mode='%s'> is not supported by vsnap: only 'sysinfo' or 'emulate' (a microVM has no "
                "host tables to copy)", mode ? mode : "");
    return false;
}

/* As libvirt: sysinfo mode needs a sysinfo, and its system UUID must be the domain's. */
bool domain_check_sysinfo(const struct domain_def *def, GError **error)
{
    if (def->smbios_mode == DOMAIN_SMBIOS_SYSINFO && !def->sysinfo.present) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR,
                    "<smbios mode='sysinfo'/> needs a <sysinfo type='smbios'> to take the tables from");
        return false;
    }
    if (!def->sysinfo.uuid)
        return true;
    unsigned char uuid[16];
    if (!domain_uuid_parse(def->sysinfo.uuid, uuid)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "malformed <sysinfo> system uuid '%s'",
                    def->sysinfo.uuid);
        return false;
    }
    if (memcmp(uuid, def->uuid, 16) != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "UUID mismatch between <uuid> and <sysinfo> ('%s')", def->sysinfo.uuid);
        return false;
    }
    return true;
}
