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

/* state.json holds something this shim cannot take: a member missing, of the
 * wrong type, out of range (raised here and by the devices restoring their
 * state; persist answers it as the snapshot's fault, persist-error.h). */
#define STATE_ERROR (state_error_quark())
GQuark state_error_quark(void);

enum state_error_code {
    STATE_ERROR_INVALID,
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
