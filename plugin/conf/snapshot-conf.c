/* <domainsnapshot>: parse (our own walk naming anything unsupported, then
 * xml/snapshot.rng), format, free. The embedded <domain> is handed to the
 * domain parser as a document of its own, so it gets exactly the same checks
 * as a definition. */
#include "conf/snapshot-conf.h"

#include <string.h>

#include "domain-parse.h"
#include "store/store.h"
#include "conf/xml-util.h"

static const char *const state_names[] = {"nostate",  "running", "blocked",     "paused",       "shutdown",
                                          "shutoff", "crashed", "pmsuspended", "disk-snapshot"};

const char *snapshot_state_to_string(enum snapshot_state state)
{
    return (size_t)state < G_N_ELEMENTS(state_names) ? state_names[state] : "nostate";
}

void snapshot_def_free(struct snapshot_def *def)
{
    if (!def)
        return;
    g_free(def->name);
    g_free(def->description);
    g_free(def->parent);
    domain_def_free(def->domain);
    for (size_t i = 0; i < def->n_disks; i++) {
        g_free(def->disks[i].name);
        g_free(def->disks[i].file);
    }
    g_free(def->disks);
    g_free(def->store.url);
    g_free(def->store.id);
    g_free(def->store.parent);
    g_free(def);
}

struct snapshot_parse {
    struct snapshot_def *def;
    const char *schema_dir;
    bool name_seen, description_seen, state_seen, parent_seen, time_seen, memory_seen, domain_seen,
        disks_seen, cookie_seen;
};

static bool check_leaf(const xmlNode *node, GError **error)
{
    return conf_xml_check_attributes(node, (const char *const[]){NULL}, error) &&
           conf_xml_check_no_children(node, error);
}

static bool parse_name_text(const xmlNode *node, const char *what, char **out, GError **error)
{
    if (!check_leaf(node, error))
        return false;
    g_autofree char *name = conf_xml_text(node);
    if (name[0] == '\0' || strpbrk(name, "/\n")) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "%s '%s' must not be empty or contain '/' or a newline", what, name);
        return false;
    }
    *out = g_steal_pointer(&name);
    return true;
}

static bool parse_state(struct snapshot_def *def, const xmlNode *node, GError **error)
{
    if (!check_leaf(node, error))
        return false;
    g_autofree char *value = conf_xml_text_trimmed(node);
    for (size_t i = 0; i < G_N_ELEMENTS(state_names); i++) {
        if (strcmp(value, state_names[i]) == 0) {
            def->state = (enum snapshot_state)i;
            def->state_set = true;
            return true;
        }
    }
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "unknown snapshot state '%s'", value);
    return false;
}

static bool parse_parent(struct snapshot_def *def, const xmlNode *node, GError **error)
{
    if (!conf_xml_check_attributes(node, (const char *const[]){NULL}, error))
        return false;
    for (const xmlNode *child = node->children; child; child = child->next) {
        if (!conf_xml_is_element(child))
            continue;
        if (!conf_xml_is(child, "name") || def->parent) {
            if (def->parent && conf_xml_is(child, "name"))
                conf_xml_set_duplicate_element(error, child);
            else
                conf_xml_set_unsupported_element(error, child);
            return false;
        }
        if (!parse_name_text(child, "parent snapshot name", &def->parent, error))
            return false;
    }
    if (!def->parent) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "missing <name> in snapshot <parent>");
        return false;
    }
    return true;
}

static bool parse_creation_time(struct snapshot_def *def, const xmlNode *node, GError **error)
{
    if (!check_leaf(node, error))
        return false;
    g_autofree char *value = conf_xml_text_trimmed(node);
    uint64_t seconds;
    if (!conf_parse_uint64(value, 0, G_MAXINT64, "snapshot <creationTime>", &seconds, error))
        return false;
    def->creation_time = (int64_t)seconds;
    return true;
}

static bool parse_memory(struct snapshot_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"snapshot", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *kind = conf_xml_prop(node, "snapshot");
    if (kind && strcmp(kind, "internal") == 0) {
        def->memory = SNAPSHOT_MEMORY_INTERNAL;
    } else if (kind && strcmp(kind, "no") == 0) {
        def->memory = SNAPSHOT_MEMORY_NO;
    } else {
        /* 'external' needs a file of libvirt's own format; vsnap's layers are the memory image. */
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<memory snapshot='%s'> is not supported by vsnap: only 'internal' or 'no'", kind ? kind : "");
        return false;
    }
    return true;
}

/* The embedded domain, serialized with its namespace declarations and
 * parsed as a definition of its own. */
static bool parse_domain(struct snapshot_def *def, const xmlNode *node, const char *schema_dir, GError **error)
{
    g_autoptr(xmlDoc) doc = xmlNewDoc((const xmlChar *)"1.0");
    xmlNode *copy = xmlDocCopyNode((xmlNode *)node, doc, 1);
    if (!copy) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_MEMORY, "cannot copy the snapshot's <domain>");
        return false;
    }
    xmlDocSetRootElement(doc, copy);
    xmlChar *text = NULL;
    int len = 0;
    xmlDocDumpMemory(doc, &text, &len);
    def->domain = domain_def_parse_string((const char *)text, schema_dir, error);
    xmlFree(text);
    if (!def->domain)
        g_prefix_error(error, "in the snapshot's <domain>: ");
    return def->domain != NULL;
}

static bool parse_disk_source(struct snapshot_disk *disk, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"file", NULL};
    if (disk->file) {
        conf_xml_set_duplicate_element(error, node);
        return false;
    }
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    disk->file = conf_xml_prop(node, "file");
    if (!disk->file || disk->file[0] != '/') {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "snapshot disk '%s': <source file> must be an absolute path", disk->name);
        return false;
    }
    return true;
}

static bool parse_disk_kind(struct snapshot_disk *disk, const xmlNode *node, GError **error)
{
    g_autofree char *kind = conf_xml_prop(node, "snapshot");
    g_autofree char *type = conf_xml_prop(node, "type");
    if (!kind || strcmp(kind, "external") == 0) {
        disk->external = true;
    } else if (strcmp(kind, "no") != 0) {
        /* 'internal' would be a qcow2 snapshot inside the image, 'manual' the user's own. */
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<disk name='%s' snapshot='%s'> is not supported by vsnap: a disk's part of a snapshot is "
                    "'external' (a disk layer file) or 'no'", disk->name, kind);
        return false;
    }
    if (type && strcmp(type, "file") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<disk name='%s' type='%s'> is not supported by vsnap: disk layers are files", disk->name, type);
        return false;
    }
    return true;
}

static bool parse_disk(struct snapshot_disk *disk, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"name", "snapshot", "type", NULL};
    if (!conf_xml_check_attributes(node, attributes, error))
        return false;
    disk->name = conf_xml_prop(node, "name");
    if (!disk->name || disk->name[0] == '\0') {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "snapshot <disk> needs a name");
        return false;
    }
    if (!parse_disk_kind(disk, node, error))
        return false;
    for (const xmlNode *child = node->children; child; child = child->next) {
        if (!conf_xml_is_element(child))
            continue;
        if (!conf_xml_is(child, "source") || !disk->external) {
            conf_xml_set_unsupported_element(error, child);
            return false;
        }
        if (!parse_disk_source(disk, child, error))
            return false;
    }
    return true;
}

static bool parse_disks(struct snapshot_def *def, const xmlNode *node, GError **error)
{
    if (!conf_xml_check_attributes(node, (const char *const[]){NULL}, error))
        return false;
    def->disks_given = true;
    size_t n = 0;
    for (const xmlNode *child = node->children; child; child = child->next)
        n += conf_xml_is_element(child);
    def->disks = g_new0(struct snapshot_disk, MAX(n, 1));
    for (const xmlNode *child = node->children; child; child = child->next) {
        if (!conf_xml_is_element(child))
            continue;
        if (!conf_xml_is(child, "disk")) {
            conf_xml_set_unsupported_element(error, child);
            return false;
        }
        struct snapshot_disk *disk = &def->disks[def->n_disks++];
        if (!parse_disk(disk, child, error))
            return false;
        for (size_t i = 0; i + 1 < def->n_disks; i++)
            if (strcmp(def->disks[i].name, disk->name) == 0) {
                g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR,
                            "snapshot disk '%s' is named twice", disk->name);
                return false;
            }
    }
    return true;
}

static bool is_vsnap_store(const xmlNode *node)
{
    return conf_xml_is_element(node) && node->ns && node->ns->href &&
           strcmp((const char *)node->ns->href, VSNAP_SNAPSHOT_NS) == 0 &&
           strcmp((const char *)node->name, "store") == 0;
}

static bool parse_layer_id(const xmlNode *node, const char *name, char **out, GError **error)
{
    g_autofree char *id = conf_xml_prop(node, name);
    if (!id)
        return true;
    if (!g_uuid_string_is_valid(id)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "<vsnap:store %s='%s'> in the snapshot's <cookie> is not a snapshot id", name, id);
        return false;
    }
    *out = g_ascii_strdown(id, -1);
    return true;
}

/* <cookie>: vsnap's <vsnap:store/>; nothing else is vsnap's to keep. */
static bool parse_cookie(struct snapshot_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"url", "id", "parent", NULL};
    if (!conf_xml_check_attributes(node, (const char *const[]){NULL}, error))
        return false;
    for (const xmlNode *child = node->children; child; child = child->next) {
        if (!conf_xml_is_element(child))
            continue;
        if (!is_vsnap_store(child) || def->store.id) {
            conf_xml_set_unsupported_element(error, child);
            return false;
        }
        if (!conf_xml_check_attributes(child, attributes, error) ||
            !conf_xml_check_no_children(child, error) ||
            !parse_layer_id(child, "id", &def->store.id, error) ||
            !parse_layer_id(child, "parent", &def->store.parent, error))
            return false;
        def->store.url = conf_xml_prop(child, "url");
        if (!def->store.id || !def->store.url) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                        "<vsnap:store> in the snapshot's <cookie> needs url and id");
            return false;
        }
        /* Checked as a domain's <vsnap:store url> is: a revert fetches from it. */
        g_autoptr(GError) bad = NULL;
        if (!store_url_check(def->store.url, &bad)) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                        "<vsnap:store url> in the snapshot's <cookie>: %s", bad->message);
            return false;
        }
    }
    return true;
}

static bool mark_seen(bool *seen, const xmlNode *node, GError **error)
{
    if (*seen) {
        conf_xml_set_duplicate_element(error, node);
        return false;
    }
    *seen = true;
    return true;
}

static bool parse_child(struct snapshot_parse *p, const xmlNode *node, GError **error)
{
    struct snapshot_def *def = p->def;
    if (conf_xml_is(node, "name"))
        return mark_seen(&p->name_seen, node, error) && parse_name_text(node, "snapshot name", &def->name, error);
    if (conf_xml_is(node, "description"))
        return mark_seen(&p->description_seen, node, error) && check_leaf(node, error) &&
               (def->description = conf_xml_text(node)) != NULL;
    if (conf_xml_is(node, "state"))
        return mark_seen(&p->state_seen, node, error) && parse_state(def, node, error);
    if (conf_xml_is(node, "parent"))
        return mark_seen(&p->parent_seen, node, error) && parse_parent(def, node, error);
    if (conf_xml_is(node, "creationTime"))
        return mark_seen(&p->time_seen, node, error) && parse_creation_time(def, node, error);
    if (conf_xml_is(node, "memory"))
        return mark_seen(&p->memory_seen, node, error) && parse_memory(def, node, error);
    if (conf_xml_is(node, "domain"))
        return mark_seen(&p->domain_seen, node, error) && parse_domain(def, node, p->schema_dir, error);
    if (conf_xml_is(node, "disks"))
        return mark_seen(&p->disks_seen, node, error) && parse_disks(def, node, error);
    if (conf_xml_is(node, "cookie"))
        return mark_seen(&p->cookie_seen, node, error) && parse_cookie(def, node, error);
    conf_xml_set_unsupported_element(error, node);
    return false;
}

static bool parse_root(struct snapshot_parse *p, const xmlNode *root, GError **error)
{
    if (!conf_xml_is(root, "domainsnapshot")) {
        g_autofree char *name = conf_xml_display_name(root);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR,
                    "expected root element <domainsnapshot>, found %s", name);
        return false;
    }
    if (!conf_xml_check_attributes(root, (const char *const[]){NULL}, error))
        return false;
    for (const xmlNode *child = root->children; child; child = child->next)
        if (conf_xml_is_element(child) && !parse_child(p, child, error))
            return false;
    return true;
}

struct snapshot_def *snapshot_def_parse_string(const char *xml, const char *schema_dir, GError **error)
{
    g_autoptr(xmlDoc) doc = conf_xml_read(xml, "snapshot", error);
    if (!doc)
        return NULL;
    const xmlNode *root = xmlDocGetRootElement(doc);
    if (!root) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "snapshot XML has no root element");
        return NULL;
    }
    g_autoptr(snapshot_def) def = g_new0(struct snapshot_def, 1);
    struct snapshot_parse p = {.def = def, .schema_dir = schema_dir};
    if (!parse_root(&p, root, error) || !conf_xml_validate(doc, schema_dir, CONF_SNAPSHOT_SCHEMA, error))
        return NULL;
    /* libvirt's defaults: created now, named after that second. */
    if (!p.time_seen)
        def->creation_time = g_get_real_time() / G_USEC_PER_SEC;
    if (!def->name)
        def->name = g_strdup_printf("%" G_GINT64_FORMAT, def->creation_time);
    return g_steal_pointer(&def);
}

static void append_text_element(GString *out, const char *indent, const char *name, const char *text)
{
    g_autofree char *escaped = g_markup_escape_text(text, -1);
    g_string_append_printf(out, "%s<%s>%s</%s>\n", indent, name, escaped, name);
}

static void append_disk(GString *out, const struct snapshot_disk *disk)
{
    g_autofree char *name = g_markup_escape_text(disk->name, -1);
    if (!disk->external) {
        g_string_append_printf(out, "    <disk name='%s' snapshot='no'/>\n", name);
        return;
    }
    if (!disk->file) {
        g_string_append_printf(out, "    <disk name='%s' snapshot='external' type='file'/>\n", name);
        return;
    }
    g_autofree char *file = g_markup_escape_text(disk->file, -1);
    g_string_append_printf(out,
                           "    <disk name='%s' snapshot='external' type='file'>\n"
                           "      <source file='%s'/>\n"
                           "    </disk>\n",
                           name, file);
}

char *snapshot_def_format(const struct snapshot_def *def)
{
    GString *out = g_string_new("<domainsnapshot>\n");
    append_text_element(out, "  ", "name", def->name);
    if (def->description)
        append_text_element(out, "  ", "description", def->description);
    if (def->state_set)
        append_text_element(out, "  ", "state", snapshot_state_to_string(def->state));
    if (def->parent) {
        g_string_append(out, "  <parent>\n");
        append_text_element(out, "    ", "name", def->parent);
        g_string_append(out, "  </parent>\n");
    }
    g_string_append_printf(out, "  <creationTime>%" G_GINT64_FORMAT "</creationTime>\n", def->creation_time);
    if (def->memory != SNAPSHOT_MEMORY_DEFAULT)
        g_string_append_printf(out, "  <memory snapshot='%s'/>\n",
                               def->memory == SNAPSHOT_MEMORY_INTERNAL ? "internal" : "no");
    if (def->disks_given) {
        g_string_append(out, "  <disks>\n");
        for (size_t i = 0; i < def->n_disks; i++)
            append_disk(out, &def->disks[i]);
        g_string_append(out, "  </disks>\n");
    }
    if (def->store.id) {
        g_autofree char *url = g_markup_escape_text(def->store.url, -1);
        g_string_append_printf(out, "  <cookie>\n    <vsnap:store xmlns:vsnap='%s' url='%s' id='%s'",
                               VSNAP_SNAPSHOT_NS, url, def->store.id);
        if (def->store.parent)
            g_string_append_printf(out, " parent='%s'", def->store.parent);
        g_string_append(out, "/>\n  </cookie>\n");
    }
    if (def->domain) {
        /* Not re-indented: that would change text inside foreign metadata
         * and descriptions, and break the round trip. */
        g_autofree char *domain = domain_def_format(def->domain, false, -1);
        g_string_append(out, domain);
    }
    g_string_append(out, "</domainsnapshot>\n");
    return g_string_free(out, false);
}
