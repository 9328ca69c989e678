/* Clones through libvirt: a domain whose definition says
 * <vsnap:from domain='NAME' snapshot='SNAP'/> starts from that snapshot of
 * that domain (its origin) instead of booting, with its own name, UUID, MAC
 * and tap, serial file and disk overlays over the snapshot's disk chain, and
 * a new VM generation (VMGenID: the guest learns it is a copy). Its memory is
 * restored in the definition's restore mode, "shared" unless it says another
 * (clones then share the host pages of what they only read).
 *
 * Which state a clone starts from (docs/clones.md): its managed save image
 * if it has one (save.c), else its own current snapshot if it has
 * snapshots, else the origin's snapshot again, with new overlays (what the
 * last run wrote to its disks went with the memory that wrote it).
 *
 * The origin's snapshot, and every snapshot of the origin its layers sit on,
 * cannot be deleted while a clone (or a snapshot of one) descends from it,
 * nor can the origin be undefined with its snapshots: their layers, and the
 * origin's image under them, are the clones' base. Call everything under the
 * job of the domain named. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/state.h"

struct domain_def;

/* At define and create: a clone's origin and its snapshot exist, and the
 * clone has the snapshot's memory size, vCPU count and disks
 * (VIR_ERR_CONFIG_UNSUPPORTED naming both values). Nothing for other
 * definitions. */
bool clone_check_definition(struct vsnap_driver *drv, const struct domain_def *def, GError **error);

/* The start of a shut-off clone without a managed save image: from its
 * current snapshot, else from its origin's. *started false (and true
 * returned) for a domain that is no clone: it boots. */
bool clone_start(struct vsnap_driver *drv, struct vsnap_domain *dom, bool paused, bool *started,
                 GError **error);
