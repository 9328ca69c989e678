/* persist's errors say whose fault a failed snapshot or restore was: the
 * request's or the snapshot's on disk (answered 400) or the host's (500). */
#pragma once

#include <glib.h>

#define PERSIST_ERROR (persist_error_quark())
GQuark persist_error_quark(void);

enum persist_error_code {
    PERSIST_ERROR_INVALID, /* the request or the snapshot on disk is wrong: 400 */
    PERSIST_ERROR_FAILED,  /* KVM or the file system failed: 500 */
    PERSIST_ERROR_CANCELLED, /* a live snapshot ended by persist_live_cancel */
};

/* An error of a layer below as one of persist's: the snapshot library's
 * (SNAP_ERROR: a bad snapshot or argument is INVALID, the rest FAILED),
 * state.json's values (STATE_ERROR: INVALID) and userfaultfd's
 * (SNAP_UFFD_ERROR: FAILED). Other domains stay. */
void persist_error_adopt(GError **error);
