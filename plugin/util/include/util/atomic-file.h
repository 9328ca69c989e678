/* Replacing a file's contents so that readers, and the file after a crash,
 * see either the old text or the new one, never a mix: a temporary file
 * beside it, fsync, rename (glib's CONSISTENT | DURABLE), mode 0600. The one
 * way the daemon writes its metadata, status and progress files. */
#pragma once

#include <glib.h>
#include <stdbool.h>

/* Errors are VSNAP_VIR_ERROR / VIR_ERR_SYSTEM_ERROR naming path. */
bool atomic_file_write(const char *path, const char *text, GError **error);
