/* The bodies of vm.snapshot and vm.restore as their handlers (snapshot.c)
 * parse them, before anything is asked of the VMM: public so the fuzz
 * targets (tests/fuzz/) reach exactly the handlers' parsing. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "persist/persist.h"

struct restore_body {
    struct persist_restore_request req;
    bool resume;
};

/* The strings and objects *out points at stay parser's. Errors are
 * SHIM_ERROR_INVALID naming the field. */
bool snapshot_body_parse(GBytes *body, JsonParser *parser, struct persist_snapshot_request *out,
                         GError **error);
bool restore_body_parse(GBytes *body, JsonParser *parser, struct restore_body *out, GError **error);
