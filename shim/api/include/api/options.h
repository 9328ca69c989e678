/* Cloud Hypervisor's option syntax: "key=value,key=value" (a bare word is a key
 * with no value, e.g. "--serial tty"). Sizes take K/M/G suffixes. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct option_list;

/* Split spec into pairs. allowed: NULL-terminated key names; anything else is
 * refused with an error naming option (e.g. "--memory") and the key. */
struct option_list *option_list_parse(const char *option, const char *spec,
                                      const char *const *allowed, GError **error);
void option_list_free(struct option_list *list);
typedef struct option_list option_list;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(option_list, option_list_free)

/* The value of key, or NULL when absent. A bare word has value "". */
const char *option_list_get(const struct option_list *list, const char *key);
bool option_list_has(const struct option_list *list, const char *key);
/* The first key, for options whose first word is a mode ("--serial tty"). */
const char *option_list_first_key(const struct option_list *list);

/* "512M" -> 536870912. Suffixes K, M, G (powers of 1024), optional "B"/"iB". */
bool parse_size(const char *text, uint64_t *out, GError **error);
bool parse_uint(const char *text, uint64_t max, uint64_t *out, GError **error);
/* on/off, true/false, yes/no, 1/0 */
bool parse_bool(const char *text, bool *out, GError **error);
/* "[a,b,c]" -> {"a", "b", "c", NULL}; "[]" -> {NULL}. NULL with an error
 * when the brackets are missing. */
char **parse_list(const char *text, GError **error);
