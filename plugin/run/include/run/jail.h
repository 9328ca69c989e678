/* The confinement of the shims the daemon launches (docs/confinement.md):
 * each runs as the unprivileged `confine_user` (default vsnap, created when
 * missing), in its own mount, IPC, UTS and PID namespaces, pivot_root'ed
 * into <run_dir>/<name>/root where only the domain's files are visible, in
 * a cgroup of its own (cgroup.h), with its seccomp allow-lists. The shim
 * does the namespaces and the jail itself (vsnap-shim --confine); the daemon
 * decides what the jail holds, gives the user the directories the shim
 * writes into, and makes the cgroup.
 *
 * What a domain's jail holds is computed in one place, jail_paths(): a
 * feature that hands the shim another path adds one line there. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "domain/state.h"

/* Test-only: absolute paths, ':'-separated, bound read-write into every jail. */
#define JAIL_TEST_PATHS_ENV "VSNAPD_TEST_JAIL_PATHS"

struct jail_launch {
    char *confine_arg;  /* the value of the shim's --confine; NULL: not confined */
    GArray *cgroup_procs; /* int: cgroup.procs fds the launcher joins */
};

/* The paths of a domain's jail, each "ro /path", "rw /path" or "dev /dev/x";
 * read_only_dirs (NULL-terminated, or NULL) are another domain's, bound
 * read-only (a clone's origin snapshot: persist/clone.h). */
GPtrArray *jail_paths(const struct vsnap_driver *drv, const struct domain_def *live,
                      const char *run_dir, const char *log_path, const char *const *read_only_dirs);

/* Everything the launch of a confined shim needs; with confinement off only
 * the cgroup. */
bool jail_prepare(struct vsnap_driver *drv, const struct domain_def *live, const char *run_dir,
                  const char *log_path, const char *const *read_only_dirs, struct jail_launch *out,
                  GError **error);
void jail_launch_clear(struct jail_launch *l);
/* After the shim exited: its cgroup goes, and its save area goes back to
 * the daemon's user. */
void jail_cleanup(struct vsnap_driver *drv, const char *name);

/* A directory the daemon made for the shim to write into (a snapshot's
 * destination): owned by the shims' user when shims are confined. */
bool jail_give_dir(const struct vsnap_driver *drv, const char *dir, GError **error);
/* A file or directory the shim only reads, which the daemon made (a
 * snapshot pulled from a store): readable by the shims' group when shims are
 * confined. Group read rather than ownership: a pulled layer is a hard link
 * to the host's store cache, which other domains' snapshots share, so no
 * shim may write it. */
bool jail_share_read(const struct vsnap_driver *drv, const char *path, GError **error);
