/* The one way a domain starts from saved state instead of booting: snapshot
 * revert, restore of a save image and start from a managed save image all
 * come here. A new shim is launched and, in place of vm.create + vm.boot,
 * sent vm.restore from the snapshot directory with the domain's restore mode
 * and the host paths of the new run; the domain then reads running or paused
 * with the reasons and events libvirt gives for that origin. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/state.h"

enum restore_origin {
    RESTORE_FROM_SAVE,       /* restore, managed save: "restored" */
    RESTORE_FROM_SNAPSHOT,   /* snapshot-revert: "from snapshot" */
};

struct restore_request {
    const char *source_dir;          /* a complete snapshot directory (chain checked) */
    const struct domain_def *def;    /* the live definition to run with */
    bool run;                        /* else paused */
    enum restore_origin origin;
};

/* Call under dom->job with dom inactive. */
bool restore_start(struct vsnap_driver *drv, struct vsnap_domain *dom,
                   const struct restore_request *req, GError **error);

/* How guest memory is brought back (memory_restore_mode): the restore mode of
 * the domain's own definition, the one its next run is defined with
 * (next_def while a redefinition waits for the running VM to stop, else def).
 * Not the definition saved with the image or snapshot: the mode is the host's
 * choice of how to load memory, not part of the guest's saved state, so a
 * redefinition applies to every later restore. */
const char *restore_mode(struct vsnap_domain *dom);
