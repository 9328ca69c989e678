/* Parsing JSON that someone else wrote, within bounds.
 *
 * json-glib's parser recurses once per nesting level and has no limit: a body
 * of 100,000 nested arrays ("[[[...") overflows the stack of whichever thread
 * parses it. Every JSON document vsnap reads from outside (REST bodies, the
 * guest's READY line, a snapshot's config.json and state.json, the shim's
 * replies and events in the daemon) goes through here: a cheap pass over the
 * bytes checks the size, the nesting depth and that the text is plain JSON
 * (RFC 8259) before json-glib sees it.
 *
 * Plain JSON because json-glib also takes '#' and C comments and
 * single-quoted strings, inside which brackets do not count; refusing them
 * (nobody writes them to vsnap) keeps the pass exact: what it counts as
 * nesting is exactly what the parser will recurse on. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stddef.h>

/* Deeper than any document vsnap reads (VmConfig and state.json nest less
 * than 10 levels), far shallower than what overflows a thread's stack. Cloud
 * Hypervisor's JSON parser (serde_json) stops at 128 too. */
#define BOUNDED_JSON_MAX_DEPTH 128u

/* Whether text[0, len) is at most max_bytes long, nests at most
 * BOUNDED_JSON_MAX_DEPTH levels and holds only plain JSON tokens. It does not
 * check the grammar: the parser does that. Errors are JSON_PARSER_ERROR_INVALID_DATA
 * and say where. */
bool bounded_json_check(const char *text, size_t len, size_t max_bytes, GError **error);

/* bounded_json_check, then json_parser_load_from_data. */
bool bounded_json_load_data(JsonParser *parser, const char *text, size_t len, size_t max_bytes,
                            GError **error);

/* All of a regular file (a FIFO or device is refused without blocking) of at
 * most max_bytes, read (not mapped: a file truncated under a mapping would be
 * a SIGBUS) into *text, NUL-terminated (g_free it). Errors are G_IO_ERROR and
 * do not name the file (the caller does). */
bool bounded_json_read_file(const char *path, size_t max_bytes, char **text, size_t *len, GError **error);

/* bounded_json_read_file, then bounded_json_load_data. Errors are G_IO_ERROR
 * for the file, JSON_PARSER_ERROR for its content. */
bool bounded_json_load_file(JsonParser *parser, const char *path, size_t max_bytes, GError **error);
