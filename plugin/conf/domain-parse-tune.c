/* <memtune> and <cputune>: the limits of the domain's cgroup (plugin/host/cgroup.c
 * applies them to the shim). Only what a cgroup of one process enforces:
 * hard_limit, soft_limit and swap_hard_limit; shares, period and quota. */
#include <string.h>

#include "domain-parse.h"
#include "util/virt-error.h"
#include "conf/xml-util.h"

static bool parse_limit(const xmlNode *node, uint64_t *kib, GError **error)
{
    static const char *const attributes[] = {"unit", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) ||
        !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *unit = conf_xml_prop(node, "unit");
    g_autofree char *value = conf_xml_text_trimmed(node);
    return domain_memory_to_kib(value, unit, kib, error);
}

static bool parse_hard_limit(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_limit(node, &def->memtune.hard_limit_kib, error);
}

static bool parse_soft_limit(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_limit(node, &def->memtune.soft_limit_kib, error);
}

static bool parse_swap_hard_limit(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_limit(node, &def->memtune.swap_hard_limit_kib, error);
}

bool domain_parse_memtune(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const struct domain_child_parser children[] = {
        {"hard_limit", parse_hard_limit, false},
        {"soft_limit", parse_soft_limit, false},
        {"swap_hard_limit", parse_swap_hard_limit, false},
    };
    uint32_t seen = 0;
    if (!conf_xml_check_attributes(node, (const char *const[]){NULL}, error) ||
        !domain_parse_children(def, node, children, G_N_ELEMENTS(children), &seen, error))
        return false;
    def->memtune.present = true;
    return true;
}

static bool parse_number(const xmlNode *node, uint64_t min, uint64_t max, const char *what,
                         uint64_t *out, GError **error)
{
    if (!conf_xml_check_attributes(node, (const char *const[]){NULL}, error) ||
        !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *value = conf_xml_text_trimmed(node);
    return conf_parse_uint64(value, min, max, what, out, error);
}

/* libvirt's ranges: shares 2..262144, period 1000..1000000 us, quota
 * 1000..17592186044415 us (-1 and 0: no quota). */
static bool parse_shares(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_number(node, 2, 262144, "<cputune><shares>", &def->cputune.shares, error);
}

static bool parse_period(struct domain_def *def, const xmlNode *node, GError **error)
{
    return parse_number(node, 1000, 1000000, "<cputune><period>", &def->cputune.period_us, error);
}

static bool parse_quota(struct domain_def *def, const xmlNode *node, GError **error)
{
    g_autofree char *value = conf_xml_text_trimmed(node);
    if (value && (strcmp(value, "-1") == 0 || strcmp(value, "0") == 0)) {
        def->cputune.quota_us = 0;
        return conf_xml_check_no_children(node, error);
    }
    return parse_number(node, 1000, 17592186044415ULL, "<cputune><quota>", &def->cputune.quota_us,
                        error);
}

bool domain_parse_cputune(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const struct domain_child_parser children[] = {
        {"shares", parse_shares, false},
        {"period", parse_period, false},
        {"quota", parse_quota, false},
    };
    uint32_t seen = 0;
    if (!conf_xml_check_attributes(node, (const char *const[]){NULL}, error) ||
        !domain_parse_children(def, node, children, G_N_ELEMENTS(children), &seen, error))
        return false;
    def->cputune.present = true;
    return true;
}
