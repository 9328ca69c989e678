/* memory_restore_mode of vm.restore: Cloud Hypervisor's "copy" and "ondemand",
 * plus vsnap's "merge" (the published full-image baseline) and "shared". */
#pragma once

#include <glib.h>
#include <stdbool.h>

enum snap_restore_mode {
    SNAP_RESTORE_COPY,     /* snap_restore_copy() */
    SNAP_RESTORE_MERGE,    /* snap_restore_merge() */
    SNAP_RESTORE_ONDEMAND, /* snap_uffd_start() */
    SNAP_RESTORE_SHARED,   /* snap_restore_shared(): clones share what they only read */
};

/* NULL means the default, copy (as in Cloud Hypervisor). Unknown text: false
 * with an error listing the accepted values. */
bool snap_restore_mode_parse(const char *text, enum snap_restore_mode *mode, GError **error);
const char *snap_restore_mode_name(enum snap_restore_mode mode);
