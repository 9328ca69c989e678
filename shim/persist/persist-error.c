/* persist's error domain and the errors of the layers below it taken over
 * into it: see persist-error.h. */
#include "persist/persist-error.h"

#include "ram-snapshot/uffd.h"
#include "snapshot/layer.h"
#include "state/state-json.h"

G_DEFINE_QUARK(vsnap-persist-error, persist_error)

static bool is_bad_input(const GError *e)
{
    return e->domain == STATE_ERROR || snap_error_is_bad_input(e);
}

void persist_error_adopt(GError **error)
{
    if (!error || !*error)
        return;
    GQuark d = (*error)->domain;
    if (d != SNAP_ERROR && d != STATE_ERROR && d != SNAP_UFFD_ERROR)
        return;
    int code = is_bad_input(*error) ? PERSIST_ERROR_INVALID : PERSIST_ERROR_FAILED;
    GError *persist = g_error_new_literal(PERSIST_ERROR, code, (*error)->message);
    g_clear_error(error);
    *error = persist;
}
