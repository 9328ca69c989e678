/* Recovery of the operations a daemon's end or an error cut short, all in
 * one module (persist/recovery.c):
 *
 *   - a job file (persist/job.h): the VM the job paused runs again and what
 *     the job was writing goes; a save that had put its image in place is
 *     finished instead (the VM stops as saved);
 *   - snapshot directories without metadata (the shim finished them, nobody
 *     recorded them) and the shim's partial directories go, but those whose
 *     layers the domain's disks run on;
 *   - deletes marked `deleting` (a fold of layers into their children, or of
 *     the disks back into their images) are finished;
 *   - a revert intent: the revert is recorded, finished, or dropped when the
 *     old VM still runs;
 *   - everything in a save area but its managed image goes.
 *
 * It runs at the daemon's start and when a snapshot-create or a
 * snapshot-delete finds a delete of its own domain cut short (persist/
 * snapshot.c says why those two). Loading the snapshot tree never recovers
 * anything, and neither do the queries nor a revert. */
#pragma once

#include "domain/state.h"

/* At start-up, after the reattach (a shim that was still writing a snapshot
 * has answered vm.info, so it is done) and before any client is served:
 * each domain under its job lock, then the save areas. Failures are logged;
 * what could not be finished stays for the next start (or, for a delete,
 * the domain's next snapshot-create or snapshot-delete). */
void recovery_at_start(struct vsnap_driver *drv);
