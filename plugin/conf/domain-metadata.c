/* virsh desc and metadata on a definition (domain-conf.h): its title and
 * description, and the elements of other namespaces in <metadata>, which
 * domain_def.foreign_metadata keeps serialized, one element after the other
 * (domain-parse-metadata.c). */
#include <libvirt/libvirt.h>
#include <libxml/parser.h>
#include <string.h>

#include "conf/xml-util.h"
#include "domain-parse.h"
#include "util/virt-error.h"

/* No network, no entity expansion (an element comes from a client). */
#define METADATA_PARSE_OPTIONS XML_PARSE_NONET

static void set_not_found(GError **error)
{
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN_METADATA,
                "metadata not found: Requested metadata element is not present");
}

static bool same_ns(const xmlNode *node, const char *uri)
{
    return node->ns && node->ns->href && strcmp((const char *)node->ns->href, uri) == 0;
}

/* The foreign elements as children of one <metadata> document. */
static xmlDoc *parse_foreign(const char *foreign)
{
    g_autofree char *wrapped = g_strdup_printf("<metadata>%s</metadata>", foreign ? foreign : "");
    return xmlReadMemory(wrapped, (int)strlen(wrapped), "metadata.xml", NULL, METADATA_PARSE_OPTIONS);
}

/* The element itself, without its own namespace prefix, as libvirt answers. */
static char *element_of(const char *foreign, const char *uri)
{
    g_autoptr(xmlDoc) doc = parse_foreign(foreign);
    xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    for (xmlNode *child = root ? root->children : NULL; child; child = child->next) {
        if (child->type != XML_ELEMENT_NODE || !same_ns(child, uri))
            continue;
        xmlNs *ns = child->ns;
        child->ns = NULL;
        char *text = domain_metadata_serialize(child);
        child->ns = ns;
        return text;
    }
    return NULL;
}

char *domain_def_get_metadata(const struct domain_def *def, int type, const char *uri, GError **error)
{
    const char *text = NULL;
    char *element = NULL;
    switch (type) {
    case VIR_DOMAIN_METADATA_DESCRIPTION:
        text = def->description;
        break;
    case VIR_DOMAIN_METADATA_TITLE:
        text = def->title;
        break;
    case VIR_DOMAIN_METADATA_ELEMENT:
        if (!uri) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "a metadata element needs its namespace URI");
            return NULL;
        }
        element = element_of(def->foreign_metadata, uri);
        break;
    default:
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unknown metadata type %d", type);
        return NULL;
    }
    if (!element && !text)
        set_not_found(error);
    return element ? element : g_strdup(text);
}

/* The client's element, in namespace uri with prefix key. */
static xmlDoc *parse_element(const char *metadata, const char *key, const char *uri, GError **error)
{
    xmlDoc *doc = xmlReadMemory(metadata, (int)strlen(metadata), "element.xml", NULL, METADATA_PARSE_OPTIONS);
    xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    if (!root) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "the metadata is not an XML element: %s", metadata);
        if (doc)
            xmlFreeDoc(doc);
        return NULL;
    }
    xmlNs *ns = xmlNewNs(root, (const xmlChar *)uri, (const xmlChar *)key);
    if (!ns) /* the element declares that prefix already: use its declaration */
        ns = xmlSearchNs(doc, root, (const xmlChar *)key);
    if (!ns || strcmp((const char *)ns->href, uri) != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                    "the metadata element declares prefix '%s' for another namespace than %s", key, uri);
        xmlFreeDoc(doc);
        return NULL;
    }
    xmlSetNs(root, ns);
    return doc;
}

/* foreign without its element in namespace uri, and with new_element (a
 * serialized element, or NULL) at the end. */
static bool replace_element(struct domain_def *def, const char *uri, const char *new_element, GError **error)
{
    g_autoptr(xmlDoc) doc = parse_foreign(def->foreign_metadata);
    xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    if (!root) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR, "cannot read the domain's metadata back");
        return false;
    }
    g_autoptr(GString) kept = g_string_new(NULL);
    for (xmlNode *child = root->children; child; child = child->next) {
        if (child->type != XML_ELEMENT_NODE || same_ns(child, uri))
            continue;
        g_autofree char *text = domain_metadata_serialize(child);
        g_string_append_printf(kept, "%s%s", kept->len ? "\n" : "", text);
    }
    if (new_element)
        g_string_append_printf(kept, "%s%s", kept->len ? "\n" : "", new_element);
    g_free(def->foreign_metadata);
    def->foreign_metadata = kept->len ? g_strdup(kept->str) : NULL;
    return true;
}

static bool set_element(struct domain_def *def, const char *metadata, const char *key, const char *uri,
                        GError **error)
{
    if (!uri || (metadata && *metadata && (!key || !*key))) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                    "a metadata element needs its namespace URI, and its prefix (key) to be set");
        return false;
    }
    if (strcmp(uri, VSNAP_DOMAIN_NS) == 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                    "the %s namespace is vsnap's configuration of the domain: change it with define", uri);
        return false;
    }
    if (!metadata || !*metadata)
        return replace_element(def, uri, NULL, error);
    g_autoptr(xmlDoc) doc = parse_element(metadata, key, uri, error);
    if (!doc)
        return false;
    g_autofree char *text = domain_metadata_serialize(xmlDocGetRootElement(doc));
    return replace_element(def, uri, text, error);
}

bool domain_def_set_metadata(struct domain_def *def, int type, const char *metadata, const char *key,
                             const char *uri, GError **error)
{
    const char *value = metadata && *metadata ? metadata : NULL;
    switch (type) {
    case VIR_DOMAIN_METADATA_DESCRIPTION:
        g_free(def->description);
        def->description = g_strdup(value);
        return true;
    case VIR_DOMAIN_METADATA_TITLE:
        if (value && strchr(value, '\n')) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "title can't contain newlines");
            return false;
        }
        g_free(def->title);
        def->title = g_strdup(value);
        return true;
    case VIR_DOMAIN_METADATA_ELEMENT:
        return set_element(def, metadata, key, uri, error);
    }
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unknown metadata type %d", type);
    return false;
}
