/* The <disks> of vsnap's snapshot XML (libvirt's external model, see
 * conf/snapshot-conf.h): what a snapshot holds of each disk, read from its
 * directory, and what a request may say about them. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "conf/snapshot-conf.h"

/* out->disks for the snapshot in dir of a domain defined as domain: each
 * disk's sealed layer there (external), or 'no' when the snapshot holds none
 * (read-only disks). Nothing for a domain without disks. A directory that
 * cannot be read shows the disk external without a file (and is logged):
 * listing snapshots must not fail on one damaged snapshot, which reverting
 * refuses by name. */
void snapshot_disks_fill(const char *dir, const struct domain_def *domain, struct snapshot_def *out);

/* A create request's <disks> (snapshot-create-as --diskspec): vsnap layers
 * every writable disk itself, so each named disk must be one of the domain's,
 * 'external' without a file for a writable disk and 'no' for a read-only
 * one. VIR_ERR_CONFIG_UNSUPPORTED (or VIR_ERR_INVALID_ARG for an unknown disk)
 * naming the disk otherwise. */
bool snapshot_disks_check_request(const struct snapshot_def *request, const struct domain_def *domain,
                                  GError **error);

/* A redefinition's <disks>, if given, must be the snapshot's own (stored). */
bool snapshot_disks_check_same(const struct snapshot_def *given, const struct snapshot_def *stored,
                               GError **error);
