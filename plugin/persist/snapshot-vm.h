/* Taking a snapshot of the running VM: pause (if running), vm.snapshot into
 * a directory, seal the layer, resume (if it was running, also after a
 * failure); or live, without the pause. Snapshots, saves and managed saves all take theirs here.
 * Errors are VSNAP_VIR_ERROR GErrors. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/domain.h"

struct monitor_live_result;

/* A full snapshot into dir, or with parent_dir a diff on the snapshot there. */
bool vmsnap_take(struct vsnap_domain *dom, const char *dir, const char *parent_dir,
                 GError **error);

/* A diff on base_dir when given and the shim takes one, else a full snapshot
 * (always right: the shim may refuse a diff, e.g. when its dirty log was
 * reset). Only a refusal (HTTP 4xx) leads to the full one: the error of a
 * diff that failed otherwise (the shim died, the disk is full) is reported
 * as it is. *is_diff says which was taken. */
bool vmsnap_take_diff_or_full(struct vsnap_domain *dom, const char *dir, const char *base_dir,
                              bool *is_diff, GError **error);
/* The same, live when the VM runs (snapshot-create --live): the VM is not
 * paused; the shim pre-copies its RAM while it runs and stops it only for
 * the rest (vm.snapshot "live": true). A paused VM is snapshotted as it is.
 * A cancel (vm.cancel-snapshot, domjobabort) fails it with
 * VIR_ERR_OPERATION_ABORTED, never followed by a full snapshot. *result:
 * the shim's figures of a live one (all zero when the VM was paused). */
bool vmsnap_take_live_diff_or_full(struct vsnap_domain *dom, const char *dir, const char *base_dir,
                                   bool *is_diff, struct monitor_live_result *result, GError **error);
