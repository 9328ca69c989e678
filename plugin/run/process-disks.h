/* A run's disk images: which other domain uses one, asked before a start so
 * that the refusal names it. An image has one writer, or readers and no writer:
 *
 *  - a run writes the image of a disk that is not <readonly/> and has no
 *    layers; it reads the image of a read-only disk and of a disk on
 *    layers (the base);
 *  - another domain uses an image while it runs (its shim has it open,
 *    as its definition and chains say), and, running or shut off, as long
 *    as its disk record keeps layers over it (disk-state.h): a lock dies
 *    with its shim, the record does not, and writing a base changes what
 *    every layer over it means.
 *
 * The shims' image locks (common/snapshot/image-lock.h) are what decides;
 * this is what the daemon knows beyond them (the domain's name, the layers
 * of a domain that is shut off), and the locks catch what it cannot see
 * (another daemon, a shim started by hand, a start racing this one). */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/state.h"

/* Refuse (VIR_ERR_RESOURCE_BUSY, naming the image, its disk and the other
 * domain) a run of domain `name` with the disks of `live` that another
 * domain's use of an image conflicts with. `restoring`: the run restores a
 * snapshot or save image, whose disks all sit on layers (every image only
 * read), whatever live's chains say yet. */
bool process_disks_check(struct vsnap_driver *drv, const char *name, const struct domain_def *live, bool restoring,
                      GError **error);
