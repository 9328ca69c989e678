/* <rng model='virtio'>: the shim's virtio-rng. Its backend is the host's
 * random device (<backend model='random'>, /dev/urandom when empty, as
 * libvirt); <rate bytes= period=> becomes the device's byte limit. */
#include "domain-parse.h"

#include <string.h>

#include "conf/xml-util.h"

static bool parse_backend(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"model", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *model = conf_xml_prop(node, "model");
    if (!model || strcmp(model, "random") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<rng><backend model='%s'> is not supported by vsnap: only 'random'", model ? model : "");
        return false;
    }
    g_autofree char *path = conf_xml_text_trimmed(node);
    if (!*path) {
        g_free(path);
        path = g_strdup(VSNAP_DEFAULT_RNG_BACKEND);
    }
    if (!domain_check_absolute_path(path, "<rng><backend>", error))
        return false;
    g_free(def->rng.backend);
    def->rng.backend = g_steal_pointer(&path);
    return true;
}

static bool parse_rate(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"bytes", "period", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *bytes = conf_xml_prop(node, "bytes");
    g_autofree char *period = conf_xml_prop(node, "period");
    uint64_t value;
    if (!conf_parse_uint64(bytes, 1, G_MAXUINT32, "<rng><rate bytes>", &value, error))
        return false;
    def->rng.rate_bytes = value;
    def->rng.rate_period_ms = 1000; /* libvirt's default period */
    if (period && !conf_parse_uint64(period, 1, G_MAXUINT32, "<rng><rate period>", &def->rng.rate_period_ms, error))
        return false;
    return true;
}

bool domain_parse_rng(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"model", NULL};
    if (def->rng.present) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED, "only one <rng> is supported by vsnap");
        return false;
    }
    if (!conf_xml_check_attributes(node, attributes, error))
        return false;
    g_autofree char *model = conf_xml_prop(node, "model");
    if (!model || strcmp(model, "virtio") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<rng model='%s'> is not supported by vsnap: only 'virtio'", model ? model : "");
        return false;
    }
    static const struct domain_child_parser children[] = {
        {"backend", parse_backend, false},
        {"rate", parse_rate, false},
    };
    uint32_t seen = 0;
    if (!domain_parse_children(def, node, children, G_N_ELEMENTS(children), &seen, error))
        return false;
    if (!(seen & 1)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "<rng> needs a <backend model='random'>");
        return false;
    }
    def->rng.present = true;
    return true;
}
