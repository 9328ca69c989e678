/* RelaxNG validation against schemas parsed once per process.
 *
 * libxml2 (2.9) sets up its RelaxNG type library and XML Schema's datatypes
 * on the first schema parse, without a lock: two clients defining domains at
 * once used to parse domain.rng at once, and one of them could find the
 * datatypes half registered ("Error type 'int' is not exported by type
 * library"). So every schema is parsed under one lock, the first time it is
 * asked for (the daemon asks at start, conf_xml_load_schemas), and kept: a
 * parsed schema is only read while validating, and each validation has a
 * context of its own. */
#include "conf/xml-util.h"

#include <libxml/parser.h>
#include <libxml/relaxng.h>
#include <libxml/xmlerror.h>

/* libxml2 2.12 made the structured error argument const. */
#if LIBXML_VERSION >= 21200
typedef const xmlError *conf_xml_error_ptr;
#else
typedef xmlError *conf_xml_error_ptr;
#endif

static GMutex schemas_lock;
/* path -> xmlRelaxNG *, kept for the life of the process */
static GHashTable *schemas;

/* Keeps the first error only: later ones are usually consequences of it. */
static void keep_first_error(void *data, conf_xml_error_ptr err)
{
    char **first = data;
    if (*first || !err)
        return;
    g_autofree char *msg = g_strchomp(g_strdup(err->message ? err->message : "unknown error"));
    const xmlNode *node = err->node;
    long line = node ? xmlGetLineNo(node) : err->line;
    if (node && node->type == XML_ELEMENT_NODE) {
        g_autofree char *name = conf_xml_display_name(node);
        *first = g_strdup_printf("line %ld, element %s: %s", line, name, msg);
    } else if (line > 0) {
        *first = g_strdup_printf("line %ld: %s", line, msg);
    } else {
        *first = g_strdup(msg);
    }
}

static xmlRelaxNG *parse_schema(const char *path, GError **error)
{
    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR, "schema %s is missing", path);
        return NULL;
    }
    g_autofree char *schema_error = NULL;
    xmlRelaxNGParserCtxt *pctxt = xmlRelaxNGNewParserCtxt(path);
    xmlRelaxNGSetParserStructuredErrors(pctxt, keep_first_error, &schema_error);
    xmlRelaxNG *schema = xmlRelaxNGParse(pctxt);
    xmlRelaxNGFreeParserCtxt(pctxt);
    if (!schema)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR, "cannot load schema %s: %s",
                    path, schema_error ? schema_error : "unreadable");
    return schema;
}

/* The parsed schema at path: parsed on the first call, under the lock (a
 * parse that failed is tried again on the next call). */
static xmlRelaxNG *schema_at(const char *path, GError **error)
{
    g_mutex_lock(&schemas_lock);
    if (!schemas)
        schemas = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    xmlRelaxNG *schema = g_hash_table_lookup(schemas, path);
    if (!schema) {
        xmlInitParser();
        schema = parse_schema(path, error);
        if (schema)
            g_hash_table_insert(schemas, g_strdup(path), schema);
    }
    g_mutex_unlock(&schemas_lock);
    return schema;
}

static xmlRelaxNG *schema_named(const char *schema_dir, const char *schema_name, GError **error)
{
    if (!schema_dir) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "no schema directory given");
        return NULL;
    }
    g_autofree char *path = g_build_filename(schema_dir, schema_name, NULL);
    return schema_at(path, error);
}

bool conf_xml_load_schemas(const char *schema_dir, GError **error)
{
    return schema_named(schema_dir, CONF_DOMAIN_SCHEMA, error) &&
           schema_named(schema_dir, CONF_SNAPSHOT_SCHEMA, error);
}

bool conf_xml_validate(xmlDoc *doc, const char *schema_dir, const char *schema_name, GError **error)
{
    xmlRelaxNG *schema = schema_named(schema_dir, schema_name, error);
    if (!schema)
        return false;
    g_autofree char *invalid = NULL;
    xmlRelaxNGValidCtxt *vctxt = xmlRelaxNGNewValidCtxt(schema);
    if (!vctxt) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_MEMORY, "cannot create a validation context");
        return false;
    }
    xmlRelaxNGSetValidStructuredErrors(vctxt, keep_first_error, &invalid);
    int rc = xmlRelaxNGValidateDoc(vctxt, doc);
    xmlRelaxNGFreeValidCtxt(vctxt);
    if (rc != 0)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "XML does not match schema %s: %s",
                    schema_name, invalid ? invalid : "validation failed");
    return rc == 0;
}
