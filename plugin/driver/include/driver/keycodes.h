/* virsh send-key's key codes as the i8042 keyboard types them: each code of
 * the caller's codeset becomes its set-1 scan code bytes (an 0xe0 prefix for
 * the extended keys), pressed and released. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

/* The bytes of one key's press (or release): an 0xe0 prefix and the code. */
#define KEYCODE_MAX_BYTES 2

/* The press and release bytes of n keys in codeset (virKeycodeSet): press[]
 * all the presses in order, release[] the releases in reverse order (as a
 * person lets go), each at most n * KEYCODE_MAX_BYTES. Codesets without a
 * set-1 meaning here (atset2, atset3, osx, usb, win32) are refused by name
 * (VIR_ERR_ARGUMENT_UNSUPPORTED); a code the codeset has no key for is
 * VIR_ERR_INVALID_ARG naming it. */
bool keycodes_to_scancodes(int codeset, const uint32_t *codes, unsigned n, uint8_t *press,
                           unsigned *n_press, uint8_t *release, unsigned *n_release, GError **error);
