#include "api/options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/shim-error.h"

struct option_pair {
    char *key;
    char *value;
};

struct option_list {
    GArray *pairs; /* struct option_pair */
};

static void option_pair_clear(gpointer data)
{
    struct option_pair *pair = data;
    g_free(pair->key);
    g_free(pair->value);
}

void option_list_free(struct option_list *list)
{
    if (!list)
        return;
    g_array_unref(list->pairs);
    g_free(list);
}

static bool key_allowed(const char *key, const char *const *allowed)
{
    for (; *allowed; allowed++)
        if (strcmp(key, *allowed) == 0)
            return true;
    return false;
}

static bool add_pair(struct option_list *list, const char *option, const char *item,
                     const char *const *allowed, GError **error)
{
    const char *eq = strchr(item, '=');
    struct option_pair pair = {
        .key = eq ? g_strndup(item, eq - item) : g_strdup(item),
        .value = g_strdup(eq ? eq + 1 : ""),
    };

    if (!key_allowed(pair.key, allowed)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "%s: unknown parameter '%s'",
                    option, pair.key);
    } else if (option_list_has(list, pair.key)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "%s: parameter '%s' given twice",
                    option, pair.key);
    } else {
        g_array_append_val(list->pairs, pair);
        return true;
    }
    option_pair_clear(&pair);
    return false;
}

/* Split at commas outside [...]: Cloud Hypervisor's lists, such as
 * oem_strings=[a,b], are one value. NULL when the brackets do not balance. */
static char **split_items(const char *spec)
{
    g_autoptr(GStrvBuilder) items = g_strv_builder_new();
    g_autoptr(GString) item = g_string_new(NULL);
    int depth = 0;
    for (const char *p = spec;; p++) {
        if (*p == '\0' || (*p == ',' && depth == 0)) {
            g_strv_builder_add(items, item->str);
            g_string_truncate(item, 0);
            if (*p == '\0')
                break;
            continue;
        }
        depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
        if (depth < 0)
            return NULL;
        g_string_append_c(item, *p);
    }
    return depth == 0 ? g_strv_builder_end(items) : NULL;
}

struct option_list *option_list_parse(const char *option, const char *spec,
                                      const char *const *allowed, GError **error)
{
    g_autoptr(option_list) list = g_new0(struct option_list, 1);
    list->pairs = g_array_new(FALSE, TRUE, sizeof(struct option_pair));
    g_array_set_clear_func(list->pairs, option_pair_clear);

    if (!spec || !*spec) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "%s: empty value", option);
        return NULL;
    }
    g_auto(GStrv) items = split_items(spec);
    if (!items) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "%s: unbalanced '[' or ']' in '%s'", option, spec);
        return NULL;
    }
    for (char **item = items; *item; item++) {
        if (!**item) {
            g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                        "%s: empty parameter in '%s'", option, spec);
            return NULL;
        }
        if (!add_pair(list, option, *item, allowed, error))
            return NULL;
    }
    return g_steal_pointer(&list);
}

const char *option_list_get(const struct option_list *list, const char *key)
{
    for (guint i = 0; i < list->pairs->len; i++) {
        const struct option_pair *pair = &g_array_index(list->pairs, struct option_pair, i);
        if (strcmp(pair->key, key) == 0)
            return pair->value;
    }
    return NULL;
}

bool option_list_has(const struct option_list *list, const char *key)
{
    return option_list_get(list, key) != NULL;
}

const char *option_list_first_key(const struct option_list *list)
{
    if (list->pairs->len == 0)
        return NULL;
    return g_array_index(list->pairs, struct option_pair, 0).key;
}

bool parse_uint(const char *text, uint64_t max, uint64_t *out, GError **error)
{
    char *end = NULL;

    errno = 0;
    if (!text || !g_ascii_isdigit(*text)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "'%s' is not a number",
                    text ? text : "");
        return false;
    }
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || *end || value > max) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "'%s' is not a number between 0 and %" G_GUINT64_FORMAT, text, max);
        return false;
    }
    *out = value;
    return true;
}

static int size_shift(const char *suffix)
{
    static const struct { const char *name; int shift; } units[] = {
        { "", 0 }, { "B", 0 },
        { "K", 10 }, { "KB", 10 }, { "KiB", 10 }, { "k", 10 },
        { "M", 20 }, { "MB", 20 }, { "MiB", 20 },
        { "G", 30 }, { "GB", 30 }, { "GiB", 30 },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(units); i++)
        if (strcmp(suffix, units[i].name) == 0)
            return units[i].shift;
    return -1;
}

bool parse_size(const char *text, uint64_t *out, GError **error)
{
    char *end = NULL;

    errno = 0;
    if (!text || !g_ascii_isdigit(*text)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "'%s' is not a size",
                    text ? text : "");
        return false;
    }
    unsigned long long value = strtoull(text, &end, 10);
    int shift = size_shift(end);
    if (errno || shift < 0 || value > (UINT64_MAX >> shift)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "'%s' is not a size (a number with an optional K, M or G suffix)", text);
        return false;
    }
    *out = (uint64_t)value << shift;
    return true;
}

bool parse_bool(const char *text, bool *out, GError **error)
{
    static const char *const yes[] = { "on", "true", "yes", "1", NULL };
    static const char *const no[] = { "off", "false", "no", "0", NULL };

    if (text && g_strv_contains(yes, text)) {
        *out = true;
        return true;
    }
    if (text && g_strv_contains(no, text)) {
        *out = false;
        return true;
    }
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "'%s' is not on/off", text ? text : "");
    return false;
}

char **parse_list(const char *text, GError **error)
{
    size_t len = strlen(text);
    if (len < 2 || text[0] != '[' || text[len - 1] != ']') {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "'%s' is not a list: write [a,b,...]", text);
        return NULL;
    }
    if (len == 2)
        return g_new0(char *, 1);
    g_autofree char *inner = g_strndup(text + 1, len - 2);
    return g_strsplit(inner, ",", -1);
}
