/* A revert stops the running VM before the snapshot's VM starts: a daemon
 * that died in between would leave the domain neither as before nor as
 * after. The intent, a key file in the domain's snapshot directory written
 * before the stop and removed once the revert is recorded, lets the next
 * daemon finish the revert (persist/recovery.c):
 *
 *   <state_dir>/snapshots/<domain>/revert-intent   snapshot name, flags, and
 *                                                  the pid of the shim it stops
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

struct revert_intent {
    char *snapshot;   /* the snapshot's name */
    unsigned flags;   /* virDomainSnapshotRevertFlags of the call */
    pid_t old_pid;    /* the shim the revert stops; 0 when the domain was off */
};

bool revert_intent_write(const char *tree_dir, const struct revert_intent *intent,
                         GError **error);
/* false when there is none (or it cannot be read: logged, and removed). */
bool revert_intent_read(const char *tree_dir, struct revert_intent *intent);
void revert_intent_remove(const char *tree_dir);
void revert_intent_clear(struct revert_intent *intent);
