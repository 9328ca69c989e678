/* <metadata>: vsnap's own namespace is parsed; every other namespace's element
 * is kept verbatim so that dumpxml returns it, as libvirt does. */
#include "domain-parse.h"

#include <libxml/xmlsave.h>
#include <string.h>

#include "store/store.h"
#include "conf/xml-util.h"

static bool is_vsnap(const xmlNode *node, const char *name)
{
    return conf_xml_is_element(node) && node->ns && node->ns->href &&
           strcmp((const char *)node->ns->href, VSNAP_DOMAIN_NS) == 0 &&
           strcmp((const char *)node->name, name) == 0;
}

static bool parse_restore(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"mode", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *mode = conf_xml_prop(node, "mode");
    for (int m = RESTORE_MODE_ONDEMAND; m <= RESTORE_MODE_SHARED; m++) {
        if (mode && strcmp(mode, restore_mode_to_string(m)) == 0) {
            def->vsnap.restore_mode = m;
            return true;
        }
    }
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                "<vsnap:restore mode='%s'> must be 'ondemand', 'merge', 'copy' or 'shared'", mode ? mode : "");
    return false;
}

static bool parse_readiness(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"port", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *port = conf_xml_prop(node, "port");
    uint64_t value;
    /* Port 0xffffffff is VMADDR_PORT_ANY, never a listening port. */
    if (!conf_parse_uint64(port, 1, G_MAXUINT32 - 1, "<vsnap:readiness port>", &value, error))
        return false;
    def->vsnap.readiness_port = (uint32_t)value;
    return true;
}

/* <vsnap:notify port='1025' credential='on|off'/>: systemd's sd_notify port. */
static bool parse_notify(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"port", "credential", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *port = conf_xml_prop(node, "port");
    g_autofree char *credential = conf_xml_prop(node, "credential");
    uint64_t value = VSNAP_DEFAULT_NOTIFY_PORT;
    if (port && !conf_parse_uint64(port, 1, G_MAXUINT32 - 1, "<vsnap:notify port>", &value, error))
        return false;
    if (credential && strcmp(credential, "on") != 0 && strcmp(credential, "off") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "<vsnap:notify credential='%s'> must be 'on' or 'off'",
                    credential);
        return false;
    }
    def->notify.port = (uint32_t)value;
    def->notify.no_credential = credential && strcmp(credential, "off") == 0;
    return true;
}

/* <vsnap:store url='...'/>: the store this domain's snapshots are pushed
 * to, instead of the daemon's [store] url. Checked for its form here, so a
 * bad URL is refused at define time, not at the first snapshot. */
static bool parse_store(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"url", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *url = conf_xml_prop(node, "url");
    g_autoptr(GError) bad = NULL;
    if (!store_url_check(url, &bad)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "<vsnap:store url>: %s", bad->message);
        return false;
    }
    g_free(def->vsnap.store_url);
    def->vsnap.store_url = g_steal_pointer(&url);
    return true;
}

/* <vsnap:from domain='NAME' snapshot='SNAP'/>: a clone. Whether that
 * snapshot exists and fits is the driver's to check (persist/clone.h). */
static bool parse_from(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"domain", "snapshot", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *domain = conf_xml_prop(node, "domain");
    g_autofree char *snapshot = conf_xml_prop(node, "snapshot");
    if (!domain || !*domain || !snapshot || !*snapshot) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "<vsnap:from> needs both domain='NAME' and snapshot='SNAP'");
        return false;
    }
    if (g_strcmp0(domain, def->name) == 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "domain '%s' cannot be a clone of itself (<vsnap:from domain='%s'>)", domain, domain);
        return false;
    }
    def->vsnap.from_domain = g_steal_pointer(&domain);
    def->vsnap.from_snapshot = g_steal_pointer(&snapshot);
    return true;
}

static bool parse_vsnap(struct domain_def *def, const xmlNode *vsnap, GError **error)
{
    bool restore_seen = false, readiness_seen = false, notify_seen = false, store_seen = false;
    bool from_seen = false;
    if (!conf_xml_check_attributes(vsnap, (const char *const[]){NULL}, error))
        return false;
    for (const xmlNode *child = vsnap->children; child; child = child->next) {
        if (!conf_xml_is_element(child))
            continue;
        bool restore = is_vsnap(child, "restore"), readiness = is_vsnap(child, "readiness");
        if (is_vsnap(child, "store")) {
            if (store_seen) {
                conf_xml_set_duplicate_element(error, child);
                return false;
            }
            store_seen = true;
            if (!parse_store(def, child, error))
                return false;
            continue;
        }
        if (is_vsnap(child, "from")) {
            if (from_seen) {
                conf_xml_set_duplicate_element(error, child);
                return false;
            }
            from_seen = true;
            if (!parse_from(def, child, error))
                return false;
            continue;
        }
        if (is_vsnap(child, "notify")) {
            if (notify_seen) {
                conf_xml_set_duplicate_element(error, child);
                return false;
            }
            notify_seen = true;
            if (!parse_notify(def, child, error))
                return false;
            continue;
        }
        if (!restore && !readiness) {
            conf_xml_set_unsupported_element(error, child);
            return false;
        }
        if ((restore && restore_seen) || (readiness && readiness_seen)) {
            conf_xml_set_duplicate_element(error, child);
            return false;
        }
        restore_seen |= restore;
        readiness_seen |= readiness;
        if (restore ? !parse_restore(def, child, error) : !parse_readiness(def, child, error))
            return false;
    }
    def->vsnap.restore_given = restore_seen;
    return true;
}

void domain_default_restore_mode(struct domain_def *def)
{
    /* Clones share the pages they only read unless told otherwise; RAM on
     * huge pages cannot be a private mapping of a file, so those restore on
     * demand. */
    if (domain_def_is_clone(def) && !def->vsnap.restore_given)
        def->vsnap.restore_mode = def->memory_backing.hugepages ? RESTORE_MODE_ONDEMAND : RESTORE_MODE_SHARED;
}

char *domain_metadata_serialize(const xmlNode *node)
{
    g_autoptr(xmlDoc) doc = xmlNewDoc((const xmlChar *)"1.0");
    xmlNode *copy = xmlDocCopyNode((xmlNode *)node, doc, 1);
    if (!copy)
        return NULL;
    xmlDocSetRootElement(doc, copy);
    xmlBuffer *buffer = xmlBufferCreate();
    xmlNodeDump(buffer, doc, copy, 0, 0);
    char *text = g_strdup((const char *)xmlBufferContent(buffer));
    xmlBufferFree(buffer);
    return text;
}

static bool keep_foreign(struct domain_def *def, const xmlNode *node, GString *foreign, GError **error)
{
    if (!node->ns) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "metadata element <%s> must be in an XML namespace", (const char *)node->name);
        return false;
    }
    g_autofree char *text = domain_metadata_serialize(node);
    if (!text) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_MEMORY, "cannot copy metadata element");
        return false;
    }
    if (foreign->len)
        g_string_append_c(foreign, '\n');
    g_string_append(foreign, text);
    return true;
}

bool domain_parse_metadata(struct domain_def *def, const xmlNode *metadata, GError **error)
{
    g_autoptr(GString) foreign = g_string_new(NULL);
    bool vsnap_seen = false;
    if (!conf_xml_check_attributes(metadata, (const char *const[]){NULL}, error))
        return false;
    for (const xmlNode *child = metadata->children; child; child = child->next) {
        if (!conf_xml_is_element(child))
            continue;
        if (is_vsnap(child, "vsnap")) {
            if (vsnap_seen) {
                conf_xml_set_duplicate_element(error, child);
                return false;
            }
            vsnap_seen = true;
            if (!parse_vsnap(def, child, error))
                return false;
        } else if (child->ns && child->ns->href && strcmp((const char *)child->ns->href, VSNAP_DOMAIN_NS) == 0) {
            conf_xml_set_unsupported_element(error, child);
            return false;
        } else if (!keep_foreign(def, child, foreign, error)) {
            return false;
        }
    }
    g_free(def->foreign_metadata);
    def->foreign_metadata = foreign->len ? g_strdup(foreign->str) : NULL;
    return true;
}
