#include "util/atomic-file.h"

#include "util/virt-error.h"

bool atomic_file_write(const char *path, const char *text, GError **error)
{
    g_autoptr(GError) local = NULL;
    if (!g_file_set_contents_full(path, text, -1,
                                  G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                  0600, &local)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot write %s: %s", path,
                    local->message);
        return false;
    }
    return true;
}
