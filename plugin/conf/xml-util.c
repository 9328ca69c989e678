#include "conf/xml-util.h"

#include <errno.h>
#include <libxml/parser.h>
#include <libxml/xmlerror.h>
#include <stdlib.h>
#include <string.h>

static char *strip_newline(const char *message)
{
    char *copy = g_strdup(message ? message : "unknown error");
    return g_strchomp(copy);
}

xmlDoc *conf_xml_read(const char *xml, const char *what, GError **error)
{
    if (!xml) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "no %s XML given", what);
        return NULL;
    }
    size_t len = strlen(xml);
    if (len > G_MAXINT) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "%s XML is too large", what);
        return NULL;
    }
    xmlInitParser();
    xmlParserCtxt *ctxt = xmlNewParserCtxt();
    if (!ctxt) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_MEMORY, "cannot create an XML parser");
        return NULL;
    }
    /* No XML_PARSE_NOENT (entities stay unexpanded) and no DTD loading. */
    xmlDoc *doc = xmlCtxtReadMemory(ctxt, xml, (int)len, what, NULL,
                                    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc) {
        const xmlError *err = xmlCtxtGetLastError(ctxt);
        g_autofree char *msg = strip_newline(err ? err->message : NULL);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR,
                    "malformed %s XML at line %d, column %d: %s", what,
                    err ? err->line : 0, err ? err->int2 : 0, msg);
    } else if (doc->intSubset || doc->extSubset) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR,
                    "%s XML must not contain a document type declaration", what);
        xmlFreeDoc(doc);
        doc = NULL;
    }
    xmlFreeParserCtxt(ctxt);
    return doc;
}

bool conf_xml_is_element(const xmlNode *node)
{
    return node && node->type == XML_ELEMENT_NODE;
}

bool conf_xml_is(const xmlNode *node, const char *name)
{
    return conf_xml_is_element(node) && !node->ns && strcmp((const char *)node->name, name) == 0;
}

char *conf_xml_display_name(const xmlNode *node)
{
    if (node->ns && node->ns->prefix)
        return g_strdup_printf("<%s:%s>", node->ns->prefix, node->name);
    return g_strdup_printf("<%s>", node->name);
}

char *conf_xml_prop(const xmlNode *node, const char *name)
{
    xmlChar *value = xmlGetNoNsProp(node, (const xmlChar *)name);
    if (!value)
        return NULL;
    char *copy = g_strdup((const char *)value);
    xmlFree(value);
    return copy;
}

char *conf_xml_text(const xmlNode *node)
{
    xmlChar *value = xmlNodeGetContent(node);
    char *copy = g_strdup(value ? (const char *)value : "");
    xmlFree(value);
    return copy;
}

char *conf_xml_text_trimmed(const xmlNode *node)
{
    return g_strstrip(conf_xml_text(node));
}

static bool name_allowed(const char *name, const char *const *allowed)
{
    for (; allowed && *allowed; allowed++)
        if (strcmp(name, *allowed) == 0)
            return true;
    return false;
}

bool conf_xml_check_attributes(const xmlNode *node, const char *const *allowed, GError **error)
{
    for (const xmlAttr *attr = node->properties; attr; attr = attr->next) {
        if (!attr->ns && name_allowed((const char *)attr->name, allowed))
            continue;
        g_autofree char *element = conf_xml_display_name(node);
        xmlChar *value = xmlNodeGetContent((const xmlNode *)attr);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "unsupported attribute %s%s%s='%s' on %s",
                    attr->ns && attr->ns->prefix ? (const char *)attr->ns->prefix : "",
                    attr->ns && attr->ns->prefix ? ":" : "", attr->name,
                    value ? (const char *)value : "", element);
        xmlFree(value);
        return false;
    }
    return true;
}

bool conf_xml_check_no_children(const xmlNode *node, GError **error)
{
    for (const xmlNode *child = node->children; child; child = child->next) {
        if (conf_xml_is_element(child)) {
            conf_xml_set_unsupported_element(error, child);
            return false;
        }
    }
    return true;
}

void conf_xml_set_unsupported_element(GError **error, const xmlNode *child)
{
    g_autofree char *name = conf_xml_display_name(child);
    if (conf_xml_is_element(child->parent)) {
        g_autofree char *parent = conf_xml_display_name(child->parent);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "unsupported element %s in %s", name, parent);
    } else {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "unsupported element %s", name);
    }
}

void conf_xml_set_duplicate_element(GError **error, const xmlNode *child)
{
    g_autofree char *name = conf_xml_display_name(child);
    g_autofree char *parent = conf_xml_display_name(child->parent);
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR,
                "element %s appears more than once in %s", name, parent);
}

bool conf_xml_collect_children(const xmlNode *parent, const char *const *names, size_t n,
                               const xmlNode **found, GError **error)
{
    for (const xmlNode *child = parent->children; child; child = child->next) {
        if (!conf_xml_is_element(child))
            continue;
        size_t index = 0;
        while (index < n && !conf_xml_is(child, names[index]))
            index++;
        if (index == n) {
            conf_xml_set_unsupported_element(error, child);
            return false;
        }
        if (found[index]) {
            conf_xml_set_duplicate_element(error, child);
            return false;
        }
        found[index] = child;
    }
    return true;
}

bool conf_parse_uint64(const char *text, uint64_t min, uint64_t max, const char *what,
                       uint64_t *out, GError **error)
{
    char *end = NULL;
    if (!text || !g_ascii_isdigit(text[0])) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "%s must be a decimal number, not '%s'", what, text ? text : "");
        return false;
    }
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno == ERANGE || *end != '\0') {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "%s must be a decimal number, not '%s'", what, text);
        return false;
    }
    if (value < min || value > max) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "%s %llu is out of range (%" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT ")",
                    what, value, min, max);
        return false;
    }
    *out = value;
    return true;
}
