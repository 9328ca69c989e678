/* A cgroup per running domain, holding its shim, with the limits of the
 * domain's <memtune> and <cputune>. Under the daemon's own cgroup (so a
 * daemon confined by systemd or a container keeps its VMs inside), named
 * vsnap-<domain>-<instance> (<instance>: a hash of the run directory, so two
 * daemons running domains of one name do not share a cgroup). cgroup v2
 * where the daemon's cgroup has the memory and cpu controllers, else the v1
 * memory and cpu hierarchies (a hybrid host such as these). On v2 a daemon
 * whose cgroup holds processes moves itself into a leaf of it, "virtvsnapd",
 * first (only leaves hold processes once controllers are handed down); the
 * domains' cgroups stay beside that leaf. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "conf/domain-conf.h"

/* Creates the domain's cgroup(s) and writes the limits; *procs gets an fd of
 * each cgroup.procs, for the launcher to write "0" into (it joins before
 * exec). Limits that cannot be applied are an error; a host where no
 * cgroup can be made at all is only a warning (no fds then). */
bool cgroup_create(const char *run_dir, const struct domain_def *def, GArray **procs,
                   GError **error);
/* Removes the domain's cgroups (once its shim has exited). */
void cgroup_remove(const char *run_dir, const char *name);
/* The directories of the domain's cgroups that exist (for tests, logs). */
GPtrArray *cgroup_dirs(const char *run_dir, const char *name);

/* The same on another host's layout: the directory where cgroup
 * hierarchies are mounted and the file that says the daemon's cgroups
 * (tests/plugin/host/test-cgroup.c lays one out in a temporary directory). */
struct cgroup_host {
    const char *root; /* /sys/fs/cgroup */
    const char *self; /* /proc/self/cgroup */
};
extern const struct cgroup_host cgroup_host_system;
bool cgroup_create_on(const struct cgroup_host *host, const char *run_dir,
                      const struct domain_def *def, GArray **procs, GError **error);
void cgroup_remove_on(const struct cgroup_host *host, const char *run_dir, const char *name);
GPtrArray *cgroup_dirs_on(const struct cgroup_host *host, const char *run_dir, const char *name);
