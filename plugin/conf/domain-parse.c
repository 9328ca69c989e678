/* <domain> parsing: the top level and the general elements (identity, memory,
 * vCPUs, life cycle). Every child is either understood or refused by name;
 * after this walk the document is also validated against domain.rng. */
#include "domain-parse.h"

#include <string.h>

#include "conf/xml-util.h"

static const char *const no_attributes[] = {NULL};

static bool parse_text_element(const xmlNode *node, char **out, GError **error)
{
    if (!conf_xml_check_attributes(node, no_attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_free(*out);
    *out = conf_xml_text(node);
    return true;
}

static bool parse_name(struct domain_def *def, const xmlNode *node, GError **error)
{
    if (!parse_text_element(node, &def->name, error))
        return false;
    if (def->name[0] == '\0') {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "domain <name> must not be empty");
        return false;
    }
    /* The name becomes part of file names and is shown on one line. */
    if (strpbrk(def->name, "/\n")) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "domain name '%s' must not contain '/' or a newline", def->name);
        return false;
    }
    return true;
}

static bool parse_uuid(struct domain_def *def, const xmlNode *node, GError **error)
{
    g_autofree char *text = NULL;
    if (!parse_text_element(node, &text, error))
        return false;
    if (!domain_uuid_parse(text, def->uuid)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "malformed uuid '%s'", text);
        return false;
    }
    return true;
}

static bool parse_title(struct domain_def *def, const xmlNode *node, GError **error)
{
    if (!parse_text_element(node, &def->title, error))
        return false;
    if (strchr(def->title, '\n')) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "domain <title> must not contain newlines");
        return false;
    }
    return true;
}

static bool parse_description(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_text_element(node, &def->description, error);
}

static bool parse_memory_element(const xmlNode *node, uint64_t *kib, GError **error)
{
    static const char *const attributes[] = {"unit", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *unit = conf_xml_prop(node, "unit");
    g_autofree char *value = conf_xml_text_trimmed(node);
    return domain_memory_to_kib(value, unit, kib, error);
}

static bool parse_memory(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_memory_element(node, &def->memory_kib, error);
}

static bool parse_current_memory(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_memory_element(node, &def->current_memory_kib, error);
}

static bool parse_vcpu(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"placement", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    /* 'static' is libvirt's default and what it writes back; vsnap does not
     * pin vCPUs, so 'auto' (numad placement) cannot be honoured. */
    g_autofree char *placement = conf_xml_prop(node, "placement");
    if (placement && strcmp(placement, "static") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<vcpu placement='%s'> is not supported: only 'static'", placement);
        return false;
    }
    g_autofree char *value = conf_xml_text_trimmed(node);
    uint64_t count;
    if (!conf_parse_uint64(value, 1, VSNAP_MAX_VCPUS, "<vcpu> count", &count, error))
        return false;
    def->vcpus = (unsigned)count;
    return true;
}

static bool parse_lifecycle(const xmlNode *node, enum domain_lifecycle_action *out, GError **error)
{
    g_autofree char *value = NULL;
    if (!parse_text_element(node, &value, error))
        return false;
    g_strstrip(value);
    for (int a = DOMAIN_ACTION_DESTROY; a <= DOMAIN_ACTION_COREDUMP_RESTART; a++) {
        if (strcmp(value, domain_lifecycle_action_to_string(a)) == 0) {
            *out = a;
            return true;
        }
    }
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "unknown action '%s' in <%s>", value,
                (const char *)node->name);
    return false;
}

static bool parse_on_poweroff(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_lifecycle(node, &def->on_poweroff, error);
}

static bool parse_on_reboot(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_lifecycle(node, &def->on_reboot, error);
}

static bool parse_on_crash(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_lifecycle(node, &def->on_crash, error);
}

static const struct domain_child_parser domain_elements[] = {
    {"name", parse_name, false},
    {"uuid", parse_uuid, false},
    {"title", parse_title, false},
    {"description", parse_description, false},
    {"metadata", domain_parse_metadata, false},
    {"memory", parse_memory, false},
    {"currentMemory", parse_current_memory, false},
    {"memtune", domain_parse_memtune, false},
    {"memoryBacking", domain_parse_memory_backing, false},
    {"vcpu", parse_vcpu, false},
    {"cputune", domain_parse_cputune, false},
    {"os", domain_parse_os, false},
    {"sysinfo", domain_parse_sysinfo, false},
    {"features", domain_parse_features, false},
    {"cpu", domain_parse_cpu, false},
    {"clock", domain_parse_clock, false},
    {"on_poweroff", parse_on_poweroff, false},
    {"on_reboot", parse_on_reboot, false},
    {"on_crash", parse_on_crash, false},
    {"devices", domain_parse_devices, false},
};

bool domain_parse_children(struct domain_def *def, const xmlNode *parent,
                           const struct domain_child_parser *table, size_t n_table,
                           uint32_t *seen, GError **error)
{
    g_assert(n_table <= 32);
    for (const xmlNode *child = parent->children; child; child = child->next) {
        if (!conf_xml_is_element(child))
            continue;
        size_t index = 0;
        while (index < n_table && !conf_xml_is(child, table[index].name))
            index++;
        if (index == n_table) {
            conf_xml_set_unsupported_element(error, child);
            return false;
        }
        if ((*seen & (1u << index)) && !table[index].repeatable) {
            conf_xml_set_duplicate_element(error, child);
            return false;
        }
        *seen |= 1u << index;
        if (!table[index].parse(def, child, error))
            return false;
    }
    return true;
}

bool domain_check_absolute_path(const char *path, const char *what, GError **error)
{
    if (path[0] != '/') {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "%s must be an absolute path, not '%s'", what, path);
        return false;
    }
    return true;
}

static bool parse_root(struct domain_def *def, const xmlNode *root, GError **error)
{
    static const char *const attributes[] = {"type", "id", NULL};
    if (!conf_xml_is(root, "domain")) {
        g_autofree char *name = conf_xml_display_name(root);
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR,
                    "expected root element <domain>, found %s", name);
        return false;
    }
    /* id is a runtime detail of live XML: accepted, and ignored. */
    if (!conf_xml_check_attributes(root, attributes, error))
        return false;
    g_autofree char *type = conf_xml_prop(root, "type");
    if (!type) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "<domain> has no type attribute");
        return false;
    }
    if (strcmp(type, "kvm") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "domain type '%s' is not supported by vsnap: only 'kvm'", type);
        return false;
    }
    return true;
}

static bool was_seen(uint32_t seen, const char *name)
{
    for (size_t i = 0; i < G_N_ELEMENTS(domain_elements); i++)
        if (strcmp(domain_elements[i].name, name) == 0)
            return seen & (1u << i);
    return false;
}

static void set_missing(GError **error, const char *what)
{
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "missing %s in <domain>", what);
}

/* The shim has no balloon, so the guest always has all of <memory>: a smaller
 * <currentMemory> would be a promise vsnap cannot keep. */
static bool check_memory(struct domain_def *def, bool current_seen, GError **error)
{
    if (!current_seen)
        def->current_memory_kib = def->memory_kib;
    if (def->current_memory_kib != def->memory_kib) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<currentMemory> (%" G_GUINT64_FORMAT " KiB) must equal <memory> (%" G_GUINT64_FORMAT
                    " KiB): vsnap has no memory balloon", def->current_memory_kib, def->memory_kib);
        return false;
    }
    if (def->memory_kib < DOMAIN_MIN_MEMORY_KIB || def->memory_kib > DOMAIN_MAX_MEMORY_KIB) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<memory> of %" G_GUINT64_FORMAT " KiB is outside what vsnap supports (%llu MiB to %llu GiB)",
                    def->memory_kib, VSNAP_MIN_MEMORY >> 20, VSNAP_MAX_MEMORY >> 30);
        return false;
    }
    if (def->memory_kib % 4) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<memory> of %" G_GUINT64_FORMAT " KiB is not a whole number of 4 KiB pages",
                    def->memory_kib);
        return false;
    }
    return true;
}

/* Checks that need the whole definition, and defaults of absent elements. */
static bool finish(struct domain_def *def, uint32_t seen, GError **error)
{
    if (!def->name) {
        set_missing(error, "<name>");
        return false;
    }
    if (!was_seen(seen, "memory")) {
        set_missing(error, "<memory>");
        return false;
    }
    if (!was_seen(seen, "os")) {
        set_missing(error, "<os>");
        return false;
    }
    if (!def->kernel) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "vsnap boots a Linux kernel directly: <os><kernel> is required");
        return false;
    }
    if (!check_memory(def, was_seen(seen, "currentMemory"), error) || !domain_check_memory_backing(def, error))
        return false;
    if (!was_seen(seen, "vcpu"))
        def->vcpus = 1;
    domain_default_restore_mode(def);
    if (!was_seen(seen, "uuid"))
        domain_uuid_generate(def->uuid);
    return domain_check_sysinfo(def, error);
}

static struct domain_def *domain_def_new_defaults(void)
{
    struct domain_def *def = g_new0(struct domain_def, 1);
    def->on_poweroff = DOMAIN_ACTION_DESTROY;
    def->on_reboot = DOMAIN_ACTION_RESTART;
    def->on_crash = DOMAIN_ACTION_DESTROY;
    def->vsnap.restore_mode = RESTORE_MODE_ONDEMAND;
    def->vsnap.readiness_port = VSNAP_DEFAULT_READINESS_PORT;
    def->notify.port = VSNAP_DEFAULT_NOTIFY_PORT;
    return def;
}

static struct domain_def *parse_string(const char *xml, const char *schema_dir, GError **error)
{
    g_autoptr(xmlDoc) doc = conf_xml_read(xml, "domain", error);
    if (!doc)
        return NULL;
    const xmlNode *root = xmlDocGetRootElement(doc);
    if (!root) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "domain XML has no root element");
        return NULL;
    }
    g_autoptr(domain_def) def = domain_def_new_defaults();
    uint32_t seen = 0;
    /* Our own walk first: its messages name the unsupported element. The
     * schema then catches whatever shape the walk does not look at. */
    if (!parse_root(def, root, error) || !domain_parse_children(def, root, domain_elements, G_N_ELEMENTS(domain_elements), &seen, error) ||
        !finish(def, seen, error))
        return NULL;
    if (!conf_xml_validate(doc, schema_dir, CONF_DOMAIN_SCHEMA, error))
        return NULL;
    return g_steal_pointer(&def);
}

struct domain_def *domain_def_parse_live_string(const char *xml, const char *schema_dir, GError **error)
{
    return parse_string(xml, schema_dir, error);
}

/* A definition names each disk's image; the layers above it are vsnap's
 * own (its snapshots), never the user's to give. Reading a chain from a
 * definition would make the bottom of it the disk and silently drop what
 * the user named as <source>. */
static bool check_no_chains(const struct domain_def *def, GError **error)
{
    for (size_t i = 0; i < def->n_disks; i++) {
        if (def->disks[i].chain) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                        "disk '%s': a <backingStore> chain is not supported in a definition: vsnap "
                        "layers its snapshots over the image itself; give the image as <source>",
                        def->disks[i].target);
            return false;
        }
    }
    return true;
}

struct domain_def *domain_def_parse_string(const char *xml, const char *schema_dir, GError **error)
{
    g_autoptr(domain_def) def = parse_string(xml, schema_dir, error);
    if (!def || !check_no_chains(def, error))
        return NULL;
    return g_steal_pointer(&def);
}
