/* Reading state.json back: binary KVM structures as base64 strings, 64-bit
 * values as "0x..." strings (JSON numbers lose precision past 2^53), with
 * errors that name the member. They are written with json/vjson.h
 * (vjson_base64, vjson_hex64, vjson_uint, vjson_str).
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PERSIST_ERROR (persist_error_quark())
GQuark persist_error_quark(void);

enum persist_error_code {
    PERSIST_ERROR_INVALID, /* the request or the snapshot on disk is wrong: 400 */
    PERSIST_ERROR_FAILED,  /* KVM or the file system failed: 500 */
};


/* Decode member `name` of obj into exactly len bytes. `what` names the object
 * in the error ("vCPU 1"). */
bool state_get_blob(JsonObject *obj, const char *name, void *out, size_t len, const char *what,
                    GError **error);
/* Decode a blob of any length into *data (g_free it). */
bool state_get_blob_any(JsonObject *obj, const char *name, uint8_t **data, size_t *len,
                        const char *what, GError **error);
bool state_get_u64(JsonObject *obj, const char *name, uint64_t *out, const char *what,
                   GError **error);
/* A plain JSON integer in [0, max] (device registers). */
bool state_get_uint(JsonObject *obj, const char *name, uint64_t max, uint64_t *out, const char *what,
                    GError **error);
/* The member as an object, or NULL with an error. */
JsonObject *state_get_object(JsonObject *obj, const char *name, const char *what, GError **error);
const char *state_get_string(JsonObject *obj, const char *name, const char *what, GError **error);
