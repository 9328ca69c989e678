#include "ram-snapshot/restore-mode.h"

#include "snapshot/layer.h"

#include <string.h>

static const char *const mode_names[] = {
    [SNAP_RESTORE_COPY] = "copy",
    [SNAP_RESTORE_MERGE] = "merge",
    [SNAP_RESTORE_ONDEMAND] = "ondemand",
    [SNAP_RESTORE_SHARED] = "shared",
};

bool snap_restore_mode_parse(const char *text, enum snap_restore_mode *mode, GError **error)
{
    if (!text) {
        *mode = SNAP_RESTORE_COPY;
        return true;
    }
    for (unsigned i = 0; i < G_N_ELEMENTS(mode_names); i++)
        if (strcmp(text, mode_names[i]) == 0) {
            *mode = (enum snap_restore_mode)i;
            return true;
        }
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                "memory_restore_mode \"%s\" is not supported (use copy, merge, ondemand or shared)", text);
    return false;
}

const char *snap_restore_mode_name(enum snap_restore_mode mode)
{
    return (unsigned)mode < G_N_ELEMENTS(mode_names) ? mode_names[mode] : "unknown";
}
