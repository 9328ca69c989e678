/* <devices>: the emulator, virtio-blk disks (domain-parse-disk.c), one
 * serial port (pty or file) and its console alias, virtio-vsock, and an
 * explicitly absent balloon, virtio-net interfaces
 * (domain-parse-interface.c). */
#include "domain-parse.h"

#include <string.h>

#include "conf/xml-util.h"

static const char *const no_attributes[] = {NULL};

static bool parse_emulator(struct domain_def *def, const xmlNode *node, GError **error)
{
    if (!conf_xml_check_attributes(node, no_attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *path = conf_xml_text_trimmed(node);
    if (!domain_check_absolute_path(path, "<emulator>", error))
        return false;
    /* virtvsnapd always runs its own shim; naming another emulator would be
     * a request it silently ignores, so only the shim's name is accepted. */
    g_autofree char *base = g_path_get_basename(path);
    if (strcmp(base, DOMAIN_EMULATOR_BASENAME) != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<emulator>%s</emulator> is not supported: vsnap domains run %s", path,
                    DOMAIN_EMULATOR_BASENAME);
        return false;
    }
    def->emulator = g_steal_pointer(&path);
    return true;
}

static bool parse_chr_type(const xmlNode *node, bool allow_file, enum domain_chr_type *type, GError **error)
{
    g_autofree char *value = conf_xml_prop(node, "type");
    if (value && strcmp(value, "pty") == 0) {
        *type = DOMAIN_CHR_PTY;
        return true;
    }
    if (value && allow_file && strcmp(value, "file") == 0) {
        *type = DOMAIN_CHR_FILE;
        return true;
    }
    if (!value)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "<%s> has no type attribute",
                    (const char *)node->name);
    else
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<%s type='%s'> is not supported by vsnap: only %s", (const char *)node->name, value,
                    allow_file ? "'pty' or 'file'" : "'pty'");
    return false;
}

/* <source path=.../>: the file of a file serial, or the pty of a running domain. */
static bool parse_chr_source(const xmlNode *node, char **path, GError **error)
{
    static const char *const attributes[] = {"path", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_free(*path);
    *path = conf_xml_prop(node, "path");
    return true;
}

static bool check_port_zero(const xmlNode *target, const char *parent, GError **error)
{
    g_autofree char *port = conf_xml_prop(target, "port");
    if (port && strcmp(port, "0") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<%s><target port='%s'> is not supported: vsnap has one serial port, port 0", parent, port);
        return false;
    }
    return true;
}

/* <model name='isa-serial'/> inside a serial <target>: what libvirt writes. */
static bool parse_serial_model(const xmlNode *target, GError **error)
{
    static const char *const attributes[] = {"name", NULL};
    for (const xmlNode *child = target->children; child; child = child->next) {
        if (!conf_xml_is_element(child))
            continue;
        if (!conf_xml_is(child, "model")) {
            conf_xml_set_unsupported_element(error, child);
            return false;
        }
        g_autofree char *name = conf_xml_prop(child, "name");
        if (!conf_xml_check_attributes(child, attributes, error) || !conf_xml_check_no_children(child, error))
            return false;
        if (name && strcmp(name, "isa-serial") != 0) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                        "serial model '%s' is not supported: vsnap has a 16550 'isa-serial'", name);
            return false;
        }
    }
    return true;
}

static bool parse_chr_target(const xmlNode *target, const char *parent, const char *target_type,
                             GError **error)
{
    static const char *const attributes[] = {"type", "port", NULL};
    if (!conf_xml_check_attributes(target, attributes, error) || !check_port_zero(target, parent, error))
        return false;
    g_autofree char *type = conf_xml_prop(target, "type");
    if (type && strcmp(type, target_type) != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<%s><target type='%s'> is not supported by vsnap: only '%s'", parent, type, target_type);
        return false;
    }
    if (strcmp(parent, "serial") == 0)
        return parse_serial_model(target, error);
    return conf_xml_check_no_children(target, error);
}

static bool parse_chr_children(const xmlNode *node, const char *target_type, struct domain_chr *chr,
                               GError **error)
{
    static const char *const children[] = {"source", "target"};
    const xmlNode *found[G_N_ELEMENTS(children)] = {NULL};
    if (!conf_xml_collect_children(node, children, G_N_ELEMENTS(children), found, error))
        return false;
    return (!found[0] || parse_chr_source(found[0], &chr->path, error)) &&
           (!found[1] || parse_chr_target(found[1], (const char *)node->name, target_type, error));
}

static bool parse_serial(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"type", NULL};
    if (def->serial.type != DOMAIN_CHR_NONE) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "only one <serial> is supported by vsnap");
        return false;
    }
    struct domain_chr chr = {DOMAIN_CHR_NONE, NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !parse_chr_type(node, true, &chr.type, error))
        return false;
    if (!parse_chr_children(node, "isa-serial", &chr, error)) {
        g_free(chr.path);
        return false;
    }
    if (chr.type == DOMAIN_CHR_FILE &&
        (!chr.path || !domain_check_absolute_path(chr.path, "<serial type='file'> <source path>", error))) {
        if (!chr.path)
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR,
                        "<serial type='file'> needs <source path='...'/>");
        g_free(chr.path);
        return false;
    }
    def->serial = chr;
    return true;
}

static bool parse_console(struct domain_def *def, const xmlNode *node, GError **error)
{
    /* tty is the pty path of a running domain, as libvirt writes it. */
    static const char *const attributes[] = {"type", "tty", NULL};
    struct domain_chr chr = {DOMAIN_CHR_NONE, NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !parse_chr_type(node, false, &chr.type, error))
        return false;
    if (!parse_chr_children(node, "serial", &chr, error)) {
        g_free(chr.path);
        return false;
    }
    def->console = chr;
    return true;
}

static bool parse_cid(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"auto", "address", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *auto_cid = conf_xml_prop(node, "auto");
    g_autofree char *address = conf_xml_prop(node, "address");
    if (auto_cid && strcmp(auto_cid, "yes") != 0 && strcmp(auto_cid, "no") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL, "<cid auto='%s'> must be 'yes' or 'no'", auto_cid);
        return false;
    }
    def->vsock.auto_cid = auto_cid ? strcmp(auto_cid, "yes") == 0 : address == NULL;
    if (!address) {
        if (!def->vsock.auto_cid) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "<cid auto='no'> needs an address");
            return false;
        }
        return true;
    }
    /* 0-2 are the hypervisor, local and host; 0xffffffff is VMADDR_CID_ANY. */
    uint64_t cid;
    if (!conf_parse_uint64(address, 3, G_MAXUINT32 - 1, "vsock <cid address>", &cid, error))
        return false;
    def->vsock.cid = (uint32_t)cid;
    return true;
}

static bool parse_vsock(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"model", NULL};
    if (!conf_xml_check_attributes(node, attributes, error))
        return false;
    g_autofree char *model = conf_xml_prop(node, "model");
    if (model && strcmp(model, "virtio") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<vsock model='%s'> is not supported by vsnap: only 'virtio'", model);
        return false;
    }
    def->vsock.present = true;
    def->vsock.auto_cid = true;
    static const struct domain_child_parser children[] = {{"cid", parse_cid, false}};
    uint32_t seen = 0;
    return domain_parse_children(def, node, children, G_N_ELEMENTS(children), &seen, error);
}

static bool parse_memballoon(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"model", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *model = conf_xml_prop(node, "model");
    if (!model || strcmp(model, "none") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<memballoon model='%s'> is not supported: vsnap has no balloon, use model='none'",
                    model ? model : "");
        return false;
    }
    def->memballoon_none = true;
    return true;
}

/* libvirt makes the console of an x86 guest an alias of the first serial
 * port, creating that port if needed; vsnap does the same. */
static bool link_console_to_serial(struct domain_def *def, GError **error)
{
    if (def->console.type == DOMAIN_CHR_NONE)
        return true;
    if (def->serial.type == DOMAIN_CHR_NONE)
        def->serial.type = def->console.type;
    if (def->serial.type != def->console.type) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<console type='pty'> is the first serial port, but <serial> is not a pty");
        return false;
    }
    return true;
}

bool domain_parse_devices(struct domain_def *def, const xmlNode *devices, GError **error)
{
    static const struct domain_child_parser children[] = {
        {"emulator", parse_emulator, false},
        {"serial", parse_serial, true},
        {"console", parse_console, false},
        {"vsock", parse_vsock, false},
        {"memballoon", parse_memballoon, false},
        {"rng", domain_parse_rng, true}, /* libvirt allows several: one is refused by name */
        {"disk", domain_parse_disk, true},
        {"interface", domain_parse_interface, true},
    };
    uint32_t seen = 0;
    return conf_xml_check_attributes(devices, no_attributes, error) &&
           domain_parse_children(def, devices, children, G_N_ELEMENTS(children), &seen, error) &&
           link_console_to_serial(def, error);
}
