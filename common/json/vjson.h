/* Building JSON: one typed call per member.
 *
 * json-glib takes two calls per member (json_builder_set_member_name, then
 * json_builder_add_*_value) and nothing ties the name to its value; vsnap
 * wrote that pair by hand some 230 times and grew five private sets of
 * helpers around it. These are the one set, in the spirit of libvirt's
 * virJSONValueObjectAdd ("s:kernel", "S:cmdline"), but as typed C
 * functions rather than a format string, so the compiler checks each value
 * against its member's type (the build refuses an integer where a string
 * goes: tests/common/meson.build shows it).
 *
 * Every call adds to the builder's current container: with a name, a member
 * of the current object; with name NULL, the next element of the current
 * array (or the document's root). Misuse (a member outside an object, an end
 * that does not match its begin) is a GLib critical, as it is in json-glib.
 *
 * The text is json-glib's own (vjson_finish is json_to_string of the root),
 * so moving a caller onto these changes no byte of what it writes. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A string, or null when value is NULL (json-glib's own behaviour). */
void vjson_str(JsonBuilder *b, const char *name, const char *value);
/* A string, or nothing at all when value is NULL (libvirt's "S:"). */
void vjson_str_opt(JsonBuilder *b, const char *name, const char *value);
void vjson_int(JsonBuilder *b, const char *name, int64_t value);
/* A JSON integer from an unsigned value; one beyond INT64_MAX is a critical
 * (it would turn negative), use vjson_hex64 for full 64-bit values. */
void vjson_uint(JsonBuilder *b, const char *name, uint64_t value);
void vjson_bool(JsonBuilder *b, const char *name, bool value);
void vjson_null(JsonBuilder *b, const char *name);
/* A 64-bit value as a "0x..." string: JSON numbers lose precision past 2^53. */
void vjson_hex64(JsonBuilder *b, const char *name, uint64_t value);
/* len bytes as a base64 string. */
void vjson_base64(JsonBuilder *b, const char *name, const void *data, size_t len);
/* A NULL-terminated string vector as an array of strings, or null when strv
 * is NULL (an empty vector is []). */
void vjson_strv(JsonBuilder *b, const char *name, char *const *strv);
/* A finished node (a parsed document, another builder's root), or null when
 * node is NULL; takes it. */
void vjson_node(JsonBuilder *b, const char *name, JsonNode *node);
/* Only the member's name: its value is what the next call adds, for a value
 * that another module writes (a device's saved state, a part of vm.info). */
void vjson_member(JsonBuilder *b, const char *name);

void vjson_object_begin(JsonBuilder *b, const char *name);
void vjson_object_end(JsonBuilder *b);
void vjson_array_begin(JsonBuilder *b, const char *name);
void vjson_array_end(JsonBuilder *b);

/* The document built so far as text, compact or pretty (two spaces, " : "),
 * newly allocated. */
char *vjson_finish(JsonBuilder *b, bool pretty);
