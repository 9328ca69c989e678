/* Small libxml2 helpers shared by the configuration parsers: reading a document
 * with line/column errors, RelaxNG validation, and refusing what the caller
 * does not know (elements and attributes) with a message naming it.
 */
#pragma once

#include <glib.h>
#include <libxml/tree.h>
#include <stdbool.h>

#include "util/virt-error.h"

G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlDoc, xmlFreeDoc)

/* Parse without network access, entity expansion or DTDs. VIR_ERR_XML_ERROR
 * with libxml2's line and column on malformed input. */
xmlDoc *conf_xml_read(const char *xml, const char *what, GError **error);

/* The schemas in a schema directory (xml/ in the source tree). */
#define CONF_DOMAIN_SCHEMA "domain.rng"
#define CONF_SNAPSHOT_SCHEMA "snapshot.rng"

/* Validate against schema_dir/schema_name. VIR_ERR_XML_DETAIL naming the line
 * on failure, VIR_ERR_INTERNAL_ERROR if the schema itself cannot be loaded.
 * Safe from any number of threads at once: each schema is parsed once per
 * process and kept (xml-schema.c says why). */
bool conf_xml_validate(xmlDoc *doc, const char *schema_dir, const char *schema_name, GError **error);
/* Parse the domain and snapshot schemas of schema_dir now (the daemon at
 * start), so that a missing or broken one stops the start rather than every
 * define. VIR_ERR_INTERNAL_ERROR naming the file. */
bool conf_xml_load_schemas(const char *schema_dir, GError **error);

bool conf_xml_is_element(const xmlNode *node);
/* True if node is an element called name with no namespace. */
bool conf_xml_is(const xmlNode *node, const char *name);
/* "<prefix:name>" or "<name>", for messages. */
char *conf_xml_display_name(const xmlNode *node);

/* Property or text as a g_malloc'd string (NULL if absent). */
char *conf_xml_prop(const xmlNode *node, const char *name);
char *conf_xml_text(const xmlNode *node);
/* Text with surrounding white space removed. */
char *conf_xml_text_trimmed(const xmlNode *node);

/* Refuse any attribute not in allowed (NULL-terminated) with
 * VIR_ERR_CONFIG_UNSUPPORTED "unsupported attribute x='y' on <el>". */
bool conf_xml_check_attributes(const xmlNode *node, const char *const *allowed, GError **error);
/* Refuse every element child: for elements that must be empty. */
bool conf_xml_check_no_children(const xmlNode *node, GError **error);
/* VIR_ERR_CONFIG_UNSUPPORTED "unsupported element <child> in <parent>". */
void conf_xml_set_unsupported_element(GError **error, const xmlNode *child);
/* VIR_ERR_XML_ERROR "element <x> appears more than once in <parent>". */
void conf_xml_set_duplicate_element(GError **error, const xmlNode *child);
/* The element children of parent, each named in names (n of them) and found
 * at most once: found[i] is the child called names[i], or NULL. Any other
 * element is refused (conf_xml_set_unsupported_element), and so is one that
 * appears twice (conf_xml_set_duplicate_element). */
bool conf_xml_collect_children(const xmlNode *parent, const char *const *names, size_t n,
                               const xmlNode **found, GError **error);

/* Decimal unsigned number in [min, max]; VIR_ERR_XML_DETAIL naming what. */
bool conf_parse_uint64(const char *text, uint64_t min, uint64_t max, const char *what,
                       uint64_t *out, GError **error);
